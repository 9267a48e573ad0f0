package overview

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	certutil "k8s.io/client-go/util/cert"
)

var now = time.Date(2025, 6, 1, 12, 0, 1, 0, time.UTC)

// newTestServer serves cs (plain HTTP, loopback) with a fixed clock.
func newTestServer(t *testing.T, cs []Cluster) *Server {
	t.Helper()
	s, err := New(Options{
		BindAddress: "127.0.0.1:0",
		Source:      SourceFunc(func(context.Context) ([]Cluster, error) { return cs, nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return now }
	return s
}

type response struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, h http.Handler, target string, header ...string) response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Host = "127.0.0.1:8083" // as a browser through kubectl port-forward addresses it
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.String()}
}

var (
	rowKeyRE   = regexp.MustCompile(`<tr data-key="([^"]*)"`)
	cardRE     = regexp.MustCompile(`(?s)data-card="(\w+)">\s*<div class="card-label">[^<]*</div>\s*<div class="card-value">([^<]*)</div>`)
	headerRE   = regexp.MustCompile(`<th scope="col" data-sort="(\w+)" aria-sort="(\w+)"[^>]*><a href="([^"]*)">`)
	badgeRowRE = regexp.MustCompile(`(?s)<tr data-key="([^"]*)" data-band="(\w+)">.*?<span class="badge badge-(\w+)" data-band="(\w+)"[^>]*>([^<]*)</span>`)
)

