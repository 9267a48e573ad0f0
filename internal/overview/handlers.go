package overview

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

// Paths of the overview.
const (
	pathFleetFragment = "/fragments/fleet"
	pathFleetAPI      = "/v1/fleet"
	pathLogin         = "/login"
	pathLogout        = "/logout"
)

// noNamespace stands for the empty namespace of a self-registered cluster in paths and keys.
const noNamespace = "_"

// routes is the overview's mux, without authentication.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveIndex)
	mux.HandleFunc("GET "+pathFleetFragment, s.serveFragment)
	mux.HandleFunc("GET /clusters/{workspace}/{namespace}/{name}", s.serveCluster)
	mux.HandleFunc("GET "+pathFleetAPI, s.serveFleetJSON)
	mux.HandleFunc("GET "+pathFleetAPI+"/clusters/{workspace}/{namespace}/{name}", s.serveClusterJSON)
	mux.HandleFunc("GET /assets/", s.ui.serveAsset)
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, r, http.StatusNotFound, "Page not found", "There is no page at "+r.URL.Path+".")
	})
	return mux
}

// clusterPath is the path of c's page under prefix ("/clusters" or the API's).
func clusterPath(prefix string, c *Cluster) string {
	return prefix + "/" + url.PathEscape(c.Workspace) + "/" + url.PathEscape(namespaceSegment(c.Namespace)) + "/" + url.PathEscape(c.Name)
}

func namespaceSegment(ns string) string {
	if ns == "" {
		return noNamespace
	}
	return ns
}

// Key is c's key in the table's data-key attribute and the JSON paths:
// <workspace>/<namespace>/<name>, namespace "_" when it has none.
func Key(c *Cluster) string {
	return c.Workspace + "/" + namespaceSegment(c.Namespace) + "/" + c.Name
}

// chrome is what every page shows around its content.
type chrome struct {
	Title  string
	Secure bool
}

// indexPage is the data of the overview page.
type indexPage struct {
	chrome
	Fleet     fleetView
	Query     Query
	BandOpts  []option
	RefreshMS int64
	ChartLib  bool
	Fragment  string
	API       string
	Workspace string
}

type option struct {
	Value, Label string
	Selected     bool
}

func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	q := ParseQuery(r.URL.Query())
	fv, err := s.fleet(r, q)
	if err != nil {
		s.sourceFailed(w, r, err)
		return
	}
	opts := []option{{Value: "", Label: "all bands", Selected: q.Band == ""}}
	for _, b := range Bands {
		opts = append(opts, option{Value: b, Label: b, Selected: q.Band == b})
	}
	s.ui.render(w, http.StatusOK, pageIndex, "base", indexPage{
		chrome:    chrome{Title: "Fleet overview", Secure: s.opts.Secure},
		Fleet:     fv,
		Query:     q,
		BandOpts:  opts,
		RefreshMS: s.opts.RefreshInterval.Milliseconds(),
		ChartLib:  s.ui.hasChartLibrary(),
		Fragment:  pathFleetFragment,
		API:       pathFleetAPI,
		Workspace: s.opts.PlatformWorkspace,
	})
}

// serveFragment is the part of the page that updates: the cards, the "Get started" panel and
// the table.
func (s *Server) serveFragment(w http.ResponseWriter, r *http.Request) {
	fv, err := s.fleet(r, ParseQuery(r.URL.Query()))
	if err != nil {
		s.sourceFailed(w, r, err)
		return
	}
	s.ui.render(w, http.StatusOK, pageIndex, "fleet", fv)
}

func (s *Server) fleet(r *http.Request, q Query) (fleetView, error) {
	cs, err := s.opts.Source.Clusters(r.Context())
	if err != nil {
		return fleetView{}, err
	}
	return newFleetView(cs, q, s.now(), s.opts.PlatformWorkspace), nil
}

func (s *Server) sourceFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.opts.Log.Error(err, "Failed to list the fleet's clusters")
	if wantsJSON(r) {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "failed to list the fleet's clusters: " + err.Error()})
		return
	}
	s.renderError(w, r, http.StatusServiceUnavailable, "Fleet not available", "The fleet's clusters could not be listed: "+err.Error())
}

// fleetView is the fleet as the cards and the table show it.
type fleetView struct {
	Cards       []card
	Headers     []header
	Rows        []row
	Shown       int
	Total       int
	Filtered    bool
	GetStarted  bool
	Workspace   string
	GeneratedAt string
	Clock       string
}

