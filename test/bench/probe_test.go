package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The manager is read from outside, as an operator would: net/http/pprof on --pprof-bind-address
// for heap and goroutines, and the Prometheus text of /metrics (plain HTTP,
// --metrics-secure=false) for its open kcp watches, its API writes and its reconciles.

// probe reads one running manager's pprof and metrics endpoints.
type probe struct {
	pprofURL, metricsURL string
	http                 *http.Client
}

func newProbe(pprofAddr, metricsAddr string) *probe {
	return &probe{
		pprofURL:   "http://" + pprofAddr + "/debug/pprof",
		metricsURL: "http://" + metricsAddr + "/metrics",
		http:       &http.Client{Timeout: 30 * time.Second},
	}
}

func (p *probe) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// heap returns the manager's HeapAlloc right after a GC: ?gc=1 makes the handler run one first,
// and debug=1 appends runtime.MemStats as "# Name = value" lines.
func (p *probe) heap(ctx context.Context) (uint64, error) {
	body, err := p.get(ctx, p.pprofURL+"/heap?gc=1&debug=1")
	if err != nil {
		return 0, err
	}
	return parseHeapAlloc(body)
}

// saveHeapProfile writes the manager's heap profile (gzipped protobuf, for `go tool pprof`).
func (p *probe) saveHeapProfile(ctx context.Context, path string) error {
	body, err := p.get(ctx, p.pprofURL+"/heap?gc=1")
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// goroutines returns the manager's number of goroutines.
func (p *probe) goroutines(ctx context.Context) (int, error) {
	body, err := p.get(ctx, p.pprofURL+"/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	return parseGoroutines(body)
}

// metrics scrapes /metrics.
func (p *probe) metrics(ctx context.Context) (families, error) {
	body, err := p.get(ctx, p.metricsURL)
	if err != nil {
		return nil, err
	}
	return parseMetrics(body)
}

// parseMetrics parses the Prometheus text format.
func parseMetrics(text []byte) (families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("failed to parse metrics: %w", err)
	}
	return fams, nil
}

// families is one scrape of /metrics.
type families map[string]*dto.MetricFamily

// labelsOf is a metric's labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// sum adds the values of metric name's series whose labels match (nil: all), whatever its type.
func (f families) sum(name string, match func(labels map[string]string) bool) float64 {
	fam, ok := f[name]
	if !ok {
		return 0
	}
	var total float64
	for _, m := range fam.GetMetric() {
		if match != nil && !match(labelsOf(m)) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// writes is how many write requests (POST, PUT, PATCH, DELETE) the manager's clients sent, to
// every host (kcp and the backend): client-go's rest_client_requests_total, which
// controller-runtime registers.
func (f families) writes() float64 {
	return f.sum("rest_client_requests_total", func(l map[string]string) bool {
		switch l["method"] {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			return true
		}
		return false
	})
}

// kcpWatches is the manager's gauge of open watch requests to kcp.
func (f families) kcpWatches() int { return int(f.sum("kubeopera_kcp_open_watches", nil)) }

// tenantReconciles is how many Tenant reconciles finished, whatever their result.
func (f families) tenantReconciles() float64 {
	return f.sum("controller_runtime_reconcile_total", func(l map[string]string) bool { return l["controller"] == tenantController })
}

// tenantDeferred is how many settled Tenants found at the manager's start had their drift check
// scheduled for later.
func (f families) tenantDeferred() float64 {
	return f.sum("kubeopera_deferred_drift_checks_total", func(l map[string]string) bool { return l["controller"] == tenantController })
}

// engagedWorkspaces is how many workspaces the manager serves through the kubeopera.io export.
func (f families) engagedWorkspaces() float64 {
	return f.sum("kubeopera_engaged_workspaces", func(l map[string]string) bool { return l["export"] == "kubeopera.io" })
}

// tenantQueueDepth is the Tenant controller's workqueue depth (the items due; those scheduled for
// later are not counted).
func (f families) tenantQueueDepth() float64 {
	return f.sum("workqueue_depth", func(l map[string]string) bool { return l["name"] == tenantController })
}

// tenantController is the Tenant controller's name (controllers/tenant: Named("tenant")), the
// label of its controller-runtime and workqueue metrics.
const tenantController = "tenant"

// parseHeapAlloc reads "# HeapAlloc = <n>" from a debug=1 heap profile.
func parseHeapAlloc(profile []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(profile))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapAlloc line in the heap profile")
}

// parseGoroutines reads "goroutine profile: total <n>", the first line of a debug=1 profile.
func parseGoroutines(profile []byte) (int, error) {
	first, _, _ := bytes.Cut(profile, []byte("\n"))
	v, ok := strings.CutPrefix(string(first), "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("unexpected goroutine profile header %q", first)
	}
	return strconv.Atoi(strings.TrimSpace(v))
}

// requests is how many requests (every method) the manager's clients sent to host (host:port,
// the label client-go gives rest_client_requests_total).
func (f families) requests(host string) float64 {
	return f.sum("rest_client_requests_total", func(l map[string]string) bool { return l["host"] == host })
}

// apiRequests is the manager's kubeopera_api_requests_total by "<target> <verb> <resource>".
func (f families) apiRequests() map[string]float64 {
	out := map[string]float64{}
	fam, ok := f["kubeopera_api_requests_total"]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		l := labelsOf(m)
		out[l["target"]+" "+l["verb"]+" "+l["resource"]] += m.GetCounter().GetValue()
	}
	return out
}

// tenantActiveWorkers is how many Tenant workers are busy.
func (f families) tenantActiveWorkers() int {
	return int(f.sum("controller_runtime_active_workers", func(l map[string]string) bool { return l["controller"] == tenantController }))
}

// tenantQueueWait is the Tenant workqueue's wait histogram (workqueue_queue_duration_seconds):
// cumulative counts by upper bound, in seconds.
func (f families) tenantQueueWait() map[float64]uint64 {
	out := map[float64]uint64{}
	fam, ok := f["workqueue_queue_duration_seconds"]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		if labelsOf(m)["name"] != tenantController || m.Histogram == nil {
			continue
		}
		for _, b := range m.GetHistogram().GetBucket() {
			out[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return out
}

// histogramQuantile is the upper bound of the bucket holding quantile q of the observations
// between two readings of a cumulative histogram (0 when there were none).
func histogramQuantile(before, after map[float64]uint64, q float64) float64 {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	if total == 0 {
		return 0
	}
	// Past the largest finite bound (the +Inf bucket) the largest finite bound is said: JSON has
	// no infinity, and the figure is then "at least" that.
	largest := 0.0
	for _, b := range bounds {
		if !math.IsInf(b, 1) {
			largest = b
		}
		if float64(after[b]-before[b]) >= q*float64(total) {
			if math.IsInf(b, 1) {
				return largest
			}
			return b
		}
	}
	return largest
}