// rowKeys are the data-key attributes of the table's rows, in order, unescaped.
func rowKeys(body string) []string {
	out := []string{}
	for _, m := range rowKeyRE.FindAllStringSubmatch(body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

func cards(body string) map[string]string {
	out := map[string]string{}
	for _, m := range cardRE.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

const (
	keyPlatform = "root:kubeopera/_/platform"
	keyEdge9    = "root:orgs:acme/infra/edge-9"
	keyEdge10   = "root:orgs:acme/infra/edge-10"
	keyProdEU   = "root:orgs:acme/infra/prod-eu"
	keyHostile  = "root:orgs:beta/default/<script>alert(1)</script>"
)

func TestIndexPage(t *testing.T) {
	r := get(t, newTestServer(t, fleet()).Handler(), "/")
	if r.status != http.StatusOK {
		t.Fatalf("GET / = %d:\n%s", r.status, r.body)
	}
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'self'",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-store",
		"Content-Type":            "text/html; charset=utf-8",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}

	if diff := cmp.Diff([]string{keyPlatform, keyEdge9, keyEdge10, keyProdEU, keyHostile}, rowKeys(r.body)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	wantCards := map[string]string{"clusters": "5", "healthy": "2/5", "unreachable": "0", "nodes": "6/9", "cpu": "34.5%", "memory": "55%", "cost": "231.26 USD"}
	if diff := cmp.Diff(wantCards, cards(r.body)); diff != "" {
		t.Errorf("cards (-want +got):\n%s", diff)
	}

	// Every column has a header with its sort key and aria-sort; the default order is workspace
	// ascending, so its link sorts descending and the others sort ascending.
	var sorts []string
	for _, m := range headerRE.FindAllStringSubmatch(r.body, -1) {
		sorts = append(sorts, m[1])
		wantAria, wantHref := "none", "?sort="+m[1]
		if m[1] == ColWorkspace {
			wantAria, wantHref = "ascending", "?dir=desc&sort=workspace"
		}
		if m[2] != wantAria || html.UnescapeString(m[3]) != wantHref {
			t.Errorf("header %s: aria-sort %q, href %q; want %q, %q", m[1], m[2], html.UnescapeString(m[3]), wantAria, wantHref)
		}
	}
	if diff := cmp.Diff(Columns, sorts); diff != "" {
		t.Errorf("header columns (-want +got):\n%s", diff)
	}

	// Badges: class and data-band by band, the score or a dash.
	wantBadges := map[string][2]string{
		keyPlatform: {"green", "100"}, keyEdge9: {"amber", "73"}, keyEdge10: {"unknown", "—"},
		keyProdEU: {"green", "92"}, keyHostile: {"red", "40"},
	}
	gotBadges := map[string][2]string{}
	for _, m := range badgeRowRE.FindAllStringSubmatch(r.body, -1) {
		if m[2] != m[3] || m[3] != m[4] {
			t.Errorf("row %s: data-band %q, badge class %q, badge data-band %q differ", m[1], m[2], m[3], m[4])
		}
		gotBadges[html.UnescapeString(m[1])] = [2]string{m[3], m[5]}
	}
	if diff := cmp.Diff(wantBadges, gotBadges); diff != "" {
		t.Errorf("badges (-want +got):\n%s", diff)
	}

	for _, want := range []string{
		`<table id="clusters">`,
		`<input id="filter" name="q" type="search" value=""`,
		`<select id="band" name="band">`,
		`<div id="treemap"`,
		`data-refresh-ms="5000"`,
		`data-fragment="/fragments/fleet"`,
		`data-api="/v1/fleet"`,
		`KubeOpera <span class="brand-sep">·</span> <span class="brand-page">Fleet overview</span>`,
		`<time id="updated" datetime="2025-06-01T12:00:01Z">12:00:01 UTC</time>`,
		// Bars: width class and text; unknown is a dash.
		`<span class="bar-fill p85 level-high"></span></span><span class="bar-num">85%</span>`,
		`<span class="bar-fill p97 level-critical"></span></span><span class="bar-num">97%</span>`,
		`<span class="bar-fill p0 level-ok"></span></span><span class="bar-num">0%</span>`,
		`<span class="muted" aria-label="Memory unknown">—</span>`,
		// Links to the breakdown pages, the namespace-less one with "_".
		`<a href="/clusters/root:orgs:acme/infra/edge-9">edge-9</a>`,
		`<a href="/clusters/root:kubeopera/_/platform">platform</a> <span class="chip"`,
		`<td class="num nodes-short">2/3</td>`,
		`<link rel="stylesheet" href="/assets/style.css?v=`,
		`<script src="/assets/app.js?v=`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(r.body, "register-host") {
		t.Error("the page prompts to register the platform's cluster although it is registered")
	}
	if strings.Contains(r.body, "style=") {
		t.Error("the page has an inline style, which its CSP blocks")
	}
	if n := strings.Count(r.body, "<script"); n != strings.Count(r.body, `<script src="/assets/`) {
		t.Errorf("the page has %d script tags, not all from /assets/", n)
	}
}

func TestIndexQuery(t *testing.T) {
	h := newTestServer(t, fleet()).Handler()

	r := get(t, h, "/?q=ACME&sort=cpu&dir=desc")
	if diff := cmp.Diff([]string{keyEdge9, keyProdEU, keyEdge10}, rowKeys(r.body)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		`data-sort="cpu" aria-sort="descending" class="num"><a href="?q=ACME&amp;sort=cpu">CPU<span class="arrow" aria-hidden="true">▼</span>`,
		`data-sort="workspace" aria-sort="none"><a href="?q=ACME&amp;sort=workspace">`,
		`<input id="filter" name="q" type="search" value="ACME"`,
		`<input type="hidden" name="sort" value="cpu">`,
		`<input type="hidden" name="dir" value="desc">`,
		`3 of 5 clusters match`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// The cards are the whole fleet's.
	if got := cards(r.body)["clusters"]; got != "5" {
		t.Errorf("clusters card = %q, want 5", got)
	}

	r = get(t, h, "/?band=unknown")
	if diff := cmp.Diff([]string{keyEdge10}, rowKeys(r.body)); diff != "" {
		t.Errorf("band=unknown rows (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.body, `<option value="unknown" selected>unknown</option>`) {
		t.Error("the band select does not show the band")
	}

	r = get(t, h, "/?q=nowhere")
	if len(rowKeys(r.body)) != 0 || !strings.Contains(r.body, "No cluster matches the filter.") {
		t.Errorf("a filter matching nothing: rows %v, no empty message", rowKeys(r.body))
	}
}

func TestGetStarted(t *testing.T) {
	var tenants []Cluster
	for _, c := range fleet() {
		if !c.IsHost {
			tenants = append(tenants, c)
		}
	}
	r := get(t, newTestServer(t, tenants).Handler(), "/")
	for _, want := range []string{`id="get-started"`, `<code>manager register-host</code>`, `<code>root:kubeopera</code>`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page without the platform's cluster lacks %s", want)
		}
	}
	if got := cards(r.body)["healthy"]; got != "1/4" {
		t.Errorf("healthy card = %q, want 1/4", got)
	}
}

func TestEmptyFleet(t *testing.T) {
	r := get(t, newTestServer(t, nil).Handler(), "/")
	want := map[string]string{"clusters": "0", "healthy": "0/0", "unreachable": "0", "nodes": "0/0", "cpu": "—", "memory": "—", "cost": "—"}
	if diff := cmp.Diff(want, cards(r.body)); diff != "" {
		t.Errorf("cards (-want +got):\n%s", diff)
	}
	for _, s := range []string{"No clusters yet", "register-host", `0 clusters`} {
		if !strings.Contains(r.body, s) {
			t.Errorf("empty page lacks %q", s)
		}
	}
}

func TestFragment(t *testing.T) {
	r := get(t, newTestServer(t, fleet()).Handler(), "/fragments/fleet?band=red&sort=name")
	if r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET fragment = %d, Cache-Control %q", r.status, r.header.Get("Cache-Control"))
	}
	if !strings.HasPrefix(r.body, `<div id="fleet" data-generated-at="2025-06-01T12:00:01Z" data-shown="1" data-total="5">`) {
		t.Errorf("fragment starts with %.120q", r.body)
	}
	if strings.Contains(r.body, "<html") || strings.Contains(r.body, `id="filter"`) {
		t.Error("the fragment has more than the cards and the table")
	}
	if diff := cmp.Diff([]string{keyHostile}, rowKeys(r.body)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if got := cards(r.body)["nodes"]; got != "6/9" {
		t.Errorf("nodes card = %q, want 6/9", got)
	}
}

func TestClusterPage(t *testing.T) {
	h := newTestServer(t, fleet()).Handler()

	t.Run("the nodes of a self-registered cluster", func(t *testing.T) {
		r := get(t, h, "/clusters/root:kubeopera/_/platform")
		for _, want := range []string{
			`<tr data-node="cp-1"><td>cp-1</td><td><span class="phase phase-ok">Ready</span></td><td><span class="muted">none</span></td></tr>`,
			`<tr data-node="worker-&lt;2&gt;"><td>worker-&lt;2&gt;</td><td><span class="phase phase-failed">NotReady</span></td><td>DiskPressure, PIDPressure</td></tr>`,
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the host's page lacks %s", want)
			}
		}
		if r := get(t, h, "/clusters/root:orgs:acme/infra/edge-9"); strings.Contains(r.body, `id="nodes"`) {
			t.Error("a HostCluster's page has a node list")
		}
	})

	t.Run("penalties", func(t *testing.T) {
		r := get(t, h, "/clusters/root:orgs:acme/infra/edge-9")
		if r.status != http.StatusOK {
			t.Fatalf("GET = %d", r.status)
		}
		for _, want := range []string{
			`<tr class="start"><td>Start</td><td class="muted">every cluster starts at 100</td><td class="num"></td><td class="num">100</td></tr>`,
			`<tr class="penalty"><td>NodeNotReady</td><td>node edge-9-c not ready</td><td class="num">−5</td><td class="num">95</td></tr>`,
			`<tr class="penalty"><td>MemoryCritical</td><td>memory requests at 97%</td><td class="num">−10</td><td class="num">85</td></tr>`,
			`<tr class="penalty"><td>PodsCrashLooping</td><td>5 pods crash-looping</td><td class="num">−12.5</td><td class="num">72.5</td></tr>`,
			`<span class="badge badge-amber" data-band="amber">73</span> <span class="band-name">amber</span>`,
			`100 minus the penalties is 72.5; the score is rounded`,
			`<span class="phase phase-ok">Ready</span>`,
			`<dt>Cluster ID</dt><dd><code>edge-9</code></dd>`,
			`<dt>Nodes ready</dt><dd>2/3</dd>`,
			`<dt>CPU</dt><dd>85% <span class="muted">requested (no metrics API)</span></dd>`,
			`<dt>Est. monthly cost</dt><dd>—</dd>`,
			`<dt>Kubernetes version</dt><dd>v1.9.0</dd>`,
			`<dt>Provider</dt><dd>hetzner</dd>`,
			`<dt>Region</dt><dd>fsn1</dd>`,
			`<time datetime="2025-06-01T11:59:30Z">`,
			`<a href="/v1/fleet/clusters/root:orgs:acme/infra/edge-9">`,
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("page lacks %s", want)
			}
		}
		if strings.Contains(r.body, "no penalties") || strings.Contains(r.body, "not read yet") {
			t.Error("page with penalties says there are none")
		}
	})

	t.Run("no penalties, a note, no namespace", func(t *testing.T) {
		r := get(t, h, "/clusters/root:kubeopera/_/platform")
		if r.status != http.StatusOK {
			t.Fatalf("GET = %d", r.status)
		}
		for _, want := range []string{
			`<tr class="none"><td colspan="4">no penalties</td></tr>`,
			`<span class="badge badge-green" data-band="green">100</span>`,
			`<strong>Note:</strong> pods not read: the platform may not list them`,
			`<dt>Namespace</dt><dd>—</dd>`,
			`<dt>Source</dt><dd>self_registered</dd>`,
			`<dt>Memory</dt><dd>—</dd>`,
			`<span class="phase phase-ok">Registered</span>`,
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("page lacks %s", want)
			}
		}
		if strings.Contains(r.body, "100 minus the penalties") {
			t.Error("an exact score is explained as rounded")
		}
	})

	t.Run("not read yet", func(t *testing.T) {
		r := get(t, h, "/clusters/root:orgs:acme/infra/edge-10")
		for _, want := range []string{
			`<p class="not-read">Health not read yet`,
			`<span class="phase phase-progress">Provisioning</span>`,
			`<p class="message">Terraform apply running</p>`,
			`<dt>Observed</dt><dd>never</dd>`,
			`class="badge badge-unknown badge-lg" data-band="unknown"`,
		} {
			if !strings.Contains(r.body, want) {
				t.Errorf("page lacks %s", want)
			}
		}
		if strings.Contains(r.body, `class="breakdown"`) {
			t.Error("a cluster without health has a breakdown table")
		}
	})

	t.Run("unknown cluster", func(t *testing.T) {
		for _, p := range []string{"/clusters/root:orgs:acme/infra/gone", "/clusters/root:orgs:acme/_/edge-9", "/clusters/root:kubeopera/platform/_"} {
			r := get(t, h, p)
			if r.status != http.StatusNotFound || !strings.Contains(r.body, "Cluster not found") {
				t.Errorf("GET %s = %d, want 404 with Cluster not found:\n%s", p, r.status, r.body)
			}
			if r.header.Get("Content-Security-Policy") != "default-src 'self'" {
				t.Errorf("GET %s: no CSP on the 404 page", p)
			}
		}
	})
}

func TestNotFound(t *testing.T) {
	h := newTestServer(t, fleet()).Handler()
	for _, p := range []string{"/nope", "/clusters/only-two/parts", "/clusters/a/b/c/d"} {
		r := get(t, h, p)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "<h1>Page not found</h1>") {
			t.Errorf("GET %s = %d, want the 404 page", p, r.status)
		}
	}
	r := get(t, h, "/v1/things")
	if r.status != http.StatusNotFound || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /v1/things = %d %s, want a JSON 404", r.status, r.header.Get("Content-Type"))
	}
	r = get(t, h, "/assets/missing.js")
	if r.status != http.StatusNotFound {
		t.Errorf("GET /assets/missing.js = %d, want 404", r.status)
	}
}

