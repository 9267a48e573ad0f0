package manager_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/kubeopera/kubeopera/internal/manager"
)

// --backend-qps bounds the manager as a whole: every client made from the backend config (each
// a copy of it) takes its tokens from one limiter, of the flag's rate.
func TestBackendClientsShareOneRateLimiter(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := manager.DefaultOptions()
	o.KCPKubeconfig, o.BackendKubeconfig = kubeconfig, kubeconfig
	o.BackendQPS, o.BackendBurst = 7, 9
	cfgs, err := o.Configs()
	if err != nil {
		t.Fatal(err)
	}
	limiter := cfgs.Backend.RateLimiter
	if limiter == nil {
		t.Fatal("the backend config has no rate limiter: every client of it would make one of its own")
	}
	if limiter.QPS() != 7 {
		t.Errorf("limiter QPS %v, want --backend-qps 7", limiter.QPS())
	}
	// controller-runtime, Helm and client-go copy the config for each client they make.
	var shared flowcontrol.RateLimiter = rest.CopyConfig(cfgs.Backend).RateLimiter
	if shared != limiter {
		t.Error("a copy of the backend config has a limiter of its own")
	}
	if cfgs.Helm == nil || cfgs.Helm.RateLimiter != limiter {
		t.Error("Helm's config of the backend does not take its tokens from the backend's limiter")
	}
}
