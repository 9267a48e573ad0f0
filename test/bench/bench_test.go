package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/workspaces"
)

// settings are the bench's knobs, from the environment.
type settings struct {
	// steps are the cumulative numbers of tenant workspaces measured (BENCH_WORKSPACES).
	steps []int
	// rate is how many Tenants per second are created, for the manager and the floor alike
	// (BENCH_RATE): both see the same arrival pattern, so their latencies compare. The default,
	// 2/s, leaves this 2-core machine headroom: kcp, the backend, etcd and the manager share it,
	// and at 10/s the vCluster installs alone (about 4.5 a second here) saturate it, so the
	// latencies measure the machine's queue rather than the manager.
	rate float64
	// warmup workspaces (BENCH_WARMUP) are provisioned first and not counted.
	warmup int
	// parallel is how many workspaces are created at once.
	parallel int
	// vclusterDelay is how long after its release is deployed the vCluster actor writes its
	// kubeconfig Secret (BENCH_VCLUSTER_DELAY, a Go duration; default 15 s). The Secret is
	// written by the vCluster itself (docs/tenant.md#names), so only once its StatefulSet's Pod
	// has been scheduled, pulled its images and started its control plane: never the moment
	// Helm (Wait=false) reports the release deployed. The bench cannot run hundreds of real
	// vClusters on one machine (the other suites do run them: sim.VClusterPods), so the actor
	// plays the write after the delay the real one takes here: vCluster v0.21.0 (k8s distro)
	// under sim.VClusterPods wrote its Secret 12-14 s after its Pod started
	// (TestVClusterPodsRunTheRealVCluster), with no image pull; 15 s rounds that up.
	vclusterDelay time.Duration
	// managerBin is a prebuilt manager (BENCH_MANAGER_BIN); empty: build ./cmd/manager.
	managerBin string
	// resultsDir receives latest.json, latest.png and the heap profiles (BENCH_RESULTS_DIR).
	resultsDir string
}

func settingsFromEnv() (settings, error) {
	s := settings{rate: 2, warmup: 5, parallel: 16, vclusterDelay: 15 * time.Second,
		managerBin: os.Getenv("BENCH_MANAGER_BIN"),
		resultsDir: filepath.Join(framework.RepoRoot(), "bench", "results")}
	if d := os.Getenv("BENCH_RESULTS_DIR"); d != "" {
		s.resultsDir = d
	}
	steps := "10,100,500"
	if v := os.Getenv("BENCH_WORKSPACES"); v != "" {
		steps = v
	}
	for _, f := range strings.Split(steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(s.steps) > 0 && n <= s.steps[len(s.steps)-1]) {
			return s, fmt.Errorf("BENCH_WORKSPACES=%q: want increasing positive totals, e.g. 10,100,500", steps)
		}
		s.steps = append(s.steps, n)
	}
	for _, v := range []struct {
		env  string
		into *int
	}{{"BENCH_WARMUP", &s.warmup}} {
		if raw := os.Getenv(v.env); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 {
				return s, fmt.Errorf("%s=%q is not a count", v.env, raw)
			}
			*v.into = n
		}
	}
	if raw := os.Getenv("BENCH_VCLUSTER_DELAY"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			return s, fmt.Errorf("BENCH_VCLUSTER_DELAY=%q is not a duration", raw)
		}
		s.vclusterDelay = d
	}
	if raw := os.Getenv("BENCH_RATE"); raw != "" {
		r, err := strconv.ParseFloat(raw, 64)
		if err != nil || r <= 0 {
			return s, fmt.Errorf("BENCH_RATE=%q is not a positive rate", raw)
		}
		s.rate = r
	}
	return s, nil
}

// benchRan guards the scenario: it builds servers and hundreds of workspaces, so it runs once
// per process whatever -benchtime says. (Its figures are reported by sub-benchmarks, which
// already makes the testing package call BenchmarkFanIn once.)
var benchRan bool

