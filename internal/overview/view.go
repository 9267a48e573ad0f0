package overview

import (
	"cmp"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeopera/kubeopera/internal/health"
)

// Health bands of a row: the seed's badge colours, and unknown for a cluster not read yet or unreachable.
const (
	BandGreen   = string(health.BandGreen)
	BandAmber   = string(health.BandAmber)
	BandRed     = string(health.BandRed)
	BandUnknown = "unknown"
)

// Bands in the order the page lists them.
var Bands = []string{BandGreen, BandAmber, BandRed, BandUnknown}

// Columns of the table, by their sort key.
const (
	ColWorkspace = "workspace"
	ColName      = "name"
	ColPhase     = "phase"
	ColHealth    = "health"
	ColNodes     = "nodes"
	ColCPU       = "cpu"
	ColMemory    = "memory"
	ColVersion   = "version"
	ColProvider  = "provider"
	ColRegion    = "region"
	ColCost      = "cost"
)

// Columns in the order the table shows them.
var Columns = []string{ColWorkspace, ColName, ColPhase, ColHealth, ColNodes, ColCPU, ColMemory, ColCost, ColVersion, ColProvider, ColRegion}

// Sort directions.
const (
	DirAsc  = "asc"
	DirDesc = "desc"
)

// BandOf is c's health band: the seed's bands of its score (green 80 and above, amber 60-79,
// red below 60), unknown while Health is nil.
func BandOf(c *Cluster) string {
	if c.Health == nil {
		return BandUnknown
	}
	return string(health.BandOf(c.Health.Score))
}

// Query is what the table shows: a filter and an order. The zero value is every cluster by
// workspace, then name.
type Query struct {
	// Q keeps the clusters with Q in their workspace, namespace, name, clusterID, phase, provider,
	// region or version, ignoring case; "": every cluster.
	Q string
	// Band keeps the clusters of this health band; "": every band.
	Band string
	// Sort is the column to sort by; "": workspace, then name.
	Sort string
	// Dir is asc or desc.
	Dir string
}

// ParseQuery reads the query parameters q, band, sort and dir. Unknown bands, columns and
// directions are ignored (the default applies), so a stale bookmark still shows the fleet.
func ParseQuery(v url.Values) Query {
	q := Query{Q: strings.TrimSpace(v.Get("q")), Dir: DirAsc}
	if b := strings.ToLower(v.Get("band")); slices.Contains(Bands, b) {
		q.Band = b
	}
	if s := strings.ToLower(v.Get("sort")); slices.Contains(Columns, s) {
		q.Sort = s
	}
	if strings.EqualFold(v.Get("dir"), DirDesc) {
		q.Dir = DirDesc
	}
	return q
}

// Values is q as query parameters, without the defaults.
func (q Query) Values() url.Values {
	v := url.Values{}
	if q.Q != "" {
		v.Set("q", q.Q)
	}
	if q.Band != "" {
		v.Set("band", q.Band)
	}
	if q.Sort != "" {
		v.Set("sort", q.Sort)
		if q.Dir == DirDesc {
			v.Set("dir", DirDesc)
		}
	}
	return v
}

// Apply returns the clusters of cs that q keeps, in q's order. cs is not changed.
func (q Query) Apply(cs []Cluster) []Cluster {
	return Sort(Filter(cs, q.Q, q.Band), q.Sort, q.Dir)
}

// Filter returns the clusters of cs that contain text (ignoring case, in workspace, namespace,
// name, clusterID, phase, provider, region or version) and are in band; "" matches every
// cluster. cs is not changed.
func Filter(cs []Cluster, text, band string) []Cluster {
	text = strings.ToLower(strings.TrimSpace(text))
	out := make([]Cluster, 0, len(cs))
	for _, c := range cs {
		if band != "" && BandOf(&c) != band {
			continue
		}
		if text != "" && !matches(&c, text) {
			continue
		}
		out = append(out, c)
	}
	return out
}

