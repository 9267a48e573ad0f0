package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/test/framework"
)

// TestManagerNamesTheKCPItTalksTo: the running manager logged the kcp release it found, and a
// manager pointed at a server that is no kcp (the backend's kube-apiserver, as an admin who
// swapped the two kubeconfigs would) refuses to start, saying which version it found, before it
// writes anything.
func TestManagerNamesTheKCPItTalksTo(t *testing.T) {
	// It starts its own servers, or only reads the shared ones: it runs beside the parallel tests.
	t.Parallel()
	e := sharedEnv(t)
	// The manager logs it first thing after it starts; the suite may have started it just now.
	framework.Eventually(t, time.Minute, "the manager logs the kcp release it connected to", func() (bool, string) {
		var connected string
		for _, line := range strings.Split(e.managerLogs(), "\n") {
			if strings.Contains(line, "Connected to kcp") {
				connected = line
				break
			}
		}
		return strings.Contains(connected, `"version":"v0.31.2"`) && strings.Contains(connected, `+kcp-v0.31.2`), fmt.Sprintf("the line: %q", connected)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.managerBin,
		"--kcp-kubeconfig", e.backend.KubeconfigPath,
		"--backend-kubeconfig", e.backendID.KubeconfigPath,
		"--vcluster-chart", filepath.Join(t.TempDir(), "unused"),
		"--helm-cache-dir", t.TempDir(),
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--fleet-overview-bind-address", "0",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("the manager against a kube-apiserver as kcp: %v (it must exit with an error); output:\n%s", err, out.String())
	}
	for _, want := range []string{"Refusing to start against this kcp", "v1.36.3", "which names no kcp release"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the manager's refusal does not say %q; output:\n%s", want, out.String())
		}
	}
}

// TestKCPFrontProxyAndCacheServerAreBuilt: make tools builds kcp's front-proxy and cache server
// from the kcp release the tests run, stamped like kcp's release builds.
func TestKCPFrontProxyAndCacheServerAreBuilt(t *testing.T) {
	// It starts its own servers, or only reads the shared ones: it runs beside the parallel tests.
	t.Parallel()
	bin := filepath.Join(framework.RepoRoot(), "_tools", "bin")
	out, err := exec.Command(filepath.Join(bin, "kcp-front-proxy"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "+kcp-v0.31.2") {
		t.Errorf("kcp-front-proxy --version = %q, %v; want a version naming kcp v0.31.2", out, err)
	}
	out, err = exec.Command(filepath.Join(bin, "cache-server"), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Starts a server that hosts data/resources") {
		t.Errorf("cache-server --help = %q, %v; want its usage", tailBytes(out, 2000), err)
	}
}

func tailBytes(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[len(b)-n:]
}
