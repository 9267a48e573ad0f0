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
		for _, want := range []string{`kubeopera_fleet_clusters{phase="BootstrappingFlux"}`, `kubeopera_fleet_clusters_by_health{band="red"}`, `kubeopera_fleet_clusters_by_health{band="amber"}`} {
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
