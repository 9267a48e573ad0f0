package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEstimate: hourly price × 730 h per priced node; unpriced nodes are counted and their types
// named, never guessed.
func TestEstimate(t *testing.T) {
	table := &PriceTable{Currency: "USD", Hourly: map[string]float64{"t3.medium": 0.0416, "m5.xlarge": 0.192, "free": 0}}
	for name, tc := range map[string]struct {
		table *PriceTable
		types map[string]int32
		want  Cost
		ok    bool
	}{
		"every node priced": {table: table, types: map[string]int32{"t3.medium": 3, "m5.xlarge": 1},
			// (3 × 0.0416 + 0.192) × 730 = 231.264
			want: Cost{Monthly: 231.26, Currency: "USD", PricedNodes: 4}, ok: true},
		"a type the table does not list and a node without a label": {table: table, types: map[string]int32{"t3.medium": 2, "g5.48xlarge": 1, "": 2},
			want: Cost{Monthly: 60.74, Currency: "USD", PricedNodes: 2, UnpricedNodes: 3, UnpricedInstanceTypes: []string{"g5.48xlarge"}}, ok: true},
		"a free type is priced at zero": {table: table, types: map[string]int32{"free": 2},
			want: Cost{Monthly: 0, Currency: "USD", PricedNodes: 2}, ok: true},
		"no node priced: nothing to say": {table: table, types: map[string]int32{"x1.large": 2, "": 1}},
		"no nodes":                       {table: table},
		"no price table":                 {types: map[string]int32{"t3.medium": 3}},
		"at most 8 unpriced types named": {table: table, types: map[string]int32{"t3.medium": 1, "u9": 1, "u1": 1, "u2": 1, "u3": 1, "u4": 1, "u5": 1, "u6": 1, "u7": 1, "u8": 1},
			want: Cost{Monthly: 30.37, Currency: "USD", PricedNodes: 1, UnpricedNodes: 9, UnpricedInstanceTypes: []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8"}}, ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := tc.table.Estimate(tc.types)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Estimate() (-want +got):\n%s", diff)
			}
			if got.Partial() != (tc.want.UnpricedNodes > 0) {
				t.Errorf("Partial() = %v", got.Partial())
			}
		})
	}
}

func TestLoadPriceTable(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		content string
		err     string
	}{
		"yaml":                {content: "currency: EUR\nhourly:\n  t3.medium: 0.0416\n  s3.large.2: 0.09\n"},
		"json":                {content: `{"currency":"USD","hourly":{"m5.xlarge":0.192}}`},
		"no currency":         {content: "hourly: {t3.medium: 0.04}\n", err: "currency"},
		"a lowercase code":    {content: "currency: usd\nhourly: {t3.medium: 0.04}\n", err: "currency"},
		"no types":            {content: "currency: USD\n", err: "no instance type"},
		"a negative price":    {content: "currency: USD\nhourly: {t3.medium: -1}\n", err: "not a price"},
		"not a label value":   {content: "currency: USD\nhourly: {\"t3 medium\": 1}\n", err: "not a label value"},
		"an unknown field":    {content: "currency: USD\nhourly: {t3.medium: 1}\nregion: eu\n", err: "unknown field"},
		"a price not numeric": {content: "currency: USD\nhourly: {t3.medium: cheap}\n", err: "price table"},
		"too large":           {content: "currency: USD\nhourly: {t3.medium: 1}\n#" + strings.Repeat("x", 1<<20), err: "larger than"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := LoadPriceTable(path)
			if tc.err == "" {
				if err != nil || p == nil || len(p.Hourly) == 0 {
					t.Fatalf("LoadPriceTable() = %v, %v", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("LoadPriceTable() error = %v, want one containing %q", err, tc.err)
			}
		})
	}
	if _, err := LoadPriceTable(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestInstanceType(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{InstanceTypeLabel: "t3.medium"}, "t3.medium"},
		{map[string]string{InstanceTypeLabel: "t3.medium", "beta.kubernetes.io/instance-type": "old"}, "t3.medium"},
		{map[string]string{"beta.kubernetes.io/instance-type": "m4.large"}, "m4.large"},
		{map[string]string{InstanceTypeLabel: "<script>"}, ""},
		{nil, ""},
	} {
		if got := instanceType(tc.labels); got != tc.want {
			t.Errorf("instanceType(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}
