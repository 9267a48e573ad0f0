package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// StartBackend starts a backend cluster (kube-apiserver, etcd and a kube-controller-manager running
// the namespace and garbage-collector controllers) and stops it when the test ends.
func StartBackend(t testing.TB) *devenv.Backend {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "kcm.log"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := devenv.StartBackend(context.Background(), devenv.BackendOptions{
		BinDir:         ToolsBin(),
		KubeconfigPath: filepath.Join(dir, "backend.kubeconfig"),
		Output:         f,
	})
	if err != nil {
		t.Fatalf("failed to start the backend: %v", err)
	}
	t.Cleanup(func() { b.Stop(); _ = f.Close() })
	return b
}