type card struct {
	Key, Label, Value, Hint string
}

type header struct {
	Key, Label, Href, AriaSort, Arrow string
	Numeric                           bool
}

type row struct {
	Key, Href, Workspace, Name, Namespace, Phase, PhaseClass, Message string
	IsHost                                                            bool
	// Unreachable is shown next to the phase, with since when (UnreachableSince, RFC 3339).
	Unreachable      bool
	UnreachableSince string
	// Cost is the monthly estimate with its currency, "—" for none; CostPartial marks one that
	// leaves nodes out, CostTitle says which.
	Cost, CostTitle string
	CostPartial     bool
	// Usage says where CPU and memory come from: "usage" (metrics API), "requests" or "".
	Usage                     string
	Band, Score               string
	Nodes                     string
	NodesClass                string
	CPU, Memory               bar
	Version, Provider, Region string
}

// bar is a percentage as a horizontal bar; Width is a CSS class (p0..p100) since the CSP allows
// no inline style.
type bar struct {
	Known         bool
	Text          string
	Width, Level  string
	Label, Column string
}

var columnLabels = map[string]string{
	ColWorkspace: "Workspace", ColName: "Name", ColPhase: "Phase", ColHealth: "Health", ColNodes: "Nodes",
	ColCPU: "CPU", ColMemory: "Memory", ColCost: "Cost/month", ColVersion: "Version", ColProvider: "Provider", ColRegion: "Region",
}

var numericColumns = map[string]bool{ColHealth: true, ColNodes: true, ColCPU: true, ColMemory: true, ColCost: true}

func newFleetView(all []Cluster, q Query, now time.Time, platformWorkspace string) fleetView {
	sum := Summarize(all)
	cs := q.Apply(all)
	now = now.UTC()
	fv := fleetView{
		Shown:       len(cs),
		Total:       len(all),
		Filtered:    q.Q != "" || q.Band != "",
		GetStarted:  !sum.HostRegistered,
		Workspace:   platformWorkspace,
		GeneratedAt: now.Format(time.RFC3339),
		Clock:       now.Format("15:04:05") + " UTC",
		Cards: []card{
			{Key: "clusters", Label: "Clusters", Value: strconv.Itoa(sum.Clusters), Hint: bandHint(sum.Bands)},
			{Key: "healthy", Label: "Healthy", Value: fmt.Sprintf("%d/%d", sum.Healthy, sum.Clusters), Hint: "Ready, reachable and green"},
			{Key: "unreachable", Label: "Unreachable", Value: strconv.Itoa(sum.Unreachable), Hint: "health unknown"},
			{Key: "nodes", Label: "Nodes ready", Value: fmt.Sprintf("%d/%d", sum.NodesReady, sum.NodesTotal), Hint: "across the fleet"},
			{Key: "cpu", Label: "Avg CPU", Value: avgText(sum.AvgCPUPercent), Hint: "use / allocatable"},
			{Key: "memory", Label: "Avg memory", Value: avgText(sum.AvgMemoryPercent), Hint: "use / allocatable"},
			costCard(sum.MonthlyCost),
		},
	}
	for _, col := range Columns {
		fv.Headers = append(fv.Headers, newHeader(col, q))
	}
	for i := range cs {
		fv.Rows = append(fv.Rows, newRow(&cs[i]))
	}
	return fv
}

