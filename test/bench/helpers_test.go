package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The pure helpers of the bench; they run in `make test` and `make test-unit` (no server).

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"no samples", nil, 99, 0},
		{"one sample", ms(7), 50, 7 * time.Millisecond},
		{"median of four is the second", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of ten is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p99 of a hundred is the 99th", ms(hundred...), 99, 99 * time.Millisecond},
		{"p50 of a hundred is the 50th", ms(hundred...), 50, 50 * time.Millisecond},
	} {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

func TestSlopeAndRatio(t *testing.T) {
	if got := slope(1000, 91000, 10, 100); got != 1000 {
		t.Errorf("slope = %v, want 1000", got)
	}
	if got := slope(5, 5, 0, 0); got != 0 {
		t.Errorf("slope over no workspaces = %v, want 0", got)
	}
	if got := ratio(30, 10); got != 3 {
		t.Errorf("ratio = %v, want 3", got)
	}
	if got := ratio(30, 0); got != 0 {
		t.Errorf("ratio over 0 = %v, want 0", got)
	}
}

func TestParseProfiles(t *testing.T) {
	heap := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 123\n# HeapAlloc = 4567890\n# Sys = 1\n"
	if got, err := parseHeapAlloc([]byte(heap)); err != nil || got != 4567890 {
		t.Errorf("parseHeapAlloc = %d, %v; want 4567890", got, err)
	}
	if _, err := parseHeapAlloc([]byte("heap profile: nothing\n")); err == nil {
		t.Error("parseHeapAlloc accepted a profile without MemStats")
	}
	if got, err := parseGoroutines([]byte("goroutine profile: total 312\n5 @ 0x1\n")); err != nil || got != 312 {
		t.Errorf("parseGoroutines = %d, %v; want 312", got, err)
	}
}

func TestMetricSums(t *testing.T) {
	text := `# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 50
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 3
rest_client_requests_total{code="200",host="127.0.0.1:40000",method="PATCH"} 4
rest_client_requests_total{code="200",host="127.0.0.1:40000",method="PUT"} 1
rest_client_requests_total{code="200",host="127.0.0.1:40000",method="DELETE"} 2
# TYPE kubeopera_kcp_open_watches gauge
kubeopera_kcp_open_watches 6
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="tenant",result="success"} 9
controller_runtime_reconcile_total{controller="tenant",result="requeue_after"} 2
controller_runtime_reconcile_total{controller="hostcluster",result="success"} 100
# TYPE workqueue_depth gauge
workqueue_depth{controller="tenant",name="tenant"} 0
workqueue_depth{controller="hostcluster",name="hostcluster"} 4
`
	fams, err := parseMetrics([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := fams.writes(); got != 10 {
		t.Errorf("writes = %v, want 10", got)
	}
	if got := fams.kcpWatches(); got != 6 {
		t.Errorf("kcpWatches = %v, want 6", got)
	}
	if got := fams.tenantReconciles(); got != 11 {
		t.Errorf("tenantReconciles = %v, want 11", got)
	}
	if got := fams.tenantQueueDepth(); got != 0 {
		t.Errorf("tenantQueueDepth = %v, want 0", got)
	}
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	rows := []row{
		{Workspaces: 10, HeapBytesPerWorkspace: 20000, CRToBackendNamespaceP50Ms: 40, CRToBackendNamespaceP99Ms: 90, FloorP99Ms: 30, BackendToStatusP99Ms: 14000},
		{Workspaces: 100, HeapBytesPerWorkspace: 15000, CRToBackendNamespaceP50Ms: 45, CRToBackendNamespaceP99Ms: 120, FloorP99Ms: 0.4},
	}
	if err := writeReport(dir, report{Steps: rows}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"workspaces": 100`, `"heapBytesPerWorkspace"`, `"crToBackendNamespaceP99Ms"`, `"ratioP99"`, `"coldStartSeconds"`, `"managerErrorLogLines"`} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("latest.json lacks %s:\n%s", field, raw)
		}
	}
	png, err := os.ReadFile(filepath.Join(dir, "latest.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(png), "\x89PNG") {
		t.Error("latest.png is not a PNG")
	}
	var sb strings.Builder
	printTable(&sb, rows)
	if !strings.Contains(sb.String(), "100") {
		t.Errorf("table lacks the rows:\n%s", sb.String())
	}
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := map[float64]uint64{0.01: 5, 0.1: 10, 1: 10, inf: 10}
	cases := map[string]struct {
		after map[float64]uint64
		want  float64
	}{
		"nothing observed in between":              {map[float64]uint64{0.01: 5, 0.1: 10, 1: 10, inf: 10}, 0},
		"all new observations in the first bucket": {map[float64]uint64{0.01: 105, 0.1: 110, 1: 110, inf: 110}, 0.01},
		"the p99 in the second bucket":             {map[float64]uint64{0.01: 103, 0.1: 110, 1: 110, inf: 110}, 0.1},
		"past every finite bound: the largest":     {map[float64]uint64{0.01: 5, 0.1: 10, 1: 10, inf: 110}, 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := histogramQuantile(before, tc.after, 0.99); got != tc.want {
				t.Errorf("p99 = %v, want %v", got, tc.want)
			}
		})
	}
}