// BenchmarkFanIn measures the manager against the number of tenant workspaces it serves, each
// with one Tenant: see the package doc. Run it with `make bench`.
func BenchmarkFanIn(b *testing.B) {
	framework.SkipWithoutServers(b)
	if benchRan {
		b.Skip("the scenario already ran in this process")
	}
	benchRan = true
	s, err := settingsFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	started := time.Now()
	progress("starting kcp and the backend")
	e, err := startEnv(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		cancel() // the watches first, so they do not report the servers going away
		e.teardown(b.Failed() || os.Getenv("BENCH_KEEP") != "")
	}()
	if err := os.MkdirAll(s.resultsDir, 0o755); err != nil {
		b.Fatal(err)
	}
	r := &run{s: s, e: e, started: started, kcpCfg: fastConfig(e.kcp.Config), backendCfg: fastConfig(e.backend.Config)}
	if r.backendW, err = watchBackend(ctx, r.backendCfg); err != nil {
		b.Fatal(err)
	}
	if r.mgr, err = e.startManager(); err != nil {
		b.Fatal(err)
	}
	if err := r.warmUp(ctx); err != nil {
		r.fail(b, err)
	}
	for _, n := range s.steps {
		row, err := r.step(ctx, n)
		if err != nil {
			r.fail(b, err)
		}
		r.rows = append(r.rows, row)
		if err := writeReport(s.resultsDir, r.report()); err != nil {
			b.Fatal(err)
		}
	}
	fmt.Println()
	printTable(os.Stdout, r.rows)
	if lines, _ := e.errorLogLines(); len(lines) > 0 {
		fmt.Printf("\nthe manager logged %d error lines; the first ones:\n", len(lines))
		for _, l := range lines[:min(len(lines), 10)] {
			fmt.Println(l)
		}
	}
	fmt.Printf("\nwrote %s and %s\n", filepath.Join(s.resultsDir, "latest.json"), filepath.Join(s.resultsDir, "latest.png"))

	// One sub-benchmark per step reports its figures in the benchmark format (benchstat reads
	// them); the work was done above, so its ns/op would mean nothing and is left out (0).
	for _, row := range r.rows {
		b.Run(fmt.Sprintf("workspaces=%d", row.Workspaces), func(b *testing.B) {
			for _, m := range []struct {
				v    float64
				unit string
			}{
				{0, "ns/op"},
				{row.HeapBytesPerWorkspace, "heap-B/workspace"},
				{row.GoroutinesPerWorkspace, "goroutines/workspace"},
				{row.CRToBackendNamespaceP50Ms, "cr-ns-p50-ms"},
				{row.CRToBackendNamespaceP99Ms, "cr-ns-p99-ms"},
				{row.CRToReleaseP99Ms, "cr-release-p99-ms"},
				{row.BackendToStatusP99Ms, "backend-ready-p99-ms"},
				{row.FloorP99Ms, "floor-p99-ms"},
				{row.RatioP99, "ratio-p99"},
				{row.KCPRequestsPerTenant, "kcp-requests/tenant"},
				{row.BackendRequestsPerTenant, "backend-requests/tenant"},
				{row.PassesPerTenant, "passes/tenant"},
				{row.QueueWaitP99Ms, "queue-wait-p99-ms"},
				{float64(row.ActiveWorkersPeak), "busy-workers-peak"},
				{float64(row.KCPWatchConnections), "kcp-watches"},
				{row.IdleWritesPerMinute, "idle-writes/min"},
				{row.ColdStartSeconds, "cold-start-s"},
				{float64(row.ManagerErrorLogLines), "error-log-lines"},
			} {
				b.ReportMetric(m.v, m.unit)
			}
		})
	}
}

