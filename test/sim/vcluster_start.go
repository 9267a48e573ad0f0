//go:build linux

package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// StartVClusterPods runs VClusterPods on host until the test ends, for the StatefulSets schedule
// lets run (nil: every one), with the binaries of _tools/bin (binDir). Its log is shown when the
// test fails.
func StartVClusterPods(t testing.TB, host *rest.Config, binDir string, schedule func(namespace, name string) bool) *VClusterPods {
	t.Helper()
	log := &lockedBuffer{}
	pods := &VClusterPods{Host: host, BinDir: binDir, WorkDir: t.TempDir(), Log: log, Schedule: schedule}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pods.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("VClusterPods: %v", err)
		}
		if t.Failed() {
			t.Logf("VClusterPods' log:\n%s", log.String())
		}
	})
	return pods
}

// AwaitVClusterKubeconfig waits up to timeout until the vCluster of release `release` wrote its
// kubeconfig Secret vc-<release> in namespace, and returns what it wrote.
func AwaitVClusterKubeconfig(ctx context.Context, host *rest.Config, namespace, release string, timeout time.Duration) (*VClusterKubeconfig, error) {
	cs, err := kubernetes.NewForConfig(host)
	if err != nil {
		return nil, err
	}
	var sec *corev1.Secret
	var last error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		sec, last = cs.CoreV1().Secrets(namespace).Get(ctx, VClusterKubeconfigSecretName(release), metav1.GetOptions{})
		return last == nil && len(sec.Data[VClusterKubeconfigKey]) > 0 && len(sec.Data[VClusterCertificateKeyKey]) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("vCluster %s wrote no kubeconfig Secret %s in %s within %s (last: %v)", release, VClusterKubeconfigSecretName(release), namespace, timeout, last)
	}
	return &VClusterKubeconfig{Secret: sec, ClientKeyPEM: sec.Data[VClusterCertificateKeyKey]}, nil
}
