package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/platform"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/test/sim/scaffolding"
	"github.com/kubeopera/kubeopera/workspaces"
)

// The suite shares ONE environment (kcp, a backend, the kubeopera-api actor and one manager
// process), started at the first test that needs it and stopped by TestMain: starting kcp per
// test would be far too slow. Tests stay independent by each making its own tenant workspaces
// (tenantWorkspace gives them unique names). The few tests that stop or restart the manager do
// not call t.Parallel, so they run alone: Go runs every sequential top-level test before it
// releases the parallel ones, and two managers against the same exports would both reconcile
// every workspace.

// defaultParallelism is -test.parallel unless given: the tests mostly wait on servers, not CPU.
const defaultParallelism = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", defaultParallelism)
	}
	if !testing.Short() && flag.Lookup("test.run").Value.String() == "" {
		// The whole suite runs: the shared environment starts at once, beside the tests that run
		// first (they own their servers, or wait for this one). A chosen test starts it when it
		// needs it.
		go shared.once.Do(func() { shared.env, shared.err = startEnv() })
	}
	code := m.Run()
	if e := shared.env; e != nil {
		if code != 0 {
			e.dumpManagerLog()
		}
		e.teardown(code != 0)
	}
	os.Exit(code)
}

var shared struct {
	once sync.Once
	env  *env
	err  error
}

// sharedEnv returns the suite's environment, starting it at the first call.
func sharedEnv(t *testing.T) *env {
	t.Helper()
	framework.SkipWithoutServers(t)
	shared.once.Do(func() { shared.env, shared.err = startEnv() })
	if shared.err != nil {
		t.Fatalf("the shared e2e environment did not start: %v", shared.err)
	}
	return shared.env
}

// env is the suite's environment: a real kcp, a real backend and the manager binary.
type env struct {
	kcp       *devenv.KCP
	backend   *devenv.Backend
	backendC  client.Client
	backendID *framework.Identity // the manager's: ServiceAccount kubeopera-manager, config/rbac's rights
	api       *sim.KubeoperaAPI
	// vclusters runs the real vCluster of every Tenant where its StatefulSet's Pod would run;
	// the backend's load balancer controller (sim.LoadBalancers) gives their Services addresses
	// that reach them (the manager runs with --vcluster-exposure loadbalancer).
	vclusters *sim.VClusterPods
	gitops    *sim.GitOps
	// charts is the scaffolder's chart mirror; scaffolding the real gitops-scaffolder.
	charts      *sim.ChartRepo
	scaffolding *scaffolding.Env
	managerBin  string
	dir         string
	// stops stop what startEnv started, in reverse order.
	stops []func()
	// workspaceSeq makes workspace names unique within the run.
	workspaceSeq atomic.Int64

	// mu guards the running manager's fields: the restart tests change them.
	mu      sync.Mutex
	mgr     *exec.Cmd
	mgrDone chan struct{}
	starts  int
	// withoutScaffolder starts the manager without GITOPS_SCAFFOLDER_BASE_URL (a restart test).
	withoutScaffolder bool
	// extraArgs are added to the manager's flags (a restart test).
	extraArgs []string
	// metricsAddr and probeAddr are where the running manager serves /metrics and /healthz, /readyz;
	// overviewAddr its fleet overview (secure: HTTPS, every request authenticated and authorized).
	metricsAddr, probeAddr, overviewAddr string
	// provisionerAddr is where the provisioner listens (provisioning_test.go starts it at the first
	// test that needs it); the manager is given its URL and key from the start, as deployed.
	provisionerAddr string
}

// lazy is a part of the suite's environment (a target cluster, the provisioner) started by the
// first test that needs it and stopped with the environment.
type lazy[T any] struct {
	once sync.Once
	v    T
	err  error
}