func matches(c *Cluster, lowerText string) bool {
	for _, f := range []string{c.Workspace, c.Namespace, c.Name, c.ClusterID, c.Phase, c.Provider, c.Region, c.Version} {
		if strings.Contains(strings.ToLower(f), lowerText) {
			return true
		}
	}
	return false
}

// Sort returns a copy of cs sorted by column in direction dir, a stable sort. Clusters without
// a value in that column (no health yet, unknown CPU or memory, no nodes counted, an empty
// text) come last in both directions; ties keep the default order, workspace, namespace, name.
// An empty or unknown column is the default order.
func Sort(cs []Cluster, column, dir string) []Cluster {
	out := slices.Clone(cs)
	key := sortKeys[column]
	slices.SortStableFunc(out, func(a, b Cluster) int {
		if key != nil {
			ka, kb := key(&a), key(&b)
			switch {
			case ka.unknown && kb.unknown:
			case ka.unknown:
				return 1
			case kb.unknown:
				return -1
			default:
				c := ka.compare(kb)
				if dir == DirDesc {
					c = -c
				}
				if c != 0 {
					return c
				}
			}
		}
		return defaultOrder(&a, &b)
	})
	return out
}

func defaultOrder(a, b *Cluster) int {
	return cmp.Or(
		compareText(a.Workspace, b.Workspace),
		compareText(a.Name, b.Name),
		compareText(a.Namespace, b.Namespace),
	)
}

// sortKey is a cluster's value in one column.
type sortKey struct {
	unknown bool
	text    string
	nums    []int64
}

func (k sortKey) compare(o sortKey) int {
	if k.nums != nil || o.nums != nil {
		return slices.Compare(k.nums, o.nums)
	}
	return compareText(k.text, o.text)
}

func textKey(s string) sortKey { return sortKey{unknown: s == "", text: s} }

func percentKey(p *int32) sortKey {
	if p == nil {
		return sortKey{unknown: true}
	}
	return sortKey{nums: []int64{int64(*p)}}
}

var sortKeys = map[string]func(c *Cluster) sortKey{
	ColWorkspace: func(c *Cluster) sortKey { return textKey(c.Workspace) },
	ColName:      func(c *Cluster) sortKey { return textKey(c.Name) },
	ColPhase:     func(c *Cluster) sortKey { return textKey(c.Phase) },
	ColHealth: func(c *Cluster) sortKey {
		if c.Health == nil {
			return sortKey{unknown: true}
		}
		return sortKey{nums: []int64{int64(c.Health.Score)}}
	},
	// Nodes sort by ready nodes, then by the total; a cluster without nodes counted is unknown.
	ColNodes: func(c *Cluster) sortKey {
		if c.NodesTotal == 0 {
			return sortKey{unknown: true}
		}
		return sortKey{nums: []int64{int64(c.NodesReady), int64(c.NodesTotal)}}
	},
	ColCPU:    func(c *Cluster) sortKey { return percentKey(c.CPUPercent) },
	ColMemory: func(c *Cluster) sortKey { return percentKey(c.MemoryPercent) },
	// Versions compare by their numbers: v1.9.0 before v1.30.2.
	ColVersion:  func(c *Cluster) sortKey { return textKey(c.Version) },
	ColProvider: func(c *Cluster) sortKey { return textKey(c.Provider) },
	ColRegion:   func(c *Cluster) sortKey { return textKey(c.Region) },
	// Cost sorts by the monthly estimate in cents (clusters of another currency are not
	// converted: one price table has one currency).
	ColCost: func(c *Cluster) sortKey {
		cents, ok := costCents(c.Cost)
		if !ok {
			return sortKey{unknown: true}
		}
		return sortKey{nums: []int64{cents}}
	},
}

// costCents is a cost's monthly estimate in cents; false when there is none or it is not a
// decimal.
func costCents(c *Cost) (int64, bool) {
	if c == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(c.Monthly, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, false
	}
	return int64(math.Round(v * 100)), true
}

// compareText compares a and b ignoring case, runs of digits by their value (node-10 after
// node-9, v1.30 after v1.9), then byte-wise so the order is total.
func compareText(a, b string) int {
	return cmp.Or(naturalCompare(strings.ToLower(a), strings.ToLower(b)), strings.Compare(a, b))
}