func TestFleetJSON(t *testing.T) {
	h := newTestServer(t, fleet()).Handler()
	r := get(t, h, "/v1/fleet")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET /v1/fleet = %d, %q, %q", r.status, r.header.Get("Content-Type"), r.header.Get("Cache-Control"))
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"clusters", "generatedAt", "summary"}, sortedKeys(countKeys(body))); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	if string(body["generatedAt"]) != `"2025-06-01T12:00:01Z"` {
		t.Errorf("generatedAt = %s", body["generatedAt"])
	}
	var summary map[string]any
	if err := json.Unmarshal(body["summary"], &summary); err != nil {
		t.Fatal(err)
	}
	wantSummary := map[string]any{
		"clusters": 5.0, "healthy": 2.0, "nodesReady": 6.0, "nodesTotal": 9.0,
		"avgCPUPercent": 34.5, "avgMemoryPercent": 55.0, "hostRegistered": true, "unreachable": 0.0,
		"bands":       map[string]any{"green": 2.0, "amber": 1.0, "red": 1.0, "unknown": 1.0},
		"monthlyCost": []any{map[string]any{"currency": "USD", "monthly": "231.26", "clusters": 1.0, "partial": true}},
	}
	if diff := cmp.Diff(wantSummary, summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	var clusters []Cluster
	if err := json.Unmarshal(body["clusters"], &clusters); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(names(Sort(fleet(), "", DirAsc)), names(clusters)); diff != "" {
		t.Errorf("cluster order (-want +got):\n%s", diff)
	}
	// The cluster's JSON is the model's, field names included.
	var raw []map[string]any
	if err := json.Unmarshal(body["clusters"], &raw); err != nil {
		t.Fatal(err)
	}
	prod := raw[3]
	for k, want := range map[string]any{
		"workspace": "root:orgs:acme", "namespace": "infra", "name": "prod-eu", "clusterID": "prod-eu-1",
		"phase": "Ready", "ready": true, "isHost": false, "nodesReady": 3.0, "nodesTotal": 3.0,
		"cpuPercent": 41.0, "memoryPercent": 63.0, "kubernetesVersion": "v1.33.1", "provider": "aws",
		"region": "eu-central-1", "observedAt": "2025-06-01T11:59:30Z", "source": "connect_existing",
	} {
		if !cmp.Equal(prod[k], want) {
			t.Errorf("clusters[3].%s = %v, want %v", k, prod[k], want)
		}
	}
	if _, ok := raw[2]["cpuPercent"]; ok {
		t.Errorf("an unknown cpuPercent is in the JSON: %v", raw[2])
	}

	// The query applies to the clusters, not to the summary.
	r = get(t, h, "/v1/fleet?q=aws&sort=name&dir=desc")
	var filtered FleetResponse
	if err := json.Unmarshal([]byte(r.body), &filtered); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{prodEU, edge10}, names(filtered.Clusters)); diff != "" {
		t.Errorf("filtered clusters (-want +got):\n%s", diff)
	}
	if filtered.Summary.Clusters != 5 {
		t.Errorf("filtered summary.clusters = %d, want 5", filtered.Summary.Clusters)
	}

	// No clusters: an empty list, not null; averages null.
	r = get(t, newTestServer(t, nil).Handler(), "/v1/fleet?band=red")
	for _, want := range []string{`"clusters": []`, `"avgCPUPercent": null`, `"hostRegistered": false`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("empty fleet JSON lacks %s:\n%s", want, r.body)
		}
	}
}

