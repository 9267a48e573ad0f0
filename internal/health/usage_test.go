package health

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kubeopera/kubeopera/internal/readlimit"
)

// TestMetricsUsage reads node metrics answers (metrics.k8s.io/v1beta1 NodeMetricsList, as
// metrics-server writes them: cpu in nanocores, memory in Ki) into use in percent of the
// reported nodes' allocatable, and refuses what is not usable.
func TestMetricsUsage(t *testing.T) {
	nodes := map[string]resources{"a": {cpu: 4, memory: 8 << 30}, "b": {cpu: 4, memory: 8 << 30}}
	item := func(name, cpu, mem string) string {
		return `{"metadata":{"name":"` + name + `","creationTimestamp":"2026-12-05T09:00:00Z"},"timestamp":"2026-12-05T09:00:00Z","window":"20.05s","usage":{"cpu":"` + cpu + `","memory":"` + mem + `"}}`
	}
	list := func(items ...string) string {
		out := `{"kind":"NodeMetricsList","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":[`
		for i, it := range items {
			if i > 0 {
				out += ","
			}
			out += it
		}
		return out + "]}"
	}
	for name, tc := range map[string]struct {
		body     string
		lim      readlimit.Limits
		cpu, mem float64
		served   bool
		capped   bool
	}{
		"both nodes": {body: list(item("a", "2000000000n", "4194304Ki"), item("b", "1", "2Gi")),
			cpu: 37.5, mem: 37.5, served: true},
		"one node reported: the other left out of both sums": {body: list(item("a", "3", "2Gi")),
			cpu: 75, mem: 25, served: true},
		"a node named twice counts once": {body: list(item("a", "3", "2Gi"), item("a", "3", "2Gi")),
			cpu: 75, mem: 25, served: true},
		"nodes the cluster does not list are ignored": {body: list(item("a", "1", "1Gi"), item("zz", "400", "1Ti")),
			cpu: 25, mem: 12.5, served: true},
		"only unknown nodes": {body: list(item("zz", "1", "1Gi"))},
		"no items":           {body: list()},
		"negative usage":     {body: list(item("a", "-1", "1Gi"))},
		// Exact arithmetic on it would build a number of a billion digits.
		"an absurd usage":            {body: list(item("a", "1e999999999", "1Gi"))},
		"beyond the bound":           {body: list(item("a", "1", "8Ei"))},
		"no memory":                  {body: list(`{"metadata":{"name":"a"},"usage":{"cpu":"1"}}`)},
		"not a quantity":             {body: list(item("a", "lots", "1Gi"))},
		"not JSON":                   {body: "<html>502 Bad Gateway</html>"},
		"over the item cap":          {body: list(item("a", "1", "1Gi"), item("b", "1", "1Gi")), lim: readlimit.Limits{MaxListItems: 1}, capped: true},
		"at the item cap is fine":    {body: list(item("a", "1", "1Gi"), item("b", "1", "1Gi")), lim: readlimit.Limits{MaxListItems: 2}, cpu: 25, mem: 12.5, served: true},
		"usage above allocatable":    {body: list(item("a", "8", "16Gi")), cpu: 200, mem: 200, served: true},
		"zero allocatable: no use":   {body: list(item("z", "1", "1Gi"))},
		"a tiny allocatable: capped": {body: list(item("t", "4", "1Gi")), cpu: 10000, mem: 10000, served: true},
	} {
		t.Run(name, func(t *testing.T) {
			ns := nodes
			switch name {
			case "zero allocatable: no use":
				ns = map[string]resources{"z": {}}
			case "a tiny allocatable: capped":
				ns = map[string]resources{"t": {cpu: 1e-9, memory: 1}}
			}
			u, served, err := metricsUsage([]byte(tc.body), ns, tc.lim)
			if _, ok := readlimit.As(err); ok != tc.capped || (err != nil && !ok) {
				t.Fatalf("err = %v, want a cap error: %v", err, tc.capped)
			}
			if served != tc.served {
				t.Fatalf("served = %v, want %v", served, tc.served)
			}
			if !served {
				if u.cpu != nil || u.memory != nil {
					t.Errorf("usage %v/%v from an unusable answer", u.cpu, u.memory)
				}
				return
			}
			if diff := cmp.Diff([]float64{tc.cpu, tc.mem}, []float64{*u.cpu, *u.memory}, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("cpu, memory %% (-want +got):\n%s", diff)
			}
		})
	}
}