// progress prints a timestamped line at once: the run takes long and go test streams a
// benchmark's output.
func progress(format string, args ...any) {
	fmt.Printf("%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// fastConfig is cfg without client-go's default client-side limit (5 requests/s), which would
// pace the bench's own requests instead of BENCH_RATE.
func fastConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 1000, 2000
	return c
}

// run is the state of one bench run.
type run struct {
	s                  settings
	e                  *env
	started            time.Time
	kcpCfg, backendCfg *rest.Config
	// floorC is the floor client, running beside the manager from the warm-up on.
	floorC   *floorClient
	mgr      *managerProc
	vwURLs   []string
	backendW *backendWatch
	tenantW  *tenantWatch
	// workspaces are the counted tenant workspaces, in creation order.
	workspaces []*workspace
	// tenants are every Tenant the manager serves (the warm-up's and the steps').
	tenants []*tenant
	// base is the settled manager at baseN workspaces that the next step's slopes start from:
	// after the warm-up, then the previous step's reading.
	baseN          int
	baseHeap       uint64
	baseGoroutines int
	rows           []row
}

// workspace is a tenant workspace (type kubeopera-tenant, so both exports are bound).
type workspace struct {
	name    string
	cluster string
	// tenants is the Tenant resource of its namespace "default", as the workspace's admin.
	tenants dynamic.ResourceInterface
}

// tenant is one Tenant the bench created, with the instants its latencies start from.
type tenant struct {
	ws         *workspace
	name       string
	tenantName string
	// created is when the create request was sent.
	created time.Time
	// kubeconfigWritten is when the vCluster actor started writing its kubeconfig Secret.
	kubeconfigWritten time.Time
}

func (t *tenant) key() string { return tenantKey(t.ws.cluster, "default", t.name) }
func (t *tenant) hostNamespace() string {
	return workspaces.VClusterNamespace(t.ws.cluster, t.tenantName)
}
func (t *tenant) release() string { return "vc-" + t.tenantName }

// releaseKey names t's release records in the backend watch: <storage namespace>/<release>; the
// Tenant controller keeps them in kcp-<fp>, out of the host namespace.
func (t *tenant) releaseKey() string { return workspaces.Namespace(t.ws.cluster) + "/" + t.release() }

// object is the Tenant as a tenant would apply it: the seed's shape, a 1 CPU / 1Gi quota.
func (t *tenant) object(cloudSpaceID string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kov1alpha1.GroupVersion.String(),
		"kind":       "Tenant",
		"metadata":   map[string]any{"namespace": "default", "name": t.name},
		"spec": map[string]any{
			"userID":       "7e9d3a1b-0000-4000-8000-00000000b0b0",
			"tenantName":   t.tenantName,
			"cloudSpaceID": cloudSpaceID,
			"quota":        map[string]any{"cpu": "1", "memory": "1Gi"},
		},
	}}
}

// fail ends the bench with err, the manager's recent error lines and where its logs are.
func (r *run) fail(b *testing.B, err error) {
	b.Helper()
	if lines, _ := r.e.errorLogLines(); len(lines) > 0 {
		b.Logf("manager error lines (last %d):\n%s", min(len(lines), 20), strings.Join(lines[max(0, len(lines)-20):], "\n"))
	}
	b.Fatalf("%v (manager logs in %s)", err, r.e.dir)
}

// warmUp provisions the warm-up workspaces (loading the chart, filling caches, opening the
// watches) and takes the baseline the first step's slopes start from.
func (r *run) warmUp(ctx context.Context) error {
	names := make([]string, r.s.warmup)
	for i := range names {
		names[i] = fmt.Sprintf("warmup-%d", i+1)
	}
	progress("warm-up: %d workspaces", len(names))
	wss, err := r.addWorkspaces(ctx, names)
	if err != nil {
		return err
	}
	// kcp lists the export's virtual workspace URL once a workspace binds it.
	if r.vwURLs, err = r.e.exportURLs(ctx); err != nil {
		return err
	}
	if r.tenantW, err = watchTenants(ctx, r.kcpCfg, r.vwURLs); err != nil {
		return err
	}
	// The floor runs beside the manager from here on, on every Tenant, as the manager's backend
	// identity with the manager's default backend rate limits (--backend-qps 100, burst 200).
	floorCfg, err := clientcmd.BuildConfigFromFlags("", r.e.managerKubeconfig)
	if err != nil {
		return err
	}
	floorCfg.QPS, floorCfg.Burst = 100, 200
	if r.floorC, err = startFloorClient(ctx, r.kcpCfg, floorCfg, r.vwURLs); err != nil {
		return err
	}
	ts := make([]*tenant, len(wss))
	for i, ws := range wss {
		ts[i] = &tenant{ws: ws, name: "t", tenantName: ws.name}
	}
	if err := r.provision(ctx, ts); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := r.floorLatencies(ctx, ts); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	r.baseHeap, err = r.settle(ctx)
	if err != nil {
		return err
	}
	if r.baseGoroutines, err = r.mgr.probe.goroutines(ctx); err != nil {
		return err
	}
	progress("warm-up done: heap %d B, %d goroutines", r.baseHeap, r.baseGoroutines)
	return nil
}