func countKeys(m map[string]json.RawMessage) map[string]int {
	out := map[string]int{}
	for k := range m {
		out[k] = 1
	}
	return out
}

func TestClusterJSON(t *testing.T) {
	h := newTestServer(t, fleet()).Handler()
	r := get(t, h, "/v1/fleet/clusters/root:orgs:acme/infra/edge-9")
	if r.status != http.StatusOK {
		t.Fatalf("GET = %d", r.status)
	}
	var c Cluster
	if err := json.Unmarshal([]byte(r.body), &c); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fleet()[4], c); diff != "" {
		t.Errorf("cluster (-want +got):\n%s", diff)
	}
	r = get(t, h, "/v1/fleet/clusters/root:kubeopera/_/platform")
	if r.status != http.StatusOK || !strings.Contains(r.body, `"isHost": true`) {
		t.Errorf("GET the platform's cluster = %d:\n%s", r.status, r.body)
	}
	r = get(t, h, "/v1/fleet/clusters/root:orgs:acme/infra/gone")
	if r.status != http.StatusNotFound || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET unknown = %d %s", r.status, r.header.Get("Content-Type"))
	}
	var e map[string]string
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e["error"] != "no cluster infra/gone in workspace root:orgs:acme" {
		t.Errorf("404 body = %s (%v)", r.body, err)
	}
}