// get returns the part, starting it at the first call; the stop start returns runs at teardown.
// A part that failed to start fails every test that needs it, saying what did not start.
func (l *lazy[T]) get(t *testing.T, e *env, what string, start func() (T, func(), error)) T {
	t.Helper()
	l.once.Do(func() {
		var stop func()
		l.v, stop, l.err = start()
		if l.err == nil && stop != nil {
			e.mu.Lock()
			e.stops = append(e.stops, stop)
			e.mu.Unlock()
		}
	})
	if l.err != nil {
		t.Fatalf("%s did not start: %v", what, l.err)
	}
	return l.v
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// startEnv starts the shared environment. On error, what was started is stopped again.
func startEnv() (e *env, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kubeopera-e2e-")
	if err != nil {
		return nil, err
	}
	e = &env{dir: dir}
	defer func() {
		if err != nil {
			e.teardown(false)
			e = nil
		}
	}()

	// The manager as a user would run it (built once for the run), built while kcp and the
	// backend start.
	built := make(chan error, 1)
	go func() {
		var err error
		e.managerBin, err = framework.Command("manager")
		built <- err
	}()

	// The manager runs as kcp's unprivileged user with exactly the platform workspace role the
	// product ships (apiexports/bootstrap/manager-rbac.yaml).
	p, stop, err := platform.Start(ctx, e.dir)
	if berr := <-built; berr != nil {
		if err == nil {
			stop()
		}
		return e, berr
	}
	if err != nil {
		return e, err
	}
	e.stops = append(e.stops, stop)
	e.kcp, e.backend = p.KCP, p.Backend
	backendDir := filepath.Join(e.dir, "backend")
	if e.backendC, err = client.New(e.backend.Config, client.Options{Scheme: manager.Scheme()}); err != nil {
		return e, err
	}
	// The platform's backend install, as an admin does it: `kubectl apply -k config` (the
	// manager's, the provisioner's and the gitops-scaffolder's namespaces, identities, RBAC and
	// Deployments; no kubelet runs the Deployments here: the suite runs those programs as
	// processes, each as the ServiceAccount this install made).
	apply := exec.Command(filepath.Join(framework.ToolsBin(), "kubectl"), "--kubeconfig", e.backend.KubeconfigPath,
		"apply", "-k", filepath.Join(framework.RepoRoot(), "config"), "--server-side", "--field-manager=admin")
	if out, err := apply.CombinedOutput(); err != nil {
		return e, fmt.Errorf("kubectl apply -k config: %v\n%s", err, out)
	}
	// On the backend the manager runs as its ServiceAccount with exactly the RBAC and admission
	// policy the product ships (config/rbac), never as the admin.
	if e.backendID, err = framework.ManagerIdentity(ctx, e.backend, backendDir); err != nil {
		return e, err
	}
	if err := e.startVClusters(); err != nil {
		return e, err
	}
	// KubernetesClusters: the OTC Crossplane provider's CRDs on the backend and the sample
	// machine-flavor catalog in the platform workspace, as make run installs them
	// (kubernetescluster_test.go; Crossplane itself is played by crossplaneOTC).
	if err := installOTC(ctx, e); err != nil {
		return e, err
	}
	e.api = sim.NewKubeoperaAPI()
	e.stops = append(e.stops, e.api.Close)
	// What HostClusters use around the platform (the target cluster they connect is started by
	// the first test that needs it: hostTarget): the git server, a chart repository with the
	// real sealed-secrets chart and the stand-ins of the infrastructure layer's charts (the
	// scaffolder's chart mirror), and the real gitops-scaffolder with the real scaffold runner
	// in its Jobs' played Pods.
	if err := e.startGitOps(ctx); err != nil {
		return e, err
	}
	pp, err := devenv.FreePorts(1)
	if err != nil {
		return e, err
	}
	e.provisionerAddr = fmt.Sprintf("127.0.0.1:%d", pp[0])
	if err := e.startManager(); err != nil {
		return e, err
	}
	return e, nil
}

// startGitOps starts the git server, the chart mirror and the gitops-scaffolder (logs in
// scaffolder.log), until teardown.
func (e *env) startGitOps(ctx context.Context) error {
	g, stop, err := sim.StartGitOps(sim.GitOpsOptions{Dir: filepath.Join(e.dir, "gitops")})
	if err != nil {
		return err
	}
	e.gitops = g
	e.stops = append(e.stops, stop)
	charts := append([]string{framework.SealedSecretsChart()}, sim.StandInCharts(framework.RepoRoot())...)
	if e.charts, err = sim.StartChartRepo(filepath.Join(e.dir, "charts"), charts...); err != nil {
		return err
	}
	e.stops = append(e.stops, func() { _ = e.charts.Close() })
	runner, err := framework.Command("scaffold-runner")
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(e.dir, "scaffolder.log"))
	if err != nil {
		return err
	}
	e.scaffolding, err = scaffolding.Start(ctx, scaffolding.Options{
		Backend: e.backend.Config, Root: framework.RepoRoot(), RunnerBinary: runner, Log: logf,
		Jobs: jobs.Config{
			ChartMirror: e.charts.URL,
			// The git server and the targets listen on 127.0.0.1: the admin's exception.
			AllowNetworks:        "127.0.0.1/32",
			SealedSecretsTimeout: 5 * time.Minute,
		},
	})
	if err != nil {
		_ = logf.Close()
		return err
	}
	e.stops = append(e.stops, e.scaffolding.Stop, func() { _ = logf.Close() })
	return nil
}

