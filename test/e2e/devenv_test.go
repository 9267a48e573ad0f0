package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/test/framework"
)

// syncBuffer is a bytes.Buffer safe for a process writing and the test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLocalEnvironment runs what `make run` runs (bin/devenv) in a temporary state directory and
// follows the tenant's walkthrough it prints: apply the sample Tenant in root:orgs:demo through the
// "demo" context, play the vCluster, wait for Ready, then Ctrl-C and check that everything stopped.
func TestLocalEnvironment(t *testing.T) {
	dir := t.TempDir()
	bin := buildCommands(t, filepath.Join(dir, "bin"), "manager", "devenv")
	ports, err := devenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	env := append(os.Environ(), "KUBEOPERA_DEV_DIR="+state, "KUBEOPERA_BIN_DIR="+bin, "KCP_PORT="+strconv.Itoa(ports[0]), "BACKEND_KUBECONFIG=")
	out := &syncBuffer{}
	run := exec.Command(filepath.Join(bin, "devenv"))
	run.Dir, run.Env, run.Stdout, run.Stderr = framework.RepoRoot(), env, out, out
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("devenv output:\n%s", out.String())
			if raw, err := os.ReadFile(filepath.Join(state, "logs", "manager.log")); err == nil {
				if len(raw) > 10000 {
					raw = raw[len(raw)-10000:]
				}
				t.Logf("manager log tail:\n%s", raw)
			}
		}
	})

	eventually(t, 5*time.Minute, "the environment to be up", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("devenv exited early: %v", err)
		default:
		}
		return strings.Contains(out.String(), "KubeOpera is running"), ""
	})
	if !strings.Contains(out.String(), "using the repo's local chart") && !strings.Contains(out.String(), "vCluster chart oci://") {
		t.Errorf("devenv did not say which vCluster chart it uses:\n%s", out.String())
	}

	// The tenant's commands, with the paths it printed.
	kubeconfig := filepath.Join(state, "kcp.kubeconfig")
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: "demo"}).ClientConfig()
	if err != nil {
		t.Fatalf("%s has no usable demo context: %v", kubeconfig, err)
	}
	demo, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", "tenant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tn := &kov1alpha1.Tenant{}
	if err := yaml.UnmarshalStrict(raw, tn); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eventually(t, 2*time.Minute, "the sample Tenant applied in root:orgs:demo", func() (bool, string) {
		err := demo.Create(ctx, tn.DeepCopy())
		return err == nil, fmt.Sprint(err)
	})
	waitPhase(t, demo, tn.Namespace, tn.Name, kov1alpha1.TenantPhaseProvisioning)
	sim := exec.Command(filepath.Join(bin, "devenv"), "simulate-vcluster", tn.Spec.TenantName, "root:orgs:demo")
	sim.Dir, sim.Env = framework.RepoRoot(), env
	if b, err := sim.CombinedOutput(); err != nil {
		t.Fatalf("simulate-vcluster: %v\n%s", err, b)
	}
	ready := waitPhase(t, demo, tn.Namespace, tn.Name, kov1alpha1.TenantPhaseReady)
	if ready.Status.KubeconfigSecret == "" {
		t.Error("no kubeconfig Secret named in status")
	}

	// Ctrl-C stops everything.
	_ = run.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("devenv exited with %v after Ctrl-C", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("devenv did not stop within 90s of Ctrl-C")
	}
	ps, _ := exec.Command("pgrep", "-f", state).Output()
	if len(bytes.TrimSpace(ps)) > 0 {
		t.Errorf("processes of the environment still run after Ctrl-C: %s", ps)
	}
}
