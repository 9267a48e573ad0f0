package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

// vclusterUp waits until the real vCluster of release `release` (run by sim.VClusterPods where
// its StatefulSet's Pod would run) wrote its kubeconfig Secret vc-<release> in its host
// namespace, and returns what it wrote: the Secret and its admin client key.
func vclusterUp(t *testing.T, e *env, namespace, release string) *sim.VClusterKubeconfig {
	t.Helper()
	sec := &corev1.Secret{}
	framework.Eventually(t, 4*time.Minute, "vCluster "+release+" wrote its kubeconfig Secret", func() (bool, string) {
		err := e.backendC.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: sim.VClusterKubeconfigSecretName(release)}, sec)
		return err == nil && len(sec.Data[sim.VClusterKubeconfigKey]) > 0 && len(sec.Data[sim.VClusterCertificateKeyKey]) > 0, fmt.Sprint(err)
	})
	return &sim.VClusterKubeconfig{Secret: sec, ClientKeyPEM: sec.Data[sim.VClusterCertificateKeyKey]}
}

// secretMaterial is what of a vCluster's credentials must never appear in logs, events, status
// or metrics: its client key's PEM body (as a log of the raw key would show it) and the key's
// base64 (as client-key-data in a kubeconfig, or Secret data in JSON, would show it).
func secretMaterial(vc *sim.VClusterKubeconfig) []string {
	lines := strings.Split(strings.TrimSpace(string(vc.ClientKeyPEM)), "\n")
	return []string{lines[1], b64(string(vc.ClientKeyPEM))}
}