// startVClusters plays the kubelet for every vCluster StatefulSet on the backend (the real
// vcluster binary runs) and the backend's load balancer controller, until teardown. Their log is
// vclusters.log in the state directory.
func (e *env) startVClusters() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the suite runs each Tenant's real vCluster in namespaces of its own (sim.VClusterPods), which needs root")
	}
	logf, err := os.Create(filepath.Join(e.dir, "vclusters.log"))
	if err != nil {
		return err
	}
	e.vclusters = &sim.VClusterPods{Host: e.backend.Config, BinDir: framework.ToolsBin(), WorkDir: filepath.Join(e.dir, "vclusters"), Log: logf}
	lbs, err := sim.NewLoadBalancers(e.backend.Config, e.vclusters.DialService, func(format string, args ...any) { fmt.Fprintf(logf, format+"\n", args...) })
	if err != nil {
		_ = logf.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := e.vclusters.Run(ctx); err != nil {
			fmt.Fprintf(logf, "VClusterPods: %v\n", err)
		}
	}()
	go func() { defer wg.Done(); lbs.Run(ctx) }()
	e.stops = append(e.stops, func() { cancel(); wg.Wait(); _ = logf.Close() })
	return nil
}

// teardown stops the manager and everything startEnv started; the state directory is kept when
// the run failed, for a look at the logs.
func (e *env) teardown(keep bool) {
	e.stopManager()
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	if keep {
		fmt.Fprintf(os.Stderr, "e2e state (kcp, backend and manager logs) kept in %s\n", e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

// startManager starts the manager binary against kcp and the backend.
func (e *env) startManager() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	ports, err := devenv.FreePorts(3)
	if err != nil {
		return err
	}
	e.starts++
	logf, err := os.Create(e.managerLogPath(e.starts))
	if err != nil {
		return err
	}
	e.metricsAddr, e.probeAddr = fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	e.overviewAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
	prices := filepath.Join(e.dir, "fleet-prices.yaml")
	if err := os.WriteFile(prices, []byte(fleetPriceTable), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(e.managerBin,
		"--kcp-kubeconfig", e.kcp.KubeconfigPath,
		"--kcp-context", "user",
		"--backend-kubeconfig", e.backendID.KubeconfigPath,
		"--vcluster-chart", framework.VClusterChart(),
		// The k8s distro: see sim.VClusterPods (k3s cannot be built here). Tenants reach their
		// vClusters through a load balancer (sim.LoadBalancers plays the backend's).
		"--vcluster-distro", "k8s",
		"--vcluster-exposure", "loadbalancer",
		"--helm-cache-dir", filepath.Join(e.dir, "helm-cache"),
		"--kubeopera-api-base-url", e.api.URL,
		"--cluster-provisioner-base-url", "http://"+e.provisionerAddr,
		"--metrics-bind-address", e.metricsAddr,
		"--health-probe-bind-address", e.probeAddr,
		"--fleet-overview-bind-address", e.overviewAddr,
		"--fleet-overview-secure",
		"--fleet-overview-refresh-interval", "1s",
		"--tenant-requeue-interval", "1s",
		"--flux-chart", framework.FluxChart(),
		"--hostcluster-poll-interval", "1s",
		// Flux on the targets looks at the trees every 2 s: a scaffold's second pass lands soon.
		"--gitops-sync-interval", "2s",
		"--kubernetescluster-poll-interval", "1s",
		"--hostcluster-access-give-up", "20s",
		// A Ready HostCluster's target is checked every 30 s (jittered), so an outage shows soon.
		"--hostcluster-inventory-interval", "30s",
		"--fleet-price-table", prices,
		"--terminator-poll-interval", "1s",
		"--orphan-sweep-interval", "1h",
		"--orphan-sweep-kcp-context", "system:admin",
		"--zap-log-level", "debug",
		// The suite's targets listen on 127.0.0.1: exactly that loopback address is allowed.
		// 127.0.0.3 is denied as an admin's range (TestHostClusterForbiddenAddresses).
		"--target-allow-cidrs", "127.0.0.1/32",
		"--target-deny-cidrs", forbiddenByAdmin+"/32",
	)
	cmd.Args = append(cmd.Args, e.extraArgs...)
	cmd.Env = append(os.Environ(), "INTERNAL_SERVICE_TOKEN=e2e-token", "ENVIRONMENT=e2e", "CLUSTER_PROVISIONER_API_KEY="+provisionerAPIKey)
	if !e.withoutScaffolder {
		cmd.Env = append(cmd.Env, "GITOPS_SCAFFOLDER_BASE_URL="+e.scaffolding.URL, "GITOPS_SCAFFOLDER_API_KEY="+e.scaffolding.APIKey)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return err
	}
	e.mgr = cmd
	e.mgrDone = make(chan struct{})
	done := e.mgrDone
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	return nil
}

// stopManager stops the manager the way Kubernetes stops a Pod (SIGTERM) and waits for it.
func (e *env) stopManager() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mgr == nil {
		return
	}
	devenv.StopProcessGroup(e.mgr, e.mgrDone, 30*time.Second)
	e.mgr = nil
}

// ensureManagerRunning starts the manager again when a test stopped it and failed before it
// started it again, so the tests after it find a manager.
func (e *env) ensureManagerRunning(t *testing.T) {
	e.mu.Lock()
	running := e.mgr != nil
	e.mu.Unlock()
	if !running {
		if err := e.startManager(); err != nil {
			t.Errorf("failed to start the manager again: %v", err)
		}
	}
}

// addrs returns where the running manager serves metrics and probes.
func (e *env) addrs() (metrics, probes string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.metricsAddr, e.probeAddr
}

func (e *env) managerLogPath(run int) string {
	return filepath.Join(e.dir, fmt.Sprintf("manager-%d.log", run))
}

// managerLogs returns everything the manager logged so far, over all its runs.
func (e *env) managerLogs() string {
	e.mu.Lock()
	starts := e.starts
	e.mu.Unlock()
	var buf bytes.Buffer
	for i := 1; i <= starts; i++ {
		raw, _ := os.ReadFile(e.managerLogPath(i))
		buf.Write(raw)
	}
	return buf.String()
}

// dumpManagerLog prints the tail of each manager run's log, for a failed run.
func (e *env) dumpManagerLog() {
	e.mu.Lock()
	starts := e.starts
	e.mu.Unlock()
	for i := 1; i <= starts; i++ {
		raw, err := os.ReadFile(e.managerLogPath(i))
		if err != nil {
			continue
		}
		if len(raw) > 20000 {
			raw = raw[len(raw)-20000:]
		}
		fmt.Fprintf(os.Stderr, "manager run %d log (tail):\n%s\n", i, raw)
	}
}

// logManagerLinesAbout logs, for a failed test, the manager's log lines that name one of the
// test's logical clusters (every reconcile line carries its cluster).
func (e *env) logManagerLinesAbout(t *testing.T, logicalClusters ...string) {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(e.managerLogs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		for _, lc := range logicalClusters {
			if strings.Contains(sc.Text(), lc) {
				lines = append(lines, sc.Text())
				break
			}
		}
	}
	if len(lines) > 200 {
		lines = lines[len(lines)-200:]
	}
	t.Logf("manager log lines about %v (last %d):\n%s", logicalClusters, len(lines), strings.Join(lines, "\n"))
}

// tenantWorkspace creates a workspace of type kubeopera-tenant under root:orgs, named prefix plus
// a number unique in this run, and returns its client (as the tenant's admin), its logical
// cluster name and its name. When the test ends the workspace is deleted (without waiting), and
// when the test failed the manager's log lines about it are logged.
func (e *env) tenantWorkspace(t *testing.T, prefix string) (client.Client, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := fmt.Sprintf("%s-%d", prefix, e.workspaceSeq.Add(1))
	lc, err := workspaces.EnsureWorkspace(ctx, e.kcp.Config, "root:orgs", name, workspaces.TenantWorkspaceTypeIn(bootstrap.PlatformWorkspace))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.logManagerLinesAbout(t, lc)
		}
		_ = workspaces.DeleteWorkspace(context.Background(), e.kcp.Config, "root:orgs", name)
	})
	c := e.workspaceClient(t, "root:orgs:"+name)
	// The default bindings make the Tenant kind available shortly after the workspace is Ready.
	framework.Eventually(t, 2*time.Minute, "Tenant API served in root:orgs:"+name, func() (bool, string) {
		err := c.List(ctx, &kov1alpha1.TenantList{})
		return err == nil, fmt.Sprint(err)
	})
	return c, lc, name
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