func TestHostileNamesAreEscaped(t *testing.T) {
	h := newTestServer(t, fleet()).Handler()
	const escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"

	r := get(t, h, "/")
	if strings.Contains(r.body, "<script>alert(1)") {
		t.Error("the page has the hostile name unescaped")
	}
	for _, want := range []string{
		`<tr data-key="root:orgs:beta/default/` + escaped + `"`,
		`<a href="/clusters/root:orgs:beta/default/%3Cscript%3Ealert%281%29%3C%2Fscript%3E">` + escaped + `</a>`,
		`title="terraform apply failed: &lt;b&gt;&#34;quota&#34;&lt;/b&gt;"`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %s", want)
		}
	}

	// The link works (the escaped slash stays in its segment) and the page escapes too.
	r = get(t, h, "/clusters/root:orgs:beta/default/%3Cscript%3Ealert%281%29%3C%2Fscript%3E")
	if r.status != http.StatusOK {
		t.Fatalf("GET the hostile cluster's page = %d", r.status)
	}
	if strings.Contains(r.body, "<script>") || strings.Contains(r.body, "<b>") {
		t.Error("the cluster page has markup of the cluster's fields unescaped")
	}
	for _, want := range []string{"<h1>" + escaped, `<p class="message">terraform apply failed: &lt;b&gt;&#34;quota&#34;&lt;/b&gt;</p>`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("cluster page lacks %s", want)
		}
	}

	// A hostile query is escaped in the filter input and the header links.
	r = get(t, h, `/?q="><script>x</script>`)
	if strings.Contains(r.body, "<script>x") {
		t.Error("the filter value is echoed unescaped")
	}
	if !strings.Contains(r.body, `value="&#34;&gt;&lt;script&gt;x&lt;/script&gt;"`) {
		t.Error("the filter input does not show the escaped query")
	}
}

