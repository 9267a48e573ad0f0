package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// env is the suite's environment: a real kcp, a real backend and the manager binary.
type env struct {
	kcp        *devenv.KCP
	backend    *devenv.Backend
	backendC   client.Client
	api        *kubeoperaAPI
	managerBin string
	dir        string
	mgr        *exec.Cmd
	mgrDone    chan struct{}
	mgrLog     string
	starts     int
	// metricsAddr and probeAddr are where the running manager serves /metrics and /healthz, /readyz.
	metricsAddr, probeAddr string
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func setup(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := &env{dir: t.TempDir()}

	// Build the manager as a user would run it.
	e.managerBin = filepath.Join(buildCommands(t, filepath.Join(e.dir, "bin"), "manager"), "manager")

	e.kcp = framework.StartKCP(t)
	e.backend = framework.StartBackend(t)
	var err error
	e.backendC, err = client.New(e.backend.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := workspaces.Bootstrap(ctx, e.kcp.Config); err != nil {
		t.Fatal(err)
	}
	if _, err := workspaces.EnsureWorkspace(ctx, e.kcp.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	// The manager runs as kcp's unprivileged "user" with exactly the platform workspace role the
	// product ships (apiexports/bootstrap/manager-rbac.yaml), bound to that user.
	if err := workspaces.BindManagerRole(ctx, e.kcp.Config, "user"); err != nil {
		t.Fatal(err)
	}
	if err := e.backendC.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeopera-system"}}); err != nil {
		t.Fatal(err)
	}
	e.api = newKubeoperaAPI(t)
	e.startManager(t)
	t.Cleanup(func() {
		e.stopManager(t)
		if t.Failed() {
			e.dumpManagerLog(t)
		}
	})
	return e
}

// startManager starts the manager binary against kcp and the backend.
func (e *env) startManager(t *testing.T) {
	t.Helper()
	e.starts++
	e.mgrLog = filepath.Join(e.dir, fmt.Sprintf("manager-%d.log", e.starts))
	logf, err := os.Create(e.mgrLog)
	if err != nil {
		t.Fatal(err)
	}
	ports, err := devenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	e.metricsAddr, e.probeAddr = fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	cmd := exec.Command(e.managerBin,
		"--kcp-kubeconfig", e.kcp.KubeconfigPath,
		"--kcp-context", "user",
		"--backend-kubeconfig", e.backend.KubeconfigPath,
		"--vcluster-chart", filepath.Join(framework.RepoRoot(), "test", "charts", "vcluster"),
		"--helm-cache-dir", filepath.Join(e.dir, "helm-cache"),
		"--kubeopera-api-base-url", e.api.URL,
		"--metrics-bind-address", e.metricsAddr,
		"--health-probe-bind-address", e.probeAddr,
		"--tenant-requeue-interval", "1s",
		"--terminator-poll-interval", "1s",
		"--orphan-sweep-interval", "1h",
		"--orphan-sweep-kcp-context", "system:admin",
		"--zap-log-level", "debug",
	)
	cmd.Env = append(os.Environ(), "INTERNAL_SERVICE_TOKEN=e2e-token", "ENVIRONMENT=e2e")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.mgr = cmd
	e.mgrDone = make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(e.mgrDone) }()
}

// stopManager stops the manager the way Kubernetes stops a Pod (SIGTERM) and waits for it.
func (e *env) stopManager(t *testing.T) {
	if e.mgr == nil {
		return
	}
	devenv.StopProcessGroup(e.mgr, e.mgrDone, 30*time.Second)
	e.mgr = nil
}

func (e *env) dumpManagerLog(t *testing.T) {
	for i := 1; i <= e.starts; i++ {
		raw, err := os.ReadFile(filepath.Join(e.dir, fmt.Sprintf("manager-%d.log", i)))
		if err != nil {
			continue
		}
		if len(raw) > 20000 {
			raw = raw[len(raw)-20000:]
		}
		t.Logf("manager run %d log (tail):\n%s", i, raw)
	}
}

// managerLogs returns everything the manager logged so far.
func (e *env) managerLogs() string {
	var buf bytes.Buffer
	for i := 1; i <= e.starts; i++ {
		raw, _ := os.ReadFile(filepath.Join(e.dir, fmt.Sprintf("manager-%d.log", i)))
		buf.Write(raw)
	}
	return buf.String()
}

// tenantWorkspace creates a workspace of type kubeopera-tenant under root:orgs and returns its
// client (as the tenant's admin) and logical cluster name.
func (e *env) tenantWorkspace(t *testing.T, name string) (client.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lc, err := workspaces.EnsureWorkspace(ctx, e.kcp.Config, "root:orgs", name, workspaces.TenantWorkspaceType)
	if err != nil {
		t.Fatal(err)
	}
	c := e.workspaceClient(t, "root:orgs:"+name)
	// The default bindings make the Tenant kind available shortly after the workspace is Ready.
	eventually(t, 2*time.Minute, "Tenant API served in root:orgs:"+name, func() (bool, string) {
		err := c.List(ctx, &kov1alpha1.TenantList{})
		return err == nil, fmt.Sprint(err)
	})
	return c, lc
}

func (e *env) workspaceClient(t *testing.T, path string) client.Client {
	t.Helper()
	c, err := client.New(e.kcpConfig(path), client.Options{Scheme: manager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) kcpConfig(path string) *rest.Config {
	return workspaces.ClusterConfig(e.kcp.Config, path)
}

// eventually polls cond until it holds or the timeout passes; the message of the last poll is
// reported on failure.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, strings.TrimSpace(last))
	}
}

// virtualWorkspaceClient returns a client for one workspace through an export's virtual
// workspace, with the platform admin's identity.
func (e *env) virtualWorkspaceClient(t *testing.T, export, logicalCluster string) client.Client {
	t.Helper()
	var c client.Client
	eventually(t, time.Minute, "virtual workspace of "+export, func() (bool, string) {
		var err error
		c, err = manager.VirtualWorkspaceClient(context.Background(), e.kcpConfig(workspaces.PlatformWorkspace), export, logicalCluster, manager.Scheme())
		return err == nil, fmt.Sprint(err)
	})
	return c
}

// adminDeletesBackendNamespace plays the platform admin removing a backend namespace by hand and
// waits until kube-controller-manager has finished deleting it.
func (e *env) adminDeletesBackendNamespace(t *testing.T, ns *corev1.Namespace) {
	t.Helper()
	ctx := context.Background()
	if err := e.backendC.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "namespace "+ns.Name+" gone", func() (bool, string) {
		err := e.backendC.Get(ctx, client.ObjectKey{Name: ns.Name}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// buildCommands builds the named commands of cmd/ into dir, as `make build` does, and returns dir.
func buildCommands(t *testing.T, dir string, cmds ...string) string {
	t.Helper()
	for _, cmd := range cmds {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "./cmd/"+cmd)
		build.Dir = framework.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("failed to build %s: %v\n%s", cmd, err, out)
		}
	}
	return dir
}
