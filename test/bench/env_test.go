package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/platform"
	"github.com/kubeopera/kubeopera/workspaces"
)

// env is the bench's environment: a real kcp and backend, bootstrapped as the e2e suite does it
// (test/e2e/env_test.go), and the manager binary run as a process with the product's identities,
// so what is measured is the manager as it ships, not an in-process copy sharing the bench's heap.
type env struct {
	dir     string
	kcp     *devenv.KCP
	backend *devenv.Backend
	// managerKubeconfig is the manager's backend identity (ServiceAccount kubeopera-manager with
	// config/rbac's rights), as a kubeconfig.
	managerKubeconfig string
	backendCS         kubernetes.Interface
	managerBin        string
	// managerBuild says which manager runs, for the report.
	managerBuild string
	// stops stop what startEnv started, in reverse order.
	stops []func()

	mu  sync.Mutex
	mgr *managerProc
	// logs are the manager's log files, one per start.
	logs []string
}

// managerProc is one run of the manager binary.
type managerProc struct {
	cmd     *exec.Cmd
	done    chan struct{}
	started time.Time
	probe   *probe
}

// startEnv starts kcp and the backend, bootstraps the platform workspace and builds the manager
// (or takes BENCH_MANAGER_BIN). It does not start the manager.
func startEnv(ctx context.Context, s settings) (e *env, err error) {
	dir, err := os.MkdirTemp("", "kubeopera-bench-")
	if err != nil {
		return nil, err
	}
	e = &env{dir: dir, managerBin: s.managerBin, managerBuild: "prebuilt binary (BENCH_MANAGER_BIN)"}
	defer func() {
		if err != nil {
			e.teardown(true)
			e = nil
		}
	}()
	if e.managerBin == "" {
		if e.managerBin, err = framework.Command("manager"); err != nil {
			return e, err
		}
		e.managerBuild = "cmd/manager at " + revision(ctx)
	}
	// As in the e2e suite, the manager is kcp's unprivileged user with the shipped platform role
	// and the backend ServiceAccount with the shipped RBAC: the requests measured are the ones
	// the product's identities may make.
	p, stop, err := platform.Start(ctx, dir)
	if err != nil {
		return e, err
	}
	e.stops = append(e.stops, stop)
	e.kcp, e.backend = p.KCP, p.Backend
	backendDir := filepath.Join(dir, "backend")
	if e.backendCS, err = kubernetes.NewForConfig(e.backend.Config); err != nil {
		return e, err
	}
	// The token outlives the bench's 120m timeout.
	e.managerKubeconfig = filepath.Join(backendDir, "manager-backend.kubeconfig")
	if _, err := devenv.ManagerIdentity(ctx, e.backend.Config, framework.RBACDir(), e.managerKubeconfig, 3*time.Hour); err != nil {
		return e, err
	}
	return e, nil
}

// revision is the repository's commit, marked when the work tree has changes.
func revision(ctx context.Context) string {
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = framework.RepoRoot()
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	rev := git("rev-parse", "--short=12", "HEAD")
	if rev == "" {
		return "an unknown revision"
	}
	if git("status", "--porcelain", "--untracked-files=no") != "" {
		rev += " with uncommitted changes"
	}
	return rev
}

// teardown stops the manager and the servers; the directory (servers' and manager's logs) is
// kept when keep is set.
func (e *env) teardown(keep bool) {
	e.stopManager()
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	if keep {
		fmt.Fprintf(os.Stderr, "bench state (kcp, backend and manager logs) kept in %s\n", e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

// startManager starts the manager binary and returns at once; started is taken just before the
// process is started (the cold start's origin).
func (e *env) startManager() (*managerProc, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ports, err := devenv.FreePorts(3)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(e.dir, fmt.Sprintf("manager-%d.log", len(e.logs)+1))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	e.logs = append(e.logs, logPath)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	cmd := exec.Command(e.managerBin,
		"--kcp-kubeconfig", e.kcp.KubeconfigPath,
		"--kcp-context", "user",
		"--orphan-sweep-kcp-context", "system:admin",
		"--backend-kubeconfig", e.managerKubeconfig,
		"--vcluster-chart", framework.VClusterChart(),
		"--helm-cache-dir", filepath.Join(e.dir, "helm-cache"),
		"--kubeopera-api-base-url=",
		"--metrics-secure=false",
		"--metrics-bind-address", metricsAddr,
		"--pprof-bind-address", pprofAddr,
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--leader-elect=false",
		// The per-workspace count limit is not what is measured.
		"--max-tenants-per-workspace=0",
		// Production logging (JSON, info): what an operator runs, and the level whose error
		// lines the bench counts. --tenant-requeue-interval stays at its default (15s).
		"--environment", "bench",
		"--zap-devel=false",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Heap profiles (heap-<N>.pb.gz) sampled every 64 KiB allocated instead of Go's 512 KiB, so
	// the few megabytes the workspaces of one step add show in them by call site.
	cmd.Env = append(os.Environ(), "GODEBUG=memprofilerate=65536")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	m := &managerProc{cmd: cmd, done: make(chan struct{}), started: started, probe: newProbe(pprofAddr, metricsAddr)}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(m.done) }()
	e.mgr = m
	return m, nil
}

// stopManager stops the manager as Kubernetes stops a Pod (SIGTERM, then SIGKILL after a grace
// period) and waits for it to exit.
func (e *env) stopManager() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mgr == nil {
		return
	}
	devenv.StopProcessGroup(e.mgr.cmd, e.mgr.done, 30*time.Second)
	e.mgr = nil
}

// managerExited reports an error when the running manager has exited on its own.
func (e *env) managerExited() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mgr == nil {
		return nil
	}
	select {
	case <-e.mgr.done:
		return fmt.Errorf("the manager exited (%v); see %s", e.mgr.cmd.ProcessState, e.logs[len(e.logs)-1])
	default:
		return nil
	}
}

// errorLogLines returns the manager's error-level log lines over all its runs: JSON lines with
// "level":"error" (production logging) or console lines with an ERROR level.
func (e *env) errorLogLines() ([]string, error) {
	e.mu.Lock()
	logs := append([]string(nil), e.logs...)
	e.mu.Unlock()
	var lines []string
	for _, path := range logs {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 4<<20), 4<<20)
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(l, `"level":"error"`) || strings.Contains(l, "\tERROR\t") {
				lines = append(lines, l)
			}
		}
	}
	return lines, nil
}

// The bench uses the manager only as the binary it runs: it imports none of its packages, so it
// measures whatever cmd/manager is while those change.

// exportURLs returns the virtual workspace URLs of the kubeopera.io export, once its endpoint
// slice lists at least one (kcp lists a shard only while a workspace on it binds the export).
func (e *env) exportURLs(ctx context.Context) ([]string, error) {
	scheme := runtime.NewScheme()
	if err := apisv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(workspaces.ClusterConfig(e.kcp.Config, bootstrap.PlatformWorkspace), client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	var urls []string
	err = framework.Poll(ctx, time.Second, 2*time.Minute, func(ctx context.Context) (bool, error) {
		es := &apisv1alpha1.APIExportEndpointSlice{}
		if err := c.Get(ctx, client.ObjectKey{Name: "kubeopera.io"}, es); err != nil {
			return false, nil //nolint:nilerr // retried: the slice's status is filled in asynchronously.
		}
		urls = urls[:0]
		for _, ep := range es.Status.APIExportEndpoints {
			urls = append(urls, ep.URL)
		}
		return len(urls) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the kubeopera.io endpoint slice lists no URL: %w", err)
	}
	return urls, nil
}
