package overview

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestSort(t *testing.T) {
	tests := map[string]struct {
		column, dir string
		want        []string
	}{
		"default":        {"", DirAsc, []string{platform, edge9, edge10, prodEU, hostile}},
		"unknown column": {"color", DirDesc, []string{platform, edge9, edge10, prodEU, hostile}},
		// Ties (same workspace) keep the default order in both directions.
		"workspace asc":  {ColWorkspace, DirAsc, []string{platform, edge9, edge10, prodEU, hostile}},
		"workspace desc": {ColWorkspace, DirDesc, []string{hostile, edge9, edge10, prodEU, platform}},
		// Names compare ignoring case with numbers by value: edge-9 before edge-10.
		"name asc":    {ColName, DirAsc, []string{hostile, edge9, edge10, platform, prodEU}},
		"name desc":   {ColName, DirDesc, []string{prodEU, platform, edge10, edge9, hostile}},
		"phase asc":   {ColPhase, DirAsc, []string{hostile, edge10, edge9, prodEU, platform}},
		"phase desc":  {ColPhase, DirDesc, []string{platform, edge9, prodEU, edge10, hostile}},
		"health asc":  {ColHealth, DirAsc, []string{hostile, edge9, prodEU, platform, edge10}},
		"health desc": {ColHealth, DirDesc, []string{platform, prodEU, edge9, hostile, edge10}},
		// Nodes by ready, then total; edge-10 has none counted.
		"nodes asc":  {ColNodes, DirAsc, []string{hostile, platform, edge9, prodEU, edge10}},
		"nodes desc": {ColNodes, DirDesc, []string{prodEU, edge9, platform, hostile, edge10}},
		// 0% is a value, nil is unknown and last.
		"cpu asc":  {ColCPU, DirAsc, []string{hostile, platform, prodEU, edge9, edge10}},
		"cpu desc": {ColCPU, DirDesc, []string{edge9, prodEU, platform, hostile, edge10}},
		// Two unknowns keep the default order among themselves, last.
		"memory asc":  {ColMemory, DirAsc, []string{hostile, prodEU, edge9, platform, edge10}},
		"memory desc": {ColMemory, DirDesc, []string{edge9, prodEU, hostile, platform, edge10}},
		// v1.9.0 < v1.30.2 < v1.33.1 < v1.34.0.
		"version asc":   {ColVersion, DirAsc, []string{edge9, hostile, prodEU, platform, edge10}},
		"version desc":  {ColVersion, DirDesc, []string{platform, prodEU, hostile, edge9, edge10}},
		"provider asc":  {ColProvider, DirAsc, []string{edge10, prodEU, hostile, edge9, platform}},
		"provider desc": {ColProvider, DirDesc, []string{edge9, hostile, edge10, prodEU, platform}},
		"region asc":    {ColRegion, DirAsc, []string{prodEU, hostile, edge9, edge10, platform}},
		"region desc":   {ColRegion, DirDesc, []string{edge10, edge9, hostile, prodEU, platform}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			in := fleet()
			before := names(in)
			got := names(Sort(in, tt.column, tt.dir))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Sort(%q, %q) (-want +got):\n%s", tt.column, tt.dir, diff)
			}
			if diff := cmp.Diff(before, names(in)); diff != "" {
				t.Errorf("Sort changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

// Every column of the table sorts.
func TestSortCoversEveryColumn(t *testing.T) {
	for _, col := range Columns {
		if sortKeys[col] == nil {
			t.Errorf("column %q has no sort key", col)
		}
	}
}

func TestSortIsStable(t *testing.T) {
	// Same workspace and name, different namespaces: the namespace decides, in both directions
	// of a column where they tie.
	cs := []Cluster{
		{Workspace: "w", Namespace: "b", Name: "x", Provider: "aws"},
		{Workspace: "w", Namespace: "a", Name: "x", Provider: "aws"},
	}
	for _, dir := range []string{DirAsc, DirDesc} {
		got := Sort(cs, ColProvider, dir)
		if got[0].Namespace != "a" || got[1].Namespace != "b" {
			t.Errorf("dir %s: got namespaces %s, %s; want a, b", dir, got[0].Namespace, got[1].Namespace)
		}
	}
}

func TestFilter(t *testing.T) {
	tests := map[string]struct {
		text, band string
		want       []string
	}{
		"everything":               {"", "", []string{prodEU, hostile, edge10, platform, edge9}},
		"provider, ignoring case":  {"AWS", "", []string{prodEU, edge10}},
		"workspace":                {"orgs:acme", "", []string{prodEU, edge10, edge9}},
		"namespace":                {"default", "", []string{hostile}},
		"clusterID":                {"6b1c0d2e", "", []string{platform}},
		"phase":                    {"provisioning", "", []string{edge10}},
		"region":                   {"fsn", "", []string{edge9}},
		"version":                  {"v1.3", "", []string{prodEU, hostile, platform}},
		"spaces trimmed":           {"  fsn1 ", "", []string{edge9}},
		"no match":                 {"nowhere", "", []string{}},
		"message is not searched":  {"terraform", "", []string{}},
		"band green":               {"", BandGreen, []string{prodEU, platform}},
		"band amber":               {"", BandAmber, []string{edge9}},
		"band red":                 {"", BandRed, []string{hostile}},
		"band unknown":             {"", BandUnknown, []string{edge10}},
		"text and band":            {"acme", BandGreen, []string{prodEU}},
		"text and band, no match ": {"fsn1", BandGreen, []string{}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := names(Filter(fleet(), tt.text, tt.band))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Filter(%q, %q) (-want +got):\n%s", tt.text, tt.band, diff)
			}
		})
	}
}

func TestBandOf(t *testing.T) {
	tests := map[string]struct {
		health *Health
		want   string
	}{
		"not read": {nil, BandUnknown},
		"100":      {&Health{Score: 100}, BandGreen},
		"80":       {&Health{Score: 80}, BandGreen},
		"79":       {&Health{Score: 79}, BandAmber},
		"60":       {&Health{Score: 60}, BandAmber},
		"59":       {&Health{Score: 59}, BandRed},
		"0":        {&Health{Score: 0}, BandRed},
		// The score decides, not a stale band.
		"score over band": {&Health{Score: 50, Band: "green"}, BandRed},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := BandOf(&Cluster{Health: tt.health}); got != tt.want {
				t.Errorf("BandOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	got := Summarize(fleet())
	want := Summary{
		Clusters: 5,
		// prod-eu (Ready, 92) and platform (Registered, 100); edge-9 is Ready but amber.
		Healthy:    2,
		NodesReady: 6, NodesTotal: 9,
		// (41+0+12+85)/4 and (63+5+97)/3: unknown values are not counted.
		AvgCPUPercent:    ptr.To(34.5),
		AvgMemoryPercent: ptr.To(55.0),
		Bands:            map[string]int{BandGreen: 2, BandAmber: 1, BandRed: 1, BandUnknown: 1},
		HostRegistered:   true,
		// prod-eu's estimate alone: partial, as four clusters have none.
		MonthlyCost: []CostTotal{{Currency: "USD", Monthly: "231.26", Clusters: 1, Partial: true}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}

	empty := Summarize(nil)
	if empty.Clusters != 0 || empty.AvgCPUPercent != nil || empty.AvgMemoryPercent != nil || empty.HostRegistered {
		t.Errorf("Summarize(nil) = %+v, want zero counts, no averages, no host", empty)
	}

	// Healthy: the Ready condition True, reachable, green. Unreachable is counted on its own.
	for name, tc := range map[string]struct {
		c                    Cluster
		healthy, unreachable int
	}{
		"Ready and green":                       {Cluster{Phase: "Ready", Ready: true, Health: &Health{Score: 80}}, 1, 0},
		"Registered and green":                  {Cluster{Phase: PhaseRegistered, Ready: true, Health: &Health{Score: 100}}, 1, 0},
		"green, not Ready yet":                  {Cluster{Phase: "InstallingKubeOpera", Health: &Health{Score: 95}}, 0, 0},
		"Ready without health":                  {Cluster{Phase: "Ready", Ready: true}, 0, 0},
		"Ready and amber":                       {Cluster{Phase: "Ready", Ready: true, Health: &Health{Score: 79}}, 0, 0},
		"phase Ready, condition Ready not True": {Cluster{Phase: "Ready", Health: &Health{Score: 95}}, 0, 0},
		"phase Ready, unreachable":              {Cluster{Phase: "Ready", Unreachable: true, UnreachableSince: &observed}, 0, 1},
		// Never the case from a HostCluster (unreachable means no health): even so, not healthy.
		"unreachable with a stale green score": {Cluster{Phase: "Ready", Ready: true, Unreachable: true, Health: &Health{Score: 100}}, 0, 1},
		"unreachable, never read":              {Cluster{Phase: "ValidatingAccess", Unreachable: true}, 0, 1},
	} {
		t.Run(name, func(t *testing.T) {
			got := Summarize([]Cluster{tc.c})
			if got.Healthy != tc.healthy || got.Unreachable != tc.unreachable {
				t.Errorf("Healthy, Unreachable = %d, %d; want %d, %d", got.Healthy, got.Unreachable, tc.healthy, tc.unreachable)
			}
		})
	}

	// Cost: summed per currency, partial when an estimate leaves nodes out or a cluster has none.
	costs := Summarize([]Cluster{
		{Cost: &Cost{Monthly: "60.74", Currency: "USD"}},
		{Cost: &Cost{Monthly: "0.26", Currency: "USD", Partial: true}},
		{Cost: &Cost{Monthly: "100.00", Currency: "EUR"}},
		{Cost: &Cost{Monthly: "not a number", Currency: "EUR"}},
	})
	wantCosts := []CostTotal{{Currency: "EUR", Monthly: "100.00", Clusters: 1, Partial: true}, {Currency: "USD", Monthly: "61.00", Clusters: 2, Partial: true}}
	if diff := cmp.Diff(wantCosts, costs.MonthlyCost); diff != "" {
		t.Errorf("MonthlyCost (-want +got):\n%s", diff)
	}
	whole := Summarize([]Cluster{{Cost: &Cost{Monthly: "30.37", Currency: "USD"}}})
	if diff := cmp.Diff([]CostTotal{{Currency: "USD", Monthly: "30.37", Clusters: 1}}, whole.MonthlyCost); diff != "" {
		t.Errorf("MonthlyCost of one whole estimate (-want +got):\n%s", diff)
	}
	// Averages keep one decimal.
	avg := Summarize([]Cluster{{CPUPercent: ptr.To[int32](1)}, {CPUPercent: ptr.To[int32](1)}, {CPUPercent: ptr.To[int32](2)}})
	if avg.AvgCPUPercent == nil || *avg.AvgCPUPercent != 1.3 {
		t.Errorf("AvgCPUPercent = %v, want 1.3", avg.AvgCPUPercent)
	}
}

func TestParseQuery(t *testing.T) {
	tests := map[string]struct {
		raw  string
		want Query
	}{
		"empty":            {"", Query{Dir: DirAsc}},
		"everything":       {"q=+aws+&band=RED&sort=CPU&dir=desc", Query{Q: "aws", Band: BandRed, Sort: ColCPU, Dir: DirDesc}},
		"unknown ignored":  {"band=purple&sort=colour&dir=sideways", Query{Dir: DirAsc}},
		"dir without sort": {"dir=desc", Query{Dir: DirDesc}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			v, err := url.ParseQuery(tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ParseQuery(v)); diff != "" {
				t.Errorf("ParseQuery(%q) (-want +got):\n%s", tt.raw, diff)
			}
		})
	}
	if got := (Query{Q: "a b", Band: BandRed, Sort: ColCPU, Dir: DirDesc}).Values().Encode(); got != "band=red&dir=desc&q=a+b&sort=cpu" {
		t.Errorf("Values = %q", got)
	}
	if got := (Query{Dir: DirDesc}).Values().Encode(); got != "" {
		t.Errorf("Values of the default order = %q, want empty", got)
	}
}

func TestCompareText(t *testing.T) {
	ordered := []string{"", "a", "B", "b", "node-2", "node-10", "node-010x", "v1.9.0", "v1.10.0", "v1.30.2"}
	for i := 0; i+1 < len(ordered); i++ {
		if c := compareText(ordered[i], ordered[i+1]); c >= 0 {
			t.Errorf("compareText(%q, %q) = %d, want < 0", ordered[i], ordered[i+1], c)
		}
		if c := compareText(ordered[i+1], ordered[i]); c <= 0 {
			t.Errorf("compareText(%q, %q) = %d, want > 0", ordered[i+1], ordered[i], c)
		}
	}
}
