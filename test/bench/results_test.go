package bench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// row is what one step (N workspaces) measured; its JSON names are those of latest.json.
type row struct {
	// Workspaces is N, the tenant workspaces bound at this step (the warm-up's not counted).
	Workspaces int `json:"workspaces"`
	// Tenants is how many Tenants this step created (the latencies' sample size).
	Tenants int `json:"tenants"`
	// HeapBytes and Goroutines are the settled manager's, after GC, at N.
	HeapBytes  uint64 `json:"heapBytes"`
	Goroutines int    `json:"goroutines"`
	// HeapBytesPerWorkspace and GoroutinesPerWorkspace are the slopes from the previous step's
	// reading (the post-warm-up baseline for the first).
	HeapBytesPerWorkspace  float64 `json:"heapBytesPerWorkspace"`
	GoroutinesPerWorkspace float64 `json:"goroutinesPerWorkspace"`

	CRToBackendNamespaceP50Ms float64 `json:"crToBackendNamespaceP50Ms"`
	CRToBackendNamespaceP99Ms float64 `json:"crToBackendNamespaceP99Ms"`
	CRToReleaseP50Ms          float64 `json:"crToReleaseP50Ms"`
	CRToReleaseP99Ms          float64 `json:"crToReleaseP99Ms"`
	BackendToStatusP50Ms      float64 `json:"backendToStatusP50Ms"`
	BackendToStatusP99Ms      float64 `json:"backendToStatusP99Ms"`
	// FloorSamples is how many Tenants the floor client was timed on: the step's, beside the
	// manager.
	FloorSamples int     `json:"floorSamples"`
	FloorP50Ms   float64 `json:"floorP50Ms"`
	FloorP99Ms   float64 `json:"floorP99Ms"`
	// RatioP99 is CRToBackendNamespaceP99Ms / FloorP99Ms.
	RatioP99 float64 `json:"ratioP99"`

	// KCPRequestsPerTenant and BackendRequestsPerTenant are the manager's requests (client-go's
	// rest_client_requests_total, every method) to kcp and to the backend from the step's first
	// create until every Tenant was Ready, per Tenant; PassesPerTenant its Tenant reconciles.
	KCPRequestsPerTenant     float64 `json:"kcpRequestsPerTenant"`
	BackendRequestsPerTenant float64 `json:"backendRequestsPerTenant"`
	PassesPerTenant          float64 `json:"passesPerTenant"`
	// RequestsPerTenant breaks those requests down by "<target> <verb> <resource>" (the manager's
	// kubeopera_api_requests_total), per Tenant; entries under 0.05 are left out.
	RequestsPerTenant map[string]float64 `json:"requestsPerTenant,omitempty"`
	// QueueWaitP99Ms is the p99 of the Tenant workqueue's wait over the step (the upper bound of
	// the histogram bucket holding it); ActiveWorkersPeak the most Tenant workers seen busy at
	// once (sampled every 200 ms).
	QueueWaitP99Ms    float64 `json:"queueWaitP99Ms"`
	ActiveWorkersPeak int     `json:"activeWorkersPeak"`

	KCPWatchConnections int     `json:"kcpWatchConnections"`
	IdleWritesPerMinute float64 `json:"idleWritesPerMinute"`
	ColdStartSeconds    float64 `json:"coldStartSeconds"`
	// ColdStartDeferred is how many of the restarted manager's Tenants were settled, their drift
	// check scheduled on its interval rather than run at the start.
	ColdStartDeferred int `json:"coldStartDeferred"`
	// HeapBytesAfterColdStart is the restarted manager's settled heap at N, before it installed
	// anything.
	HeapBytesAfterColdStart uint64 `json:"heapBytesAfterColdStart"`
	// ManagerErrorLogLines counts the manager's error-level log lines so far (all its runs).
	ManagerErrorLogLines int `json:"managerErrorLogLines"`
}

// report is latest.json.
type report struct {
	// Started is when the run began.
	Started time.Time `json:"started"`
	// Manager says which manager ran: cmd/manager at a revision, or a prebuilt binary.
	Manager string `json:"manager"`
	// Settings are the run's knobs, so two reports can be compared.
	WarmupWorkspaces      int     `json:"warmupWorkspaces"`
	TenantsPerSecond      float64 `json:"tenantsPerSecond"`
	TenantRequeueInterval string  `json:"tenantRequeueInterval"`
	Steps                 []row   `json:"steps"`
	// ManagerErrorLogLines is the total over the whole run, the last step's figure.
	ManagerErrorLogLines int `json:"managerErrorLogLines"`
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of ds: the smallest value
// at least p% of the samples are at or below. Zero for no samples.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// ms is d in milliseconds, rounded to 0.1 ms (the watches' resolution is far coarser).
func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*10) / 10 }

// slope is (to - from) / (nTo - nFrom): what one more workspace adds.
func slope(from, to float64, nFrom, nTo int) float64 {
	if nTo == nFrom {
		return 0
	}
	return (to - from) / float64(nTo-nFrom)
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(a/b*100) / 100
}