// step grows the workspaces to n, each new one with one Tenant, and measures.
func (r *run) step(ctx context.Context, n int) (row, error) {
	out := row{Workspaces: n}
	prev := len(r.workspaces)
	names := make([]string, 0, n-prev)
	for i := prev + 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("bench-%d", i))
	}
	progress("N=%d: creating %d workspaces", n, len(names))
	wss, err := r.addWorkspaces(ctx, names)
	if err != nil {
		return out, err
	}
	r.workspaces = append(r.workspaces, wss...)
	// The manager engages the new workspaces before their Tenants arrive, so the latencies are
	// those of a Tenant in a workspace the manager serves already, not of engaging one.
	if _, err := r.settle(ctx); err != nil {
		return out, err
	}

	ts := make([]*tenant, len(wss))
	for i, ws := range wss {
		ts[i] = &tenant{ws: ws, name: "t", tenantName: ws.name}
	}
	progress("N=%d: creating %d Tenants at %g/s", n, len(ts), r.s.rate)
	before, err := r.mgr.probe.metrics(ctx)
	if err != nil {
		return out, err
	}
	peak := r.sampleActiveWorkers(ctx)
	if err := r.provision(ctx, ts); err != nil {
		return out, fmt.Errorf("N=%d: %w", n, err)
	}
	out.ActiveWorkersPeak = peak()
	after, err := r.mgr.probe.metrics(ctx)
	if err != nil {
		return out, err
	}
	out.Tenants = len(ts)
	perTenant := func(v float64) float64 { return math.Round(v/float64(len(ts))*10) / 10 }
	out.KCPRequestsPerTenant = perTenant(after.requests(hostOf(r.kcpCfg)) - before.requests(hostOf(r.kcpCfg)))
	out.BackendRequestsPerTenant = perTenant(after.requests(hostOf(r.backendCfg)) - before.requests(hostOf(r.backendCfg)))
	out.PassesPerTenant = perTenant(after.tenantReconciles() - before.tenantReconciles())
	out.RequestsPerTenant = map[string]float64{}
	was := before.apiRequests()
	for k, v := range after.apiRequests() {
		if d := perTenant(v - was[k]); d >= 0.05 {
			out.RequestsPerTenant[k] = d
		}
	}
	out.QueueWaitP99Ms = ms(time.Duration(histogramQuantile(before.tenantQueueWait(), after.tenantQueueWait(), 0.99) * float64(time.Second)))
	progress("N=%d: per Tenant %.1f kcp and %.1f backend requests, %.1f passes; queue wait p99 %.0f ms; %d workers busy at most",
		n, out.KCPRequestsPerTenant, out.BackendRequestsPerTenant, out.PassesPerTenant, out.QueueWaitP99Ms, out.ActiveWorkersPeak)
	progress("N=%d: requests per Tenant by kind: %s", n, breakdown(out.RequestsPerTenant))
	var toNS, toRelease, toReady []time.Duration
	for _, t := range ts {
		nsAt, _ := r.backendW.namespaces.get(t.hostNamespace())
		relAt, _ := r.backendW.releases.get(t.releaseKey())
		readyAt, _ := r.tenantW.ready.get(t.key())
		toNS = append(toNS, nsAt.Sub(t.created))
		toRelease = append(toRelease, relAt.Sub(t.created))
		toReady = append(toReady, readyAt.Sub(t.kubeconfigWritten))
	}
	out.CRToBackendNamespaceP50Ms, out.CRToBackendNamespaceP99Ms = ms(percentile(toNS, 50)), ms(percentile(toNS, 99))
	out.CRToReleaseP50Ms, out.CRToReleaseP99Ms = ms(percentile(toRelease, 50)), ms(percentile(toRelease, 99))
	out.BackendToStatusP50Ms, out.BackendToStatusP99Ms = ms(percentile(toReady, 50)), ms(percentile(toReady, 99))

	floor, err := r.floorLatencies(ctx, ts)
	if err != nil {
		return out, fmt.Errorf("N=%d floor: %w", n, err)
	}
	out.FloorSamples = len(floor)
	out.FloorP50Ms, out.FloorP99Ms = ms(percentile(floor, 50)), ms(percentile(floor, 99))
	out.RatioP99 = ratio(out.CRToBackendNamespaceP99Ms, out.FloorP99Ms)
	progress("N=%d: floor p50 %.1f ms, p99 %.1f ms; manager p99 %.1f ms", n, out.FloorP50Ms, out.FloorP99Ms, out.CRToBackendNamespaceP99Ms)
	heap, err := r.settle(ctx)
	if err != nil {
		return out, err
	}
	goroutines, err := r.mgr.probe.goroutines(ctx)
	if err != nil {
		return out, err
	}
	out.HeapBytes, out.Goroutines = heap, goroutines
	out.HeapBytesPerWorkspace = math.Round(slope(float64(r.baseHeap), float64(heap), r.baseN, n))
	out.GoroutinesPerWorkspace = math.Round(slope(float64(r.baseGoroutines), float64(goroutines), r.baseN, n)*1000) / 1000
	r.baseN, r.baseHeap, r.baseGoroutines = n, heap, goroutines
	if err := r.mgr.probe.saveHeapProfile(ctx, filepath.Join(r.s.resultsDir, fmt.Sprintf("heap-%d.pb.gz", n))); err != nil {
		return out, err
	}
	progress("N=%d: heap %d B (%.0f B/workspace), %d goroutines (%.2f/workspace)", n, heap, out.HeapBytesPerWorkspace, goroutines, out.GoroutinesPerWorkspace)

	if out.KCPWatchConnections, out.IdleWritesPerMinute, err = r.idle(ctx); err != nil {
		return out, err
	}
	progress("N=%d: %d kcp watches, %.0f writes/min idle", n, out.KCPWatchConnections, out.IdleWritesPerMinute)

	cold, deferred, err := r.coldStart(ctx)
	if err != nil {
		return out, fmt.Errorf("N=%d cold start: %w", n, err)
	}
	out.ColdStartSeconds = math.Round(cold.Seconds()*1000) / 1000
	out.ColdStartDeferred = deferred
	// The next step's slopes start from this step's reading, not from the restarted manager's:
	// a manager that has installed nothing since its start has not loaded the chart nor filled
	// Helm's and the clients' caches, and the next step's first installs would count all of
	// that as the new workspaces' cost. The restarted heap is recorded for comparison.
	if out.HeapBytesAfterColdStart, err = r.settle(ctx); err != nil {
		return out, err
	}
	progress("N=%d: cold start %.2fs (%d drift checks deferred); restarted manager's heap %d B", n, out.ColdStartSeconds, out.ColdStartDeferred, out.HeapBytesAfterColdStart)
	lines, err := r.e.errorLogLines()
	if err != nil {
		return out, err
	}
	out.ManagerErrorLogLines = len(lines)
	return out, nil
}