// virtualWorkspaceClient returns a client for one workspace through an export's virtual
// workspace, with the platform admin's identity.
func (e *env) virtualWorkspaceClient(t *testing.T, export, logicalCluster string) client.Client {
	t.Helper()
	var c client.Client
	framework.Eventually(t, time.Minute, "virtual workspace of "+export, func() (bool, string) {
		var err error
		c, err = manager.VirtualWorkspaceClient(context.Background(), e.kcpConfig(bootstrap.PlatformWorkspace), export, logicalCluster, manager.Scheme())
		return err == nil, fmt.Sprint(err)
	})
	return c
}

// adminDeletesBackendNamespace plays the platform admin removing a backend namespace by hand, as
// `kubectl delete namespace <name>` does: the delete, then (kubectl's --wait, on by default)
// waiting until the object is gone, which is when kube-controller-manager's namespace controller
// has emptied the namespace and removed its "kubernetes" finalizer.
func (e *env) adminDeletesBackendNamespace(t *testing.T, ns *corev1.Namespace) {
	t.Helper()
	ctx := context.Background()
	if err := e.backendC.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "namespace "+ns.Name+" gone", func() (bool, string) {
		err := e.backendC.Get(ctx, client.ObjectKey{Name: ns.Name}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// buildCommands puts the named commands of cmd/, built once for the run (framework.Command), into
// dir and returns dir.
func buildCommands(t *testing.T, dir string, cmds ...string) string {
	t.Helper()
	if _, err := framework.Commands(dir, cmds...); err != nil {
		t.Fatal(err)
	}
	return dir
}