func TestChartLibrary(t *testing.T) {
	s := newTestServer(t, fleet())
	s.ui.assets[chartLibrary] = asset{body: []byte("/* echarts */"), etag: `"abc"`, contentType: "text/javascript; charset=utf-8"}
	r := get(t, s.Handler(), "/")
	if !strings.Contains(r.body, `<script src="/assets/vendor/echarts.min.js?v=abc" defer></script>`) || strings.Contains(r.body, "chart library not built") {
		t.Error("with the chart library built, the page does not load it or says it is missing")
	}
	if !strings.Contains(r.body, `<div id="treemap" class="treemap" data-chart="ready">`) {
		t.Error("the treemap is not marked ready")
	}

	delete(s.ui.assets, chartLibrary)
	r = get(t, s.Handler(), "/")
	if r.status != http.StatusOK {
		t.Fatalf("GET / without the chart library = %d", r.status)
	}
	if !strings.Contains(r.body, `<p class="chart-missing">chart library not built: run make ui</p>`) {
		t.Error("without the chart library, the treemap does not say how to build it")
	}
	if strings.Contains(r.body, "echarts") {
		t.Error("without the chart library, the page still loads it")
	}
	if !strings.Contains(r.body, `<table id="clusters">`) || !strings.Contains(r.body, `<script src="/assets/app.js?v=`) {
		t.Error("without the chart library, the table or app.js is missing")
	}
}

func TestAssets(t *testing.T) {
	h := newTestServer(t, fleet()).Handler()
	for name, ctype := range map[string]string{"/assets/app.js": "text/javascript; charset=utf-8", "/assets/style.css": "text/css; charset=utf-8"} {
		r := get(t, h, name)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != ctype || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s = %d, %q", name, r.status, r.header.Get("Content-Type"))
		}
		etag := r.header.Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", name)
		}
		if r := get(t, h, name, "If-None-Match", etag); r.status != http.StatusNotModified {
			t.Errorf("GET %s with its ETag = %d, want 304", name, r.status)
		}
	}
	// The exact badge colours the browser tests read.
	css := get(t, h, "/assets/style.css").body
	for _, want := range []string{
		".badge-green { background-color: #1a7f37; color: #ffffff; }",
		".badge-amber { background-color: #d4a72c; color: #1f2328; }",
		".badge-red { background-color: #cf222e; color: #ffffff; }",
		".badge-unknown { background-color: #6e7781; color: #ffffff; }",
		".bar-fill.p0 { width: 0%; }", ".bar-fill.p100 { width: 100%; }",
	} {
		if !strings.Contains(css, want) {
			t.Errorf("style.css lacks %s", want)
		}
	}
}

