package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/kubeopera/kubeopera/test/sim"
)

// vclusterWritesKubeconfig plays the vCluster control plane of release `release` once its Pod is
// up: vCluster writes its kubeconfig into Secret "vc-" + <vCluster name> in its host namespace,
// and the vCluster's name is the Helm release name, so release vc-alice-default writes Secret
// vc-vc-alice-default (keys config, certificate-authority, client-certificate, client-key,
// token; type Opaque; owned by the vCluster's Service; the server of exportKubeConfig.server).
// Source: loft-sh/vcluster v0.21.2 pkg/setup/controllers.go lines 207-273 and
// pkg/util/kubeconfig/kubeconfig.go lines 28-100; sim.VClusterWritesKubeconfig cites each
// part. No Pod runs here (there is no kubelet), so the test does exactly that write and nothing
// else. bin/devenv simulate-vcluster plays it with the same function.
func vclusterWritesKubeconfig(t *testing.T, e *env, namespace, release string) *sim.VClusterKubeconfig {
	t.Helper()
	written, err := sim.VClusterWritesKubeconfig(context.Background(), e.backend.Config, namespace, release)
	if err != nil {
		t.Fatalf("vCluster actor: %v", err)
	}
	return written
}

// secretMaterial is what of a vCluster's credentials must never appear in logs, events, status
// or metrics: its client key's PEM body (as a log of the raw key would show it) and the key's
// base64 (as client-key-data in a kubeconfig, or Secret data in JSON, would show it).
func secretMaterial(vc *sim.VClusterKubeconfig) []string {
	lines := strings.Split(strings.TrimSpace(string(vc.ClientKeyPEM)), "\n")
	return []string{lines[1], b64(string(vc.ClientKeyPEM))}
}