// writeReport writes latest.json and latest.png into dir.
func writeReport(dir string, r report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	return writeChart(filepath.Join(dir, "latest.png"), r.Steps)
}

// printTable writes the rows as an aligned table.
func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"N", "heap B/ws", "gor/ws", "cr→ns p50", "p99", "cr→rel p50", "p99", "be→Ready p50", "p99",
		"floor p50", "p99", "ratio p99", "kcp req/T", "backend req/T", "passes/T", "queue wait p99", "busy workers",
		"kcp watches", "idle writes/min", "cold start s", "error lines"}
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.0f\t%d\t%d\t%.1f\t%.2f\t%d\t\n",
			r.Workspaces, r.HeapBytesPerWorkspace, r.GoroutinesPerWorkspace,
			r.CRToBackendNamespaceP50Ms, r.CRToBackendNamespaceP99Ms, r.CRToReleaseP50Ms, r.CRToReleaseP99Ms,
			r.BackendToStatusP50Ms, r.BackendToStatusP99Ms, r.FloorP50Ms, r.FloorP99Ms, r.RatioP99,
			r.KCPRequestsPerTenant, r.BackendRequestsPerTenant, r.PassesPerTenant, r.QueueWaitP99Ms, r.ActiveWorkersPeak,
			r.KCPWatchConnections, r.IdleWritesPerMinute, r.ColdStartSeconds, r.ManagerErrorLogLines)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "latencies in ms (nearest-rank percentiles over the Tenants created at that step)")
}

// writeChart draws latest.png: the latency percentiles against N on top, heap per workspace
// against N below, both with a logarithmic N axis since the steps grow geometrically.
func writeChart(path string, rows []row) error {
	lat := plot.New()
	lat.Title.Text = "Tenant latencies (ms, log scale)"
	lat.X.Label.Text = "workspaces (N)"
	lat.Y.Label.Text = "ms"
	lat.Y.Scale, lat.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	heap := plot.New()
	heap.Title.Text = "Manager heap per workspace (KiB, slope between steps)"
	heap.X.Label.Text = "workspaces (N)"
	heap.Y.Label.Text = "KiB / workspace"
	if len(rows) > 1 {
		for _, p := range []*plot.Plot{lat, heap} {
			p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		}
	}
	series := []struct {
		name  string
		value func(row) float64
	}{
		{"CR→namespace p50", func(r row) float64 { return r.CRToBackendNamespaceP50Ms }},
		{"CR→namespace p99", func(r row) float64 { return r.CRToBackendNamespaceP99Ms }},
		{"CR→release p50", func(r row) float64 { return r.CRToReleaseP50Ms }},
		{"CR→release p99", func(r row) float64 { return r.CRToReleaseP99Ms }},
		{"backend→Ready p50", func(r row) float64 { return r.BackendToStatusP50Ms }},
		{"backend→Ready p99", func(r row) float64 { return r.BackendToStatusP99Ms }},
		{"floor p50", func(r row) float64 { return r.FloorP50Ms }},
		{"floor p99", func(r row) float64 { return r.FloorP99Ms }},
	}
	colors := []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255},
		color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 128, G: 128, B: 128, A: 255},
	}
	for i, s := range series {
		xys := make(plotter.XYs, len(rows))
		for j, r := range rows {
			// A log axis cannot show 0; sub-millisecond figures are drawn at 1 ms.
			xys[j] = plotter.XY{X: float64(r.Workspaces), Y: math.Max(s.value(r), 1)}
		}
		if err := addLine(lat, s.name, xys, colors[i/2], i%2 == 1); err != nil {
			return err
		}
	}
	// Head room above the highest line for the legend.
	lat.Y.Max *= 40
	lat.Legend.Top, lat.Legend.Left = true, true
	lat.Legend.XOffs = vg.Points(8)

	xys := make(plotter.XYs, len(rows))
	for j, r := range rows {
		xys[j] = plotter.XY{X: float64(r.Workspaces), Y: r.HeapBytesPerWorkspace / 1024}
	}
	if err := addLine(heap, "", xys, colors[0], false); err != nil {
		return err
	}
	// From 0, so the chart shows the slope's size, not only its change between steps.
	heap.Y.Min, heap.Y.Max = math.Min(heap.Y.Min, 0), math.Max(heap.Y.Max*1.15, 1)

	img := vgimg.New(vg.Points(720), vg.Points(860))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8),
		PadRight: vg.Points(16), PadY: vg.Points(24)}
	canvases := plot.Align([][]*plot.Plot{{lat}, {heap}}, tiles, dc)
	lat.Draw(canvases[0][0])
	heap.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// addLine adds a line with points to p; dashed draws the p99 of a p50/p99 pair.
func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed bool) error {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, pts.Color = c, c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		pts.Shape = draw.TriangleGlyph{}
	} else {
		pts.Shape = draw.CircleGlyph{}
	}
	p.Add(l, pts)
	if name != "" {
		p.Legend.Add(name, l, pts)
	}
	return nil
}

// breakdown prints a request breakdown largest first: "backend get secrets 4.0, kcp patch tenants 1.0".
func breakdown(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.1f", k, m[k])
	}
	return strings.Join(parts, ", ")
}