func TestSourceFailure(t *testing.T) {
	s, err := New(Options{BindAddress: "localhost:0", Source: SourceFunc(func(context.Context) ([]Cluster, error) {
		return nil, errors.New("cache not synced")
	})})
	if err != nil {
		t.Fatal(err)
	}
	r := get(t, s.Handler(), "/")
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "cache not synced") {
		t.Errorf("GET / = %d:\n%s", r.status, r.body)
	}
	r = get(t, s.Handler(), "/v1/fleet")
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"error": "failed to list the fleet's clusters: cache not synced"`) {
		t.Errorf("GET /v1/fleet = %d:\n%s", r.status, r.body)
	}
}

func TestRefreshInterval(t *testing.T) {
	s, err := New(Options{BindAddress: "[::1]:0", Source: SourceFunc(func(context.Context) ([]Cluster, error) { return nil, nil }), RefreshInterval: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r := get(t, s.Handler(), "/"); !strings.Contains(r.body, `data-refresh-ms="7000"`) {
		t.Error("the page does not carry the refresh interval")
	}
}

func TestNewRefusesExposure(t *testing.T) {
	src := SourceFunc(func(context.Context) ([]Cluster, error) { return nil, nil })
	allow := func(_ logr.Logger, h http.Handler) (http.Handler, error) { return h, nil }
	tests := map[string]struct {
		opts    Options
		wantErr string
	}{
		"all interfaces": {Options{BindAddress: "0.0.0.0:8083"},
			"binding the fleet overview to 0.0.0.0:8083 exposes it: add --fleet-overview-secure (HTTPS, every request authenticated and authorized against the backend cluster)"},
		"empty host":         {Options{BindAddress: ":8083"}, "binding the fleet overview to :8083 exposes it"},
		"a private address":  {Options{BindAddress: "10.0.0.7:8083"}, "binding the fleet overview to 10.0.0.7:8083 exposes it"},
		"IPv6 any":           {Options{BindAddress: "[::]:8083"}, "binding the fleet overview to [::]:8083 exposes it"},
		"a host name":        {Options{BindAddress: "overview.example.com:443"}, "exposes it"},
		"not an address":     {Options{BindAddress: "8083"}, `invalid fleet overview bind address "8083"`},
		"loopback":           {Options{BindAddress: "127.0.0.1:8083"}, ""},
		"loopback range":     {Options{BindAddress: "127.0.0.2:8083"}, ""},
		"localhost":          {Options{BindAddress: "localhost:8083"}, ""},
		"IPv6 loopback":      {Options{BindAddress: "[::1]:8083"}, ""},
		"default":            {Options{}, ""},
		"secure, exposed":    {Options{BindAddress: "0.0.0.0:8083", Secure: true, Filter: allow}, ""},
		"secure, no backend": {Options{BindAddress: "0.0.0.0:8083", Secure: true}, "needs the backend's rest.Config"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.opts.Source = src
			_, err := New(tt.opts)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("New = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("New = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "needs a Source") {
		t.Errorf("New without a Source = %v", err)
	}
}

func TestStart(t *testing.T) {
	src := SourceFunc(func(context.Context) ([]Cluster, error) { return fleet(), nil })
	allow := func(_ logr.Logger, h http.Handler) (http.Handler, error) { return h, nil }
	certDir := t.TempDir()
	crt, key, err := certutil.GenerateSelfSignedCertKey("fleet.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		opts   Options
		scheme string
		// wantIssuer is the certificate's issuer's common name, when served over TLS.
		wantIssuer string
	}{
		{"plain", Options{BindAddress: "127.0.0.1:0", Source: src}, "http", ""},
		{"secure, self-signed", Options{BindAddress: "127.0.0.1:0", Source: src, Secure: true, Filter: allow, CertDir: t.TempDir()}, "https", "localhost-ca@"},
		{"secure, CertDir", Options{BindAddress: "127.0.0.1:0", Source: src, Secure: true, Filter: allow, CertDir: certDir}, "https", "fleet.example-ca@"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if s.NeedLeaderElection() {
				t.Error("NeedLeaderElection = true; every replica should serve")
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Start(ctx) }()
			addr := waitAddr(t, s)
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test's self-signed certificate
			}}
			resp, err := c.Get(tt.scheme + "://" + addr + "/v1/fleet")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"name": "prod-eu"`) {
				t.Errorf("GET = %d:\n%s", resp.StatusCode, b)
			}
			if tt.wantIssuer != "" {
				if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
					t.Fatal("no server certificate")
				}
				if got := resp.TLS.PeerCertificates[0].Issuer.CommonName; !strings.HasPrefix(got, tt.wantIssuer) {
					t.Errorf("certificate issued by %q, want %s…", got, tt.wantIssuer)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Start = %v after the context ended, want nil", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Start did not return after the context ended")
			}
		})
	}
}

func waitAddr(t *testing.T, s *Server) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if a := s.Addr(); a != nil {
			return a.String()
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the server did not listen")
	return ""
}

// TestPlainOverviewAnswersLoopbackHostsOnly: without authentication, a request addressed to any
// other host (a DNS name re-pointed at 127.0.0.1 by a web page the admin opened) is refused.
func TestPlainOverviewAnswersLoopbackHostsOnly(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	for host, want := range map[string]int{
		"127.0.0.1:8083":           http.StatusOK,
		"localhost:8083":           http.StatusOK,
		"[::1]:8083":               http.StatusOK,
		"localhost":                http.StatusOK,
		"rebound.example.com:8083": http.StatusMisdirectedRequest,
		"10.0.0.7:8083":            http.StatusMisdirectedRequest,
	} {
		if got := get(t, h, "/v1/fleet", "Host", host); got.status != want {
			t.Errorf("Host %s: %d, want %d", host, got.status, want)
		}
	}
}

