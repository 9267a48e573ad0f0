package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/overview"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/browser"
)

// Computed background colours of the overview's health badges (internal/overview's stylesheet):
// the seed's green, amber and red bands.
const (
	badgeGreen = "rgb(26, 127, 55)"
	badgeAmber = "rgb(212, 167, 44)"
	badgeRed   = "rgb(207, 34, 46)"
)

// TestFleetOverviewInABrowser drives the manager's fleet overview in Debian's chromium: the
// manager runs it secure (HTTPS, TokenReview + SubjectAccessReview on the backend), with
// HostClusters in two workspaces whose targets score 85, 70 and 40 and one that cannot be
// reached. It signs in with a token of a ServiceAccount bound to kubeopera-fleet-viewer and
// checks the badges' colours, sorting, filtering, the live update and the health breakdown; the
// screenshots are kept in the artefacts directory (browser.ArtifactsDir).
func TestFleetOverviewInABrowser(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	targets := e.fleetTargetsFor(t)
	ctx := context.Background()

	a, lcA, _ := e.tenantWorkspace(t, "fleet-a")
	b, lcB, _ := e.tenantWorkspace(t, "fleet-b")
	// A cluster that goes Ready (the suite's target, with Flux, through a forwarder the test
	// cuts later as an outage would), in a workspace of its own so the other checks' rows stay
	// as they are.
	c, lcC, _ := e.tenantWorkspace(t, "fleet-c")
	outageTarget := e.hostTarget(t)
	outageLink := framework.Forward(t, "127.0.0.1", outageTarget.Cluster.Config.Host)
	e.connect(t, c, e.seedHostCluster(t, "outage", "fleet-outage", clusterPath, false),
		framework.KubeconfigWithServer(t, outageTarget.Kubeconfig, "https://"+outageLink.Addr, "127.0.0.1"))
	outageKey := lcC + "/" + hcNamespace + "/outage"
	e.connectFleetCluster(t, a, "edge-eu", "edge-eu", targets[85].kubeconfig)
	e.connectFleetCluster(t, a, "batch-us", "batch-us", targets[40].kubeconfig)
	e.connectFleetCluster(t, b, "core-de", "core-de", targets[70].kubeconfig)
	e.connectFleetCluster(t, b, "lab", "lab", unreachableKubeconfig(t))
	key := func(lc, name string) string { return lc + "/" + hcNamespace + "/" + name }
	ours := map[string]int32{ // by key: the health score, -1 none
		key(lcA, "edge-eu"): 85, key(lcA, "batch-us"): 40, key(lcB, "core-de"): 70, key(lcB, "lab"): -1,
	}
	waitInventory(t, a, "edge-eu")
	waitInventory(t, a, "batch-us")
	waitInventory(t, b, "core-de")

	// The platform admin registers the backend as the host, with the manager's own identities.
	reg := exec.Command(e.managerBin, "register-host",
		"--kcp-kubeconfig", e.kcp.KubeconfigPath, "--kcp-context", "user",
		"--backend-kubeconfig", e.backendID.KubeconfigPath)
	if out, err := reg.CombinedOutput(); err != nil || !strings.Contains(string(out), "the host") {
		t.Fatalf("manager register-host: %v\n%s", err, out)
	}
	hostKey := bootstrap.PlatformWorkspace + "/_/host"

	base := "https://" + e.overviewAddr
	viewer, err := devenv.FleetViewerToken(ctx, e.backend.Config, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, stranger := e.metricsTokens(t)

	t.Run("the JSON endpoint needs a token with the viewer role", func(t *testing.T) {
		if code, _ := metricsGet(t, base+"/v1/fleet", ""); code != http.StatusUnauthorized {
			t.Errorf("without a token: %d, want 401", code)
		}
		if code, _ := metricsGet(t, base+"/v1/fleet", stranger); code != http.StatusForbidden {
			t.Errorf("with a token of a ServiceAccount not bound to kubeopera-fleet-viewer: %d, want 403", code)
		}
		var fleet struct {
			Clusters []overview.Cluster `json:"clusters"`
		}
		framework.Eventually(t, time.Minute, "the fleet JSON lists the test's clusters with their scores", func() (bool, string) {
			code, body := metricsGet(t, base+"/v1/fleet", viewer)
			if code != http.StatusOK {
				return false, fmt.Sprintf("%d %s", code, body)
			}
			if err := json.Unmarshal([]byte(body), &fleet); err != nil {
				return false, err.Error()
			}
			seen := 0
			for _, c := range fleet.Clusters {
				want, ok := ours[c.Workspace+"/"+c.Namespace+"/"+c.Name]
				if !ok {
					continue
				}
				if (want < 0) != (c.Health == nil) || (c.Health != nil && c.Health.Score != want) {
					return false, fmt.Sprintf("%s/%s: health %+v, want %d", c.Workspace, c.Name, c.Health, want)
				}
				seen++
			}
			return seen == len(ours), fmt.Sprintf("%d of %d clusters", seen, len(ours))
		})
		for _, c := range fleet.Clusters {
			if c.Workspace == lcA && c.Name == "edge-eu" {
				if c.CPUPercent == nil || *c.CPUPercent != targets[85].cpuPercent || c.NodesReady != 1 || c.NodesTotal != 4 {
					t.Errorf("edge-eu: cpu %v nodes %d/%d, want %d%% and 1/4", c.CPUPercent, c.NodesReady, c.NodesTotal, targets[85].cpuPercent)
				}
				// No metrics API on the fleet targets: requests over allocatable.
				if c.UsageSource != "Requests" {
					t.Errorf("edge-eu: usageSource %q, want Requests", c.UsageSource)
				}
			}
		}
		// The monthly cost where the data exists: 4 m5.large at 0.096/h × 730 h; core-de's six
		// t3.medium at 0.0416/h, its x9.exotic left out; batch-us's c5.xlarge are not in the
		// price table: no estimate.
		wantCost := map[string]*overview.Cost{
			key(lcA, "edge-eu"):  {Monthly: "280.32", Currency: "USD", PricedNodes: 4},
			key(lcB, "core-de"):  {Monthly: "182.21", Currency: "USD", PricedNodes: 6, UnpricedNodes: 1, UnpricedInstanceTypes: []string{"x9.exotic"}, Partial: true},
			key(lcA, "batch-us"): nil,
		}
		for _, c := range fleet.Clusters {
			want, ok := wantCost[c.Workspace+"/"+c.Namespace+"/"+c.Name]
			if !ok {
				continue
			}
			if diff := cmp.Diff(want, c.Cost); diff != "" {
				t.Errorf("%s/%s cost (-want +got):\n%s", c.Workspace, c.Name, diff)
			}
		}
	})

	tab := browser.Start(t)
	step := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := browser.Do(tab, time.Minute, steps...); err != nil {
			browser.Screenshot(t, tab, "fleet-overview-failed")
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := browser.Run(tab, 20*time.Second, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	// until polls the page until cond (a JavaScript boolean expression) holds.
	until := func(what, cond string) {
		t.Helper()
		framework.Eventually(t, time.Minute, what, func() (bool, string) {
			ok, err := browser.Run(tab, 10*time.Second, chromedp.Evaluate[bool](cond))
			return err == nil && ok, fmt.Sprint(err)
		})
	}
	// visibleOurs returns the keys of the test's rows in the table's order.
	visibleOurs := func() []string {
		t.Helper()
		raw := eval(`JSON.stringify([...document.querySelectorAll('#clusters tbody tr[data-key]')].filter(r => r.offsetParent !== null).map(r => r.dataset.key))`)
		var keys []string
		if err := json.Unmarshal([]byte(raw), &keys); err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(keys, func(k string) bool { _, ok := ours[k]; return !ok })
	}
	row := func(k string) string { return fmt.Sprintf(`document.querySelector('#clusters tr[data-key=%q]')`, k) }

	t.Run("signing in", func(t *testing.T) {
		step("open the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`form [name="token"]`)))
		if loc := eval(`location.pathname`); loc != "/login" {
			t.Errorf("without a token the overview sent the browser to %q, want /login", loc)
		}
		browser.Screenshot(t, tab, "fleet-overview-login")
		step("sign in with a token not allowed to view the fleet",
			chromedp.SetValue(chromedp.CSS(`form [name="token"]`), stranger),
			chromedp.Submit(chromedp.CSS(`form [name="token"]`)),
			chromedp.WaitVisible(chromedp.CSS(`form [name="token"]`)))
		if txt := eval(`document.body.innerText`); !strings.Contains(txt, "may not view") {
			t.Errorf("a token without the role: the page says %q, want that it may not view the overview", txt)
		}
		step("sign in as a fleet viewer",
			chromedp.SetValue(chromedp.CSS(`form [name="token"]`), viewer),
			chromedp.Submit(chromedp.CSS(`form [name="token"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#clusters`)))
	})
	if t.Failed() {
		return
	}

	until("every test cluster in the table", fmt.Sprintf(`[%s].every(k => document.querySelector('#clusters tr[data-key="'+k+'"]'))`, quoteJS(keysOf(ours))))

	t.Run("the platform's own cluster", func(t *testing.T) {
		until("the registered host in the table", fmt.Sprintf(`!!document.querySelector('#clusters tr[data-key=%q]')`, hostKey))
		if got := eval(row(hostKey) + `.innerText`); !strings.Contains(got, "Registered") || !strings.Contains(got, "platform") {
			t.Errorf("the host's row says %q, want its phase Registered and the platform chip", got)
		}
		if got := eval(`String(!!document.getElementById('get-started'))`); got != "false" {
			t.Errorf("the Get started panel is still shown with a host registered")
		}
	})

	t.Run("badges in the seed's bands", func(t *testing.T) {
		for k, want := range map[string]struct{ text, colour string }{
			key(lcA, "edge-eu"):  {"85", badgeGreen},
			key(lcB, "core-de"):  {"70", badgeAmber},
			key(lcA, "batch-us"): {"40", badgeRed},
		} {
			badge := row(k) + `.querySelector('.badge')`
			if got := eval(`getComputedStyle(` + badge + `).backgroundColor`); got != want.colour {
				t.Errorf("%s: badge colour %s, want %s", k, got, want.colour)
			}
			if got := eval(badge + `.textContent.trim()`); !strings.HasPrefix(got, want.text) {
				t.Errorf("%s: badge %q, want %s", k, got, want.text)
			}
		}
	})
	t.Run("the treemap", func(t *testing.T) {
		// ECharts' own instance: one tile per cluster, sized by CPU percent, coloured by band.
		tiles := `(window.echarts && echarts.getInstanceByDom(document.getElementById('treemap'))?.getOption().series[0].data) || []`
		until("the treemap has the test's tiles", fmt.Sprintf(`[%s].every(k => (%s).some(d => d.id === k))`, quoteJS(keysOf(ours)), tiles))
		raw := eval(fmt.Sprintf(`JSON.stringify(Object.fromEntries((%s).map(d => [d.id, [d.value, d.itemStyle.color]])))`, tiles))
		var got map[string][2]any
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string][2]any{
			key(lcA, "edge-eu"):  {float64(50), "#1a7f37"},
			key(lcB, "core-de"):  {float64(25), "#d4a72c"},
			key(lcA, "batch-us"): {float64(75), "#cf222e"},
		} {
			if g := got[k]; g[0] != want[0] || !strings.EqualFold(fmt.Sprint(g[1]), fmt.Sprint(want[1])) {
				t.Errorf("treemap tile %s = size %v colour %v, want %v %v", k, g[0], g[1], want[0], want[1])
			}
		}
		time.Sleep(time.Second) // the tiles' entry animation
	})
	browser.Screenshot(t, tab, "fleet-overview")

	t.Run("sorting by health", func(t *testing.T) {
		ascending := []string{key(lcA, "batch-us"), key(lcB, "core-de"), key(lcA, "edge-eu"), key(lcB, "lab")}
		step("sort by health", chromedp.Click(chromedp.CSS(`th[data-sort="health"] a`)))
		framework.Eventually(t, 30*time.Second, "rows by health, ascending, unknown last", func() (bool, string) {
			got := visibleOurs()
			return slices.Equal(got, ascending), fmt.Sprint(got)
		})
		step("sort by health again", chromedp.Click(chromedp.CSS(`th[data-sort="health"] a`)))
		descending := []string{key(lcA, "edge-eu"), key(lcB, "core-de"), key(lcA, "batch-us"), key(lcB, "lab")}
		framework.Eventually(t, 30*time.Second, "rows by health, descending, unknown last", func() (bool, string) {
			got := visibleOurs()
			return slices.Equal(got, descending), fmt.Sprint(got)
		})
		step("sort by name", chromedp.Click(chromedp.CSS(`th[data-sort="name"] a`)))
		byName := []string{key(lcA, "batch-us"), key(lcB, "core-de"), key(lcA, "edge-eu"), key(lcB, "lab")}
		framework.Eventually(t, 30*time.Second, "rows by name", func() (bool, string) {
			got := visibleOurs()
			return slices.Equal(got, byName), fmt.Sprint(got)
		})
	})

	t.Run("filtering", func(t *testing.T) {
		step("filter by workspace B", chromedp.SendKeys(chromedp.CSS(`#filter`), lcB))
		framework.Eventually(t, 30*time.Second, "only workspace B's rows", func() (bool, string) {
			all := eval(`JSON.stringify([...document.querySelectorAll('#clusters tbody tr[data-key]')].filter(r => r.offsetParent !== null).map(r => r.dataset.key))`)
			var keys []string
			_ = json.Unmarshal([]byte(all), &keys)
			for _, k := range keys {
				if !strings.HasPrefix(k, lcB+"/") {
					return false, all
				}
			}
			return len(keys) == 2, all
		})
		browser.Screenshot(t, tab, "fleet-overview-filtered")
		// Clear the filter and pick the red band, as a user does: the value, then the event.
		eval(`(() => { const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input', {bubbles: true}));
			const b = document.getElementById('band'); b.value = 'red'; b.dispatchEvent(new Event('change', {bubbles: true})); return '' })()`)
		framework.Eventually(t, 30*time.Second, "only red rows, batch-us among them", func() (bool, string) {
			got := visibleOurs()
			bands := eval(`JSON.stringify([...document.querySelectorAll('#clusters tbody tr[data-key]')].filter(r => r.offsetParent !== null).map(r => r.querySelector('.badge').dataset.band))`)
			return slices.Equal(got, []string{key(lcA, "batch-us")}) && !strings.Contains(bands, "green") && !strings.Contains(bands, "amber"), fmt.Sprint(got, bands)
		})
		eval(`(() => { const b = document.getElementById('band'); b.value = ''; b.dispatchEvent(new Event('change', {bubbles: true})); return '' })()`)
		until("all rows back", fmt.Sprintf(`[%s].every(k => document.querySelector('#clusters tr[data-key="'+k+'"]'))`, quoteJS(keysOf(ours))))
	})

	t.Run("live update without a reload", func(t *testing.T) {
		eval(`window.__sameDocument = 'yes'`)
		e.connectFleetCluster(t, a, "late-joiner", "late-joiner", unreachableKubeconfig(t))
		until("the new HostCluster appears", fmt.Sprintf(`!!document.querySelector('#clusters tr[data-key=%q]')`, key(lcA, "late-joiner")))
		if got := eval(`window.__sameDocument || 'reloaded'`); got != "yes" {
			t.Errorf("the page was reloaded to show the new cluster")
		}
		until("the new HostCluster in the treemap", fmt.Sprintf(`(echarts.getInstanceByDom(document.getElementById('treemap')).getOption().series[0].data).some(d => d.id === %q)`, key(lcA, "late-joiner")))
	})

	t.Run("the health breakdown of a cluster", func(t *testing.T) {
		step("open batch-us", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#clusters tr[data-key=%q] a`, key(lcA, "batch-us")))),
			chromedp.WaitVisible(chromedp.CSS(`body`)))
		until("on the breakdown page", `location.pathname.startsWith('/clusters/')`)
		txt := eval(`document.body.innerText`)
		if n := strings.Count(txt, "NodeNotReady"); n != 12 {
			t.Errorf("the breakdown shows %d NodeNotReady penalties, want 12:\n%s", n, txt)
		}
		for _, want := range []string{"n40-12 is not Ready", "40", "batch-us", lcA} {
			if !strings.Contains(txt, want) {
				t.Errorf("the breakdown does not show %q:\n%s", want, txt)
			}
		}
		browser.Screenshot(t, tab, "fleet-overview-breakdown")
	})

	t.Run("the cost column", func(t *testing.T) {
		step("back to the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#clusters`)))
		until("edge-eu's cost shown", fmt.Sprintf(`!!%s`, row(key(lcA, "edge-eu"))))
		for k, want := range map[string]string{
			key(lcA, "edge-eu"):  "280.32 USD",
			key(lcB, "core-de"):  "182.21 USD (partial)",
			key(lcA, "batch-us"): "—",
		} {
			if got := eval(row(k) + `.querySelector('td.cost').innerText.trim()`); got != want {
				t.Errorf("%s: cost cell %q, want %q", k, got, want)
			}
		}
	})

	t.Run("an unreachable cluster is shown Unreachable and not counted healthy", func(t *testing.T) {
		// First Ready and green, so counted healthy.
		waitHostClusterPhase(t, c, "outage", kov1alpha1.HostClusterPhaseReady, 6*time.Minute)
		fleetRow := func() (overview.Cluster, bool) {
			code, body := metricsGet(t, base+"/v1/fleet?q=fleet-outage", viewer)
			var fleet overview.FleetResponse
			if code != http.StatusOK || json.Unmarshal([]byte(body), &fleet) != nil {
				return overview.Cluster{}, false
			}
			for _, c := range fleet.Clusters {
				if c.Workspace == lcC && c.Name == "outage" {
					return c, true
				}
			}
			return overview.Cluster{}, false
		}
		framework.Eventually(t, time.Minute, "outage Ready and green in the JSON", func() (bool, string) {
			c, ok := fleetRow()
			return ok && c.Ready && !c.Unreachable && c.Health != nil && overview.BandOf(&c) == overview.BandGreen, fmt.Sprintf("%+v", c)
		})
		until("outage's row green", fmt.Sprintf(`!!%s && %s.querySelector('.badge').dataset.band === 'green' && !%s.querySelector('[data-unreachable]')`, row(outageKey), row(outageKey), row(outageKey)))

		// The outage: the platform cannot reach the target any more.
		cut := time.Now()
		outageLink.Cut()
		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 2*time.Minute, "outage Ready False, reason Unreachable", func() (bool, string) {
			hc = getHostCluster(t, c, "outage")
			cond := meta.FindStatusCondition(hc.Status.Conditions, kov1alpha1.ReadyCondition)
			return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == kov1alpha1.UnreachableReason, describeHC(hc)
		})
		if msg := meta.FindStatusCondition(hc.Status.Conditions, kov1alpha1.ReadyCondition).Message; !strings.Contains(msg, "unreachable since ") || !strings.Contains(msg, "(connection refused)") {
			t.Errorf("Ready's message %q does not say since when and the kind of failure", msg)
		}
		if hc.Status.Phase != kov1alpha1.HostClusterPhaseReady || hc.Status.Inventory.HealthScore != nil || hc.Status.Inventory.HealthBand != "unknown" {
			t.Errorf("while unreachable: phase %s score %v band %q; want the phase kept, no score, band unknown", hc.Status.Phase, hc.Status.Inventory.HealthScore, hc.Status.Inventory.HealthBand)
		}

		until("outage's row says Unreachable, health unknown", fmt.Sprintf(`(() => { const r = %s; const chip = r && r.querySelector('[data-unreachable]');
			return !!chip && chip.textContent.trim() === 'Unreachable' && r.querySelector('.badge').dataset.band === 'unknown' })()`, row(outageKey)))
		browser.Screenshot(t, tab, "fleet-overview-unreachable")
		if got := eval(row(outageKey) + `.querySelector('.phase').textContent.trim()`); got != "Ready" {
			t.Errorf("outage's phase cell %q, want Ready (the phase is kept; the chip says Unreachable)", got)
		}
		if got := eval(`getComputedStyle(` + row(outageKey) + `.querySelector('.badge')).backgroundColor`); got != "rgb(110, 119, 129)" {
			t.Errorf("outage's badge colour %s, want the unknown band's grey", got)
		}
		if got := eval(`document.querySelector('[data-card="unreachable"] .card-value').textContent.trim()`); got == "0" || got == "" {
			t.Errorf("the Unreachable card says %q, want at least this cluster", got)
		}
		cl, ok := fleetRow()
		if !ok || !cl.Unreachable || cl.Ready || cl.Health != nil || cl.UnreachableSince == nil || cl.UnreachableSince.Before(cut.Add(-time.Second)) {
			t.Errorf("outage in the JSON: %+v; want unreachable since the cut, not Ready, no health (so not counted healthy)", cl)
		}

		// Back: Ready again, read again.
		outageLink.Restore(t)
		framework.Eventually(t, 2*time.Minute, "outage Ready again", func() (bool, string) {
			hc = getHostCluster(t, c, "outage")
			return meta.IsStatusConditionTrue(hc.Status.Conditions, kov1alpha1.ReadyCondition) && hc.Status.Inventory.HealthScore != nil, describeHC(hc)
		})
		until("outage's row green again", fmt.Sprintf(`%s.querySelector('.badge').dataset.band === 'green' && !%s.querySelector('[data-unreachable]')`, row(outageKey), row(outageKey)))
	})

	t.Run("fleet metrics have no per-cluster labels", func(t *testing.T) {
		reader, _ := e.metricsTokens(t)
		metrics, _ := e.addrs()
		code, body := metricsGet(t, "https://"+metrics+"/metrics", reader)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d", code)
		}
		var fleetLines []string
		for l := range strings.SplitSeq(body, "\n") {
			if strings.HasPrefix(l, "kubeopera_fleet_") {
				fleetLines = append(fleetLines, l)
			}
		}
		joined := strings.Join(fleetLines, "\n")
		for _, want := range []string{`kubeopera_fleet_clusters{phase="BootstrappingFlux"}`, `kubeopera_fleet_clusters_by_health{band="red"}`, `kubeopera_fleet_clusters_by_health{band="amber"}`, `kubeopera_fleet_clusters_unreachable `} {
			if !strings.Contains(joined, want) {
				t.Errorf("metrics lack %s:\n%s", want, joined)
			}
		}
		for _, leak := range []string{lcA, lcB, "edge-eu", "batch-us", "cluster=", "workspace="} {
			if strings.Contains(joined, leak) {
				t.Errorf("fleet metrics carry %q:\n%s", leak, joined)
			}
		}
	})
}

func keysOf(m map[string]int32) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// quoteJS returns the strings as a JavaScript array's elements.
func quoteJS(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		b, _ := json.Marshal(s)
		q[i] = string(b)
	}
	return strings.Join(q, ",")
}
