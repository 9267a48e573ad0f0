package framework

import (
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// KubeconfigFile writes cfg (an admin's) as a kubeconfig file in the test's temporary directory
// and returns its path, for a program that reads KUBECONFIG.
func KubeconfigFile(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := devenv.WriteKubeconfig(cfg, path, "backend"); err != nil {
		t.Fatal(err)
	}
	return path
}

// FreeAddr is a loopback address (host:port) that nothing listens on now, for a program that
// takes a listen address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// WaitHealthy waits up to 30 s for GET url to answer 200.
func WaitHealthy(t testing.TB, url string) {
	t.Helper()
	Eventually(t, 30*time.Second, url+" to answer 200", func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}
