package framework

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// StartBackend starts a backend cluster (kube-apiserver, etcd and a kube-controller-manager running
// the namespace and garbage-collector controllers) and stops it when the test ends.
func StartBackend(t testing.TB) *devenv.Backend {
	t.Helper()
	SkipWithoutServers(t)
	b, stop, err := StartBackendIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return b
}

// StartBackendIn starts a backend cluster with its kubeconfig (backend.kubeconfig) and
// kube-controller-manager's log (kcm.log) in dir, for an environment shared by several tests;
// stop stops it.
func StartBackendIn(dir string) (b *devenv.Backend, stop func(), err error) {
	f, err := os.Create(filepath.Join(dir, "kcm.log"))
	if err != nil {
		return nil, nil, err
	}
	b, err = devenv.StartBackend(context.Background(), devenv.BackendOptions{
		BinDir:         ToolsBin(),
		KubeconfigPath: filepath.Join(dir, "backend.kubeconfig"),
		Output:         f,
	})
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("failed to start the backend: %w", err)
	}
	return b, func() { b.Stop(); _ = f.Close() }, nil
}

// RunWithBackend is a TestMain that shares one backend cluster (StartBackendIn) between the
// package's tests: it starts it unless -short, hands its admin config to set, runs the tests,
// stops it and exits with their status. name prefixes its temporary directory.
func RunWithBackend(m *testing.M, name string, set func(*rest.Config)) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b, stop, err := StartBackendIn(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	set(b.Config)
	code := m.Run()
	stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