func (r *run) report() report {
	rep := report{Started: r.started, Manager: r.e.managerBuild, WarmupWorkspaces: r.s.warmup, TenantsPerSecond: r.s.rate,
		TenantRequeueInterval: "15s (the manager's default)", Steps: r.rows}
	if len(r.rows) > 0 {
		rep.ManagerErrorLogLines = r.rows[len(r.rows)-1].ManagerErrorLogLines
	}
	return rep
}

// addWorkspaces creates the named tenant workspaces, r.s.parallel at a time, and returns once
// each serves the Tenant API (its default APIBindings are bound).
func (r *run) addWorkspaces(ctx context.Context, names []string) ([]*workspace, error) {
	out := make([]*workspace, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, r.s.parallel)
	var wg sync.WaitGroup
	var done sync.Mutex
	ready := 0
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = r.addWorkspace(ctx, name)
			done.Lock()
			ready++
			if ready%50 == 0 {
				progress("  %d/%d workspaces ready", ready, len(names))
			}
			done.Unlock()
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (r *run) addWorkspace(ctx context.Context, name string) (*workspace, error) {
	lc, err := workspaces.EnsureWorkspace(ctx, r.kcpCfg, "root:orgs", name, workspaces.TenantWorkspaceTypeIn(bootstrap.PlatformWorkspace))
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(workspaces.ClusterConfig(r.kcpCfg, "root:orgs:"+name))
	if err != nil {
		return nil, err
	}
	ws := &workspace{name: name, cluster: lc, tenants: dc.Resource(tenantsGVR).Namespace("default")}
	err = framework.Poll(ctx, 250*time.Millisecond, 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := ws.tenants.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("workspace %s does not serve Tenants: %w", name, err)
	}
	return ws, nil
}

// provision creates ts at BENCH_RATE, plays each one's vCluster once its release is deployed,
// and returns when every one is Ready.
func (r *run) provision(ctx context.Context, ts []*tenant) error {
	r.tenants = append(r.tenants, ts...)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute+time.Duration(len(ts))*2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	actorErrs := make([]error, len(ts))
	for i, t := range ts {
		wg.Go(func() { actorErrs[i] = r.playVCluster(ctx, t) })
	}
	if err := r.createPaced(ctx, ts, func(t *tenant) string { return t.ws.name }); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	wg.Wait()
	if err := errors.Join(actorErrs...); err != nil {
		return r.notReady(ts, err)
	}
	for _, t := range ts {
		if _, err := r.tenantW.ready.wait(ctx, t.key()); err != nil {
			return r.notReady(ts, err)
		}
	}
	return nil
}

// sampleActiveWorkers reads the Tenant controller's busy workers every 200 ms until the
// returned function is called, which stops and returns the most seen at once.
func (r *run) sampleActiveWorkers(ctx context.Context) func() int {
	ctx, cancel := context.WithCancel(ctx)
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if f, err := r.mgr.probe.metrics(ctx); err == nil {
				if n := int64(f.tenantActiveWorkers()); n > peak.Load() {
					peak.Store(n)
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() int {
		cancel()
		<-done
		return int(peak.Load())
	}
}

// hostOf is cfg's host:port, as client-go labels its requests.
func hostOf(cfg *rest.Config) string {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return cfg.Host
	}
	return u.Host
}

// notReady wraps err with how many of ts are Ready and what the first others show.
func (r *run) notReady(ts []*tenant, err error) error {
	var ready int
	var others []string
	for _, t := range ts {
		if _, ok := r.tenantW.ready.get(t.key()); ok {
			ready++
		} else if len(others) < 10 {
			others = append(others, fmt.Sprintf("%s (%s): %s", t.ws.name, t.ws.cluster, r.tenantW.stateOf(t.key())))
		}
	}
	if e := r.e.managerExited(); e != nil {
		err = errors.Join(err, e)
	}
	return fmt.Errorf("%d of %d Tenants Ready: %w; not Ready:\n  %s", ready, len(ts), err, strings.Join(others, "\n  "))
}

// createPaced creates ts at BENCH_RATE on a fixed schedule (a slow create does not delay the
// next), recording when each request was sent.
func (r *run) createPaced(ctx context.Context, ts []*tenant, cloudSpaceID func(*tenant) string) error {
	interval := time.Duration(float64(time.Second) / r.s.rate)
	next := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(ts))
	for i, t := range ts {
		select {
		case <-time.After(time.Until(next)):
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		next = next.Add(interval)
		wg.Go(func() {
			t.created = time.Now()
			if _, err := t.ws.tenants.Create(ctx, t.object(cloudSpaceID(t)), metav1.CreateOptions{}); err != nil {
				errs[i] = fmt.Errorf("failed to create Tenant %s in %s: %w", t.name, t.ws.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// playVCluster plays t's vCluster (sim.VClusterWritesKubeconfig) BENCH_VCLUSTER_DELAY after the
// backend watch saw its release deployed: when a real vCluster's Pod would have started and
// written its kubeconfig Secret. kubeconfigWritten is taken just before the actor runs.
func (r *run) playVCluster(ctx context.Context, t *tenant) error {
	if _, err := r.backendW.deployed.wait(ctx, t.releaseKey()); err != nil {
		return fmt.Errorf("release of %s not deployed: %w", t.ws.name, err)
	}
	select {
	case <-time.After(r.s.vclusterDelay):
	case <-ctx.Done():
		return ctx.Err()
	}
	var last error
	for range 5 {
		t.kubeconfigWritten = time.Now()
		if _, last = sim.VClusterWritesKubeconfig(ctx, r.backendCfg, t.hostNamespace(), t.release()); last == nil {
			return nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("vCluster of %s did not write its kubeconfig: %w", t.ws.name, last)
}

// settle waits until the manager's heap after GC holds still (two readings 5 s apart within 2%)
// and returns it. A manager that keeps moving for 3 minutes is read as it is, with a note.
func (r *run) settle(ctx context.Context) (uint64, error) {
	deadline := time.Now().Add(3 * time.Minute)
	var prev uint64
	for {
		if err := r.e.managerExited(); err != nil {
			return 0, err
		}
		h, err := r.mgr.probe.heap(ctx)
		if err != nil {
			return 0, err
		}
		diff := int64(h) - int64(prev)
		if prev != 0 && max(diff, -diff) < int64(prev)/50 {
			return h, nil
		}
		if time.Now().After(deadline) {
			progress("  the manager's heap did not settle within 3m (%d B, then %d B); using the last reading", prev, h)
			return h, nil
		}
		prev = h
		select {
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// idle reads the manager's open kcp watches and counts its writes (kcp and backend) over 60 s
// in which nothing changes: every Tenant is Ready and the bench writes nothing.
func (r *run) idle(ctx context.Context) (watches int, writesPerMinute float64, err error) {
	before, err := r.mgr.probe.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-time.After(time.Minute):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	after, err := r.mgr.probe.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	return after.kcpWatches(), after.writes() - before.writes(), nil
}

// floorLatencies returns, for each of ts, the time from its create to the floor client's
// namespace for it (the same backend watch times it as the manager's), then deletes those
// namespaces and waits until they are gone, so the manager's namespace cache does not keep them
// in the heap figures.
func (r *run) floorLatencies(ctx context.Context, ts []*tenant) ([]time.Duration, error) {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	lat := make([]time.Duration, 0, len(ts))
	names := map[string]bool{}
	for _, t := range ts {
		name := floorNamespace(t.ws.cluster, t.tenantName)
		at, err := r.backendW.namespaces.wait(wctx, name)
		if err != nil {
			return nil, errors.Join(append([]error{err}, r.floorC.wait()...)...)
		}
		lat = append(lat, at.Sub(t.created))
		names[name] = true
	}
	if errs := r.floorC.wait(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for name := range names {
		if err := r.e.backendCS.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return lat, framework.Poll(ctx, time.Second, 3*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := r.e.backendCS.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout.
		}
		for _, ns := range list.Items {
			if names[ns.Name] {
				return false, nil
			}
		}
		return true, nil
	})
}

// coldStart starts the manager with every workspace bound and every Tenant Ready and returns
// the time from the process's start until it has caught up: every workspace engaged (its
// kubeopera_engaged_workspaces), every Tenant accounted for — reconciled, or, being settled
// (Ready at its generation, its backend namespaces there), its drift check scheduled on the
// usual interval (kubeopera_deferred_drift_checks_total) — and nothing due in the Tenant
// workqueue. It also returns how many drift checks were deferred. That is read from the
// manager's own metrics, polled every 200 ms (only the latencies need watch timing).
func (r *run) coldStart(ctx context.Context) (took time.Duration, deferred int, err error) {
	r.e.stopManager()
	r.mgr = nil
	m, err := r.e.startManager()
	if err != nil {
		return 0, 0, err
	}
	r.mgr = m
	want := float64(len(r.tenants))
	workspaces := float64(len(r.workspaces) + r.s.warmup)
	var last string
	err = framework.Poll(ctx, 200*time.Millisecond, 10*time.Minute, func(ctx context.Context) (bool, error) {
		if err := r.e.managerExited(); err != nil {
			return false, err
		}
		f, err := m.probe.metrics(ctx)
		if err != nil {
			last = err.Error()
			return false, nil // not serving yet
		}
		engaged, done, later, depth := f.engagedWorkspaces(), f.tenantReconciles(), f.tenantDeferred(), f.tenantQueueDepth()
		last = fmt.Sprintf("%.0f of %.0f workspaces engaged, %.0f reconciles and %.0f deferred of %.0f Tenants, queue depth %.0f", engaged, workspaces, done, later, want, depth)
		if engaged >= workspaces && done+later >= want && depth == 0 {
			took, deferred = time.Since(m.started), int(later)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("%w (last: %s)", err, last)
	}
	return took, deferred, nil
}