// costCard is the card of the fleet's estimated monthly cost.
func costCard(totals []CostTotal) card {
	c := card{Key: "cost", Label: "Est. monthly cost", Value: "—", Hint: "no price table, or no priced nodes"}
	if len(totals) == 0 {
		return c
	}
	var values []string
	partial := false
	clusters := 0
	for _, t := range totals {
		values = append(values, t.Monthly+" "+t.Currency)
		partial = partial || t.Partial
		clusters += t.Clusters
	}
	c.Value = strings.Join(values, " + ")
	c.Hint = fmt.Sprintf("%d cluster%s with an estimate", clusters, plural(clusters))
	if partial {
		c.Hint += "; partial"
	}
	return c
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func bandHint(bands map[string]int) string {
	return fmt.Sprintf("%d green · %d amber · %d red · %d unknown", bands[BandGreen], bands[BandAmber], bands[BandRed], bands[BandUnknown])
}

func avgText(p *float64) string {
	if p == nil {
		return "—"
	}
	return strconv.FormatFloat(*p, 'f', -1, 64) + "%"
}

// newHeader is column's header: a link sorting by it, ascending first, descending when it is
// already sorted ascending.
func newHeader(col string, q Query) header {
	h := header{Key: col, Label: columnLabels[col], AriaSort: "none", Numeric: numericColumns[col]}
	current, dir := q.Sort, q.Dir
	if current == "" {
		current, dir = ColWorkspace, DirAsc
	}
	next := q
	next.Sort, next.Dir = col, DirAsc
	if current == col {
		if dir == DirAsc {
			h.AriaSort, h.Arrow = "ascending", "▲"
			next.Dir = DirDesc
		} else {
			h.AriaSort, h.Arrow = "descending", "▼"
		}
	}
	h.Href = "?" + next.Values().Encode()
	return h
}

func newRow(c *Cluster) row {
	r := row{
		Key: Key(c), Href: clusterPath("/clusters", c),
		Workspace: c.Workspace, Name: c.Name, Namespace: c.Namespace,
		Phase: orDash(c.Phase), PhaseClass: phaseClass(c.Phase), Message: c.Message,
		IsHost: c.IsHost,
		Band:   BandOf(c), Score: "—",
		Nodes:   "—",
		CPU:     newBar(c.CPUPercent, "CPU"),
		Memory:  newBar(c.MemoryPercent, "Memory"),
		Version: orDash(c.Version), Provider: orDash(c.Provider), Region: orDash(c.Region),
	}
	if c.Health != nil {
		r.Score = strconv.Itoa(int(c.Health.Score))
	}
	if c.Unreachable {
		r.Unreachable = true
		if c.UnreachableSince != nil {
			r.UnreachableSince = c.UnreachableSince.UTC().Format(time.RFC3339)
		}
	}
	r.Cost = "—"
	if c.Cost != nil {
		r.Cost = c.Cost.Monthly + " " + c.Cost.Currency
		r.CostPartial = c.Cost.Partial
		r.CostTitle = fmt.Sprintf("%d node%s priced", c.Cost.PricedNodes, plural(int(c.Cost.PricedNodes)))
		if c.Cost.Partial {
			r.CostTitle += fmt.Sprintf("; %d left out (no instance type, or one the price table does not list", c.Cost.UnpricedNodes)
			if len(c.Cost.UnpricedInstanceTypes) > 0 {
				r.CostTitle += ": " + strings.Join(c.Cost.UnpricedInstanceTypes, ", ")
			}
			r.CostTitle += ")"
		}
	}
	switch c.UsageSource {
	case string(kov1alpha1.UsageSourceMetricsAPI):
		r.Usage = "usage"
	case string(kov1alpha1.UsageSourceRequests):
		r.Usage = "requests"
	}
	if c.NodesTotal > 0 {
		r.Nodes = fmt.Sprintf("%d/%d", c.NodesReady, c.NodesTotal)
		if c.NodesReady < c.NodesTotal {
			r.NodesClass = "nodes-short"
		}
	}
	return r
}

func newBar(p *int32, label string) bar {
	if p == nil {
		return bar{Text: "—", Label: label + " unknown"}
	}
	v := *p
	w := min(max(v, 0), 100)
	level := "ok"
	switch {
	case v >= 95:
		level = "critical"
	case v >= 80:
		level = "high"
	}
	return bar{Known: true, Text: fmt.Sprintf("%d%%", v), Width: fmt.Sprintf("p%d", w), Level: level, Label: fmt.Sprintf("%s %d%%", label, v)}
}

// phaseClass colours a phase as the seed's cards do: Ready and Registered green, Failed red,
// Deleting grey, everything else in progress (amber).
func phaseClass(phase string) string {
	switch phase {
	case string(kov1alpha1.HostClusterPhaseReady), PhaseRegistered:
		return "phase-ok"
	case string(kov1alpha1.HostClusterPhaseFailed):
		return "phase-failed"
	case string(kov1alpha1.HostClusterPhaseDeleting), "":
		return "phase-idle"
	default:
		return "phase-progress"
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// clusterPage is the data of a cluster's page.
type clusterPage struct {
	chrome
	Row        row
	Cluster    Cluster
	APIHref    string
	ObservedAt string
	Breakdown  *breakdown
}

// breakdown is a health score's penalties from 100 to the score.
type breakdown struct {
	Score, Band string
	Lines       []breakdownLine
	// Adjusted says how the score differs from 100 minus the penalties (rounded, clamped).
	Adjusted string
}

type breakdownLine struct {
	Reason, Detail, Points, Running string
}

func newBreakdown(h *Health) *breakdown {
	b := &breakdown{Score: strconv.Itoa(int(h.Score)), Band: string(BandOf(&Cluster{Health: h}))}
	total, known := 100.0, true
	for _, p := range h.Penalties {
		l := breakdownLine{Reason: p.Reason, Detail: p.Detail, Points: "−" + strings.TrimPrefix(p.Points, "-"), Running: "—"}
		v, err := strconv.ParseFloat(strings.TrimPrefix(p.Points, "-"), 64)
		if err != nil {
			known = false
		}
		if known {
			total -= v
			l.Running = formatPoints(total)
		}
		b.Lines = append(b.Lines, l)
	}
	if known && formatPoints(total) != b.Score {
		b.Adjusted = fmt.Sprintf("100 minus the penalties is %s; the score is rounded to a whole number and kept within 0–100.", formatPoints(total))
	}
	return b
}

func formatPoints(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (s *Server) lookup(r *http.Request) (*Cluster, error) {
	ws, ns, name := r.PathValue("workspace"), r.PathValue("namespace"), r.PathValue("name")
	if ns == noNamespace {
		ns = ""
	}
	cs, err := s.opts.Source.Clusters(r.Context())
	if err != nil {
		return nil, err
	}
	for i := range cs {
		if cs[i].Workspace == ws && cs[i].Namespace == ns && cs[i].Name == name {
			return &cs[i], nil
		}
	}
	return nil, nil
}

func (s *Server) serveCluster(w http.ResponseWriter, r *http.Request) {
	c, err := s.lookup(r)
	if err != nil {
		s.sourceFailed(w, r, err)
		return
	}
	if c == nil {
		s.renderError(w, r, http.StatusNotFound, "Cluster not found",
			fmt.Sprintf("No cluster %s in workspace %s. It may have been deleted, or its workspace is not bound.", nsName(r.PathValue("namespace"), r.PathValue("name")), r.PathValue("workspace")))
		return
	}
	p := clusterPage{
		chrome:  chrome{Title: c.Name, Secure: s.opts.Secure},
		Row:     newRow(c),
		Cluster: *c,
		APIHref: clusterPath(pathFleetAPI+"/clusters", c),
	}
	if c.ObservedAt != nil {
		p.ObservedAt = c.ObservedAt.UTC().Format(time.RFC3339)
	}
	if c.Health != nil {
		p.Breakdown = newBreakdown(c.Health)
	}
	s.ui.render(w, http.StatusOK, pageCluster, "base", p)
}

func nsName(ns, name string) string {
	if ns == noNamespace || ns == "" {
		return name
	}
	return ns + "/" + name
}

// errorPage is the data of an error page.
type errorPage struct {
	chrome
	Status  int
	Heading string
	Message string
}

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
	s.ui.render(w, status, pageError, "base", errorPage{
		chrome: chrome{Title: heading, Secure: s.opts.Secure}, Status: status, Heading: heading, Message: message,
	})
}

// FleetResponse is the body of GET /v1/fleet.
type FleetResponse struct {
	// GeneratedAt is when the response was made, RFC 3339.
	GeneratedAt string `json:"generatedAt"`
	// Summary is the whole fleet's, whatever the filter.
	Summary Summary `json:"summary"`
	// Clusters are the clusters the query keeps, in its order.
	Clusters []Cluster `json:"clusters"`
}

type errorBody struct {
	Error string `json:"error"`
}

func (s *Server) serveFleetJSON(w http.ResponseWriter, r *http.Request) {
	cs, err := s.opts.Source.Clusters(r.Context())
	if err != nil {
		s.sourceFailed(w, r, err)
		return
	}
	out := FleetResponse{
		GeneratedAt: s.now().UTC().Format(time.RFC3339),
		Summary:     Summarize(cs),
		Clusters:    ParseQuery(r.URL.Query()).Apply(cs),
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) serveClusterJSON(w http.ResponseWriter, r *http.Request) {
	c, err := s.lookup(r)
	if err != nil {
		s.sourceFailed(w, r, err)
		return
	}
	if c == nil {
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no cluster %s in workspace %s", nsName(r.PathValue("namespace"), r.PathValue("name")), r.PathValue("workspace"))})
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func wantsJSON(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/v1/")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "failed to encode the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