// TestUnreachableCluster: a cluster the platform cannot reach shows Unreachable next to its phase
// (kept Ready), with since when, an unknown health badge, and is counted unreachable, not
// healthy, on the page and in the JSON.
func TestUnreachableCluster(t *testing.T) {
	since := observed.Add(-10 * time.Minute)
	cs := append(fleet(), Cluster{
		Workspace: "root:orgs:acme", Namespace: "infra", Name: "gone", ClusterID: "gone",
		Source: "connect_existing", Phase: "Ready", Message: "API server https://gone.example:6443 unreachable since 2025-06-01T11:49:30Z (connection refused)",
		Unreachable: true, UnreachableSince: &since,
		NodesReady: 3, NodesTotal: 3, Version: "v1.33.1", ObservedAt: &observed,
	})
	h := newTestServer(t, cs).Handler()
	r := get(t, h, "/")
	if got := cards(r.body); got["unreachable"] != "1" || got["healthy"] != "2/6" {
		t.Errorf("cards unreachable %q healthy %q, want 1 and 2/6", got["unreachable"], got["healthy"])
	}
	rowRE := regexp.MustCompile(`(?s)<tr data-key="root:orgs:acme/infra/gone" data-band="([a-z]+)">(.*?)</tr>`)
	m := rowRE.FindStringSubmatch(r.body)
	if m == nil {
		t.Fatalf("no row of the unreachable cluster:\n%s", r.body)
	}
	if m[1] != BandUnknown {
		t.Errorf("band %q, want unknown", m[1])
	}
	for _, want := range []string{
		`<span class="phase phase-ok"`, `>Ready</span>`,
		`<span class="chip chip-unreachable" data-unreachable="true" title="the platform cannot reach its API server since 2025-06-01T11:49:30Z; health unknown">Unreachable</span>`,
		`<span class="badge badge-unknown" data-band="unknown"`,
	} {
		if !strings.Contains(m[2], want) {
			t.Errorf("row lacks %s:\n%s", want, m[2])
		}
	}
	if n := strings.Count(r.body, `data-unreachable="true"`); n != 1 {
		t.Errorf("%d rows marked unreachable, want 1", n)
	}

	page := get(t, h, "/clusters/root:orgs:acme/infra/gone")
	for _, want := range []string{
		`since <time datetime="2025-06-01T11:49:30Z">`,
		`Health unknown: the cluster is unreachable`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("cluster page lacks %s", want)
		}
	}

	js := get(t, h, "/v1/fleet?band=unknown")
	var body FleetResponse
	if err := json.Unmarshal([]byte(js.body), &body); err != nil {
		t.Fatal(err)
	}
	if body.Summary.Unreachable != 1 || body.Summary.Healthy != 2 {
		t.Errorf("summary unreachable %d healthy %d, want 1 and 2", body.Summary.Unreachable, body.Summary.Healthy)
	}
	var gone *Cluster
	for i := range body.Clusters {
		if body.Clusters[i].Name == "gone" {
			gone = &body.Clusters[i]
		}
	}
	if gone == nil || !gone.Unreachable || gone.UnreachableSince == nil || !gone.UnreachableSince.Equal(since) || gone.Health != nil {
		t.Errorf("the unreachable cluster in the JSON: %+v", gone)
	}
}

// TestCostColumn: the estimate with its currency, partial ones marked, sortable by amount.
func TestCostColumn(t *testing.T) {
	cs := fleet()
	cs[1].Cost = &Cost{Monthly: "30.37", Currency: "USD", PricedNodes: 1, UnpricedNodes: 1, UnpricedInstanceTypes: []string{"g5.48xlarge"}, Partial: true}
	h := newTestServer(t, cs).Handler()
	r := get(t, h, "/?sort=cost&dir=desc")
	if diff := cmp.Diff([]string{keyProdEU, keyHostile, keyPlatform, keyEdge9, keyEdge10}, rowKeys(r.body)); diff != "" {
		t.Errorf("rows by cost, descending, none last (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		`<td class="num cost" title="3 nodes priced">231.26 USD</td>`,
		`<td class="num cost" title="1 node priced; 1 left out (no instance type, or one the price table does not list: g5.48xlarge)">30.37 USD <span class="partial" aria-label="partial estimate">(partial)</span></td>`,
		`<td class="num cost">—</td>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if got := cards(r.body)["cost"]; got != "261.63 USD" {
		t.Errorf("cost card %q, want 261.63 USD", got)
	}
}