func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// Summary is the fleet at a glance: the page's cards.
type Summary struct {
	// clusters is the number of clusters.
	Clusters int `json:"clusters"`
	// healthy counts the clusters whose Ready condition is True (the platform's own cluster:
	// registered and read) and whose health is in the green band; an unreachable cluster never
	// counts (its health is unknown).
	Healthy int `json:"healthy"`
	// unreachable counts the clusters the platform cannot reach now.
	Unreachable int `json:"unreachable"`
	// nodesReady and nodesTotal sum the clusters' nodes.
	NodesReady int64 `json:"nodesReady"`
	NodesTotal int64 `json:"nodesTotal"`
	// avgCPUPercent and avgMemoryPercent average the clusters whose value is known, to one
	// decimal; null when no cluster's is.
	AvgCPUPercent    *float64 `json:"avgCPUPercent"`
	AvgMemoryPercent *float64 `json:"avgMemoryPercent"`
	// bands counts the clusters per health band (green, amber, red, unknown).
	Bands map[string]int `json:"bands"`
	// hostRegistered is true when a cluster is the one the platform runs on (isHost).
	HostRegistered bool `json:"hostRegistered"`
	// monthlyCost sums the clusters' cost estimates, one entry per currency; empty when no
	// cluster has one.
	MonthlyCost []CostTotal `json:"monthlyCost"`
}

// CostTotal is the sum of the clusters' monthly cost estimates in one currency.
type CostTotal struct {
	// Currency, e.g. USD.
	Currency string `json:"currency"`
	// Monthly is the sum, a decimal with two digits.
	Monthly string `json:"monthly"`
	// Clusters is how many clusters have an estimate in this currency.
	Clusters int `json:"clusters"`
	// Partial is true when an estimate leaves nodes out, or a cluster has none.
	Partial bool `json:"partial"`
}

// Summarize computes the summary of cs.
func Summarize(cs []Cluster) Summary {
	s := Summary{Clusters: len(cs), Bands: map[string]int{}, MonthlyCost: []CostTotal{}}
	type total struct {
		cents    int64
		clusters int
		partial  bool
	}
	costs := map[string]total{}
	for _, b := range Bands {
		s.Bands[b] = 0
	}
	var cpu, mem average
	for i := range cs {
		c := &cs[i]
		band := BandOf(c)
		s.Bands[band]++
		if c.Unreachable {
			s.Unreachable++
		} else if c.Ready && band == BandGreen {
			s.Healthy++
		}
		if cents, ok := costCents(c.Cost); ok {
			t := costs[c.Cost.Currency]
			t.cents += cents
			t.clusters++
			t.partial = t.partial || c.Cost.Partial
			costs[c.Cost.Currency] = t
		}
		s.NodesReady += int64(c.NodesReady)
		s.NodesTotal += int64(c.NodesTotal)
		cpu.add(c.CPUPercent)
		mem.add(c.MemoryPercent)
		s.HostRegistered = s.HostRegistered || c.IsHost
	}
	s.AvgCPUPercent, s.AvgMemoryPercent = cpu.value(), mem.value()
	for cur, t := range costs {
		s.MonthlyCost = append(s.MonthlyCost, CostTotal{
			Currency: cur, Monthly: fmt.Sprintf("%d.%02d", t.cents/100, t.cents%100), Clusters: t.clusters,
			Partial: t.partial || t.clusters < len(cs),
		})
	}
	slices.SortFunc(s.MonthlyCost, func(a, b CostTotal) int { return cmp.Compare(a.Currency, b.Currency) })
	return s
}

type average struct {
	sum, n int64
}

func (a *average) add(p *int32) {
	if p != nil {
		a.sum += int64(*p)
		a.n++
	}
}

func (a *average) value() *float64 {
	if a.n == 0 {
		return nil
	}
	v := math.Round(float64(a.sum)/float64(a.n)*10) / 10
	return &v
}
