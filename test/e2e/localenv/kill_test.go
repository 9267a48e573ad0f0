package localenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
)

// TestLocalEnvironmentStartsAgainAfterKill kills `make run` (bin/devenv) with SIGKILL, which
// gives it no time to stop anything, as a closed terminal, kill -9 or a CI timeout do: every
// server it started (recorded in .dev/pids) is gone soon after, and the next start on the same
// state succeeds. Before that, a start whose KCP_PORT and backend etcd directory another process
// holds stops at once, naming that process.
func TestLocalEnvironmentStartsAgainAfterKill(t *testing.T) {
	framework.SkipWithoutServers(t)
	bin, state, ports, env := newLocalEnv(t)

	// Another process (this test) holds kcp's port and the backend's etcd directory.
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports[0]))
	if err != nil {
		t.Fatal(err)
	}
	etcdDir := filepath.Join(state, "backend-etcd")
	if err := os.MkdirAll(etcdDir, 0o700); err != nil {
		t.Fatal(err)
	}
	held, err := os.Create(filepath.Join(etcdDir, "held"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	refused := exec.CommandContext(ctx, filepath.Join(bin, "devenv"))
	refused.Dir, refused.Env = framework.RepoRoot(), env
	out, err := refused.CombinedOutput()
	timedOut := ctx.Err() != nil
	cancel()
	_ = l.Close()
	_ = held.Close()
	if err := os.Remove(held.Name()); err != nil {
		t.Fatal(err)
	}
	if timedOut || err == nil {
		t.Fatalf("devenv did not exit non-zero at once when another process held its port and data directory (%v):\n%s", err, out)
	}
	self := strconv.Itoa(os.Getpid())
	for _, want := range []string{
		fmt.Sprintf("port %d (kcp, KCP_PORT): held by PID %s: ", ports[0], self),
		etcdDir + " (the backend's etcd): held by PID " + self + ": ",
		"kill " + self + ")",
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("devenv did not say %q:\n%s", want, out)
		}
	}
	if bytes.Contains(out, []byte("Starting kcp")) {
		t.Errorf("devenv started servers although what they need was held:\n%s", out)
	}

	first := startDevenv(t, bin, state, env)
	pids := filepath.Join(state, "pids")
	recs, err := devenv.ReadRecords(pids)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range recs {
		names[r.Name] = true
		if !r.Running() {
			t.Errorf("%s is recorded but does not run", r)
		}
	}
	for _, want := range []string{"kcp", "backend-etcd", "backend-kube-apiserver", "backend-kube-controller-manager",
		"target-etcd", "target-kube-apiserver", "target-kube-controller-manager", "manager"} {
		if !names[want] {
			t.Errorf("%s is not recorded in %s; records: %v", want, pids, recs)
		}
	}
	t.Cleanup(func() {
		// Servers that outlived devenv (the test failed) do not outlive the test.
		for _, r := range recs {
			if r.Running() {
				_ = syscall.Kill(r.PID, syscall.SIGKILL)
			}
		}
	})

	// kill -9 of devenv alone, not its process group.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.done:
	case <-time.After(30 * time.Second):
		t.Fatal("devenv did not exit within 30s of SIGKILL")
	}
	framework.Eventually(t, 30*time.Second, "every server of the killed devenv gone", func() (bool, string) {
		var running []string
		for _, r := range recs {
			if r.Running() {
				running = append(running, r.String())
			}
		}
		ps, _ := exec.Command("pgrep", "-a", "-f", state).Output()
		return len(running) == 0 && len(bytes.TrimSpace(ps)) == 0, fmt.Sprintf("recorded and running: %s; mentioning the state: %s", strings.Join(running, "; "), ps)
	})

	// The next start on the same state succeeds, and Ctrl-C stops it, leaving no record.
	second := startDevenv(t, bin, state, env)
	second.stop(t)
	if left, err := devenv.ReadRecords(pids); err != nil || len(left) != 0 {
		t.Errorf("records after Ctrl-C: %v, %v; want none", left, err)
	}
}
