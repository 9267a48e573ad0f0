package helm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/reconcile"

	"github.com/kubeopera/kubeopera/test/sim"

	"github.com/kubeopera/kubeopera/test/framework"
)

// TestRemoteChartErrors: the chart server's answers end to end through
// InstallOrUpgrade: 503 and a hanging server are transient, 404 is terminal,
// and a caller's deadline ends its wait with a transient error.
func TestRemoteChartErrors(t *testing.T) {
	_, ns := setup(t)

	for name, tc := range map[string]struct {
		status   int
		timeout  time.Duration
		terminal bool
		want     string
	}{
		"unavailable": {status: http.StatusServiceUnavailable, timeout: 30 * time.Second, want: "503 Service Unavailable"},
		"not found":   {status: http.StatusNotFound, timeout: 30 * time.Second, terminal: true, want: "404 Not Found"},
		"hangs":       {status: 0, timeout: 300 * time.Millisecond, want: context.DeadlineExceeded.Error()},
	} {
		t.Run(name, func(t *testing.T) {
			srv := sim.NewChartServer(t, chartDir, tc.status)
			c, err := New(restConfig, Options{ChartRef: srv.ChartURL(), CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			start := time.Now()
			_, err = c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: "remote"}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), srv.URL) {
				t.Fatalf("InstallOrUpgrade = %v, want an error naming the chart and %q", err, tc.want)
			}
			if reconcile.IsTerminal(err) != tc.terminal {
				t.Errorf("reconcile.IsTerminal(%v) = %v, want %v", err, reconcile.IsTerminal(err), tc.terminal)
			}
			if d := time.Since(start); d > tc.timeout+5*time.Second {
				t.Errorf("returned after %v, want within the caller's timeout %v", d, tc.timeout)
			}
			t.Logf("%s: %v", name, err)
		})
	}

	// A caller whose context is over gets a transient error before anything is done.
	c, err := New(restConfig, Options{ChartRef: chartDir, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	_, err = c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: "late"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || reconcile.IsTerminal(err) {
		t.Errorf("InstallOrUpgrade(expired context) = %v, want a transient deadline error", err)
	}
	if _, err := c.Observe(ctx, Release{Namespace: ns, Name: "late"}, nil); !errors.Is(err, context.DeadlineExceeded) || reconcile.IsTerminal(err) {
		t.Errorf("Observe(expired context) = %v, want a transient deadline error", err)
	}
	if obs, err := c.Observe(context.Background(), Release{Namespace: ns, Name: "late"}, nil); err != nil || obs.Exists {
		t.Errorf("Observe = %+v, %v; want no release", obs, err)
	}
}

// TestChartPullsDoNotPileUp: callers of one chart share one pull; when they
// all give up the pull is cancelled at the server; the next call after the
// server recovered succeeds.
func TestChartPullsDoNotPileUp(t *testing.T) {
	_, ns := setup(t)
	srv := sim.NewChartServer(t, chartDir, 0)
	c, err := New(restConfig, Options{ChartRef: srv.ChartURL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}

	const callers, timeout = 8, 500 * time.Millisecond
	var wg sync.WaitGroup
	errs := make([]error, callers)
	took := make([]time.Duration, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			_, errs[i] = c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: "pile"}, nil)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || reconcile.IsTerminal(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("caller %d: %v, want a transient deadline error", i, err)
		}
		if took[i] > timeout+2*time.Second {
			t.Errorf("caller %d returned after %v, want about %v", i, took[i], timeout)
		}
	}
	if n := srv.MaxIn.Load(); n != 1 {
		t.Errorf("requests in flight at once at the server = %d, want 1", n)
	}
	// Nobody waits any more: the pull is cancelled, the server sees the request end.
	framework.Eventually(t, 10*time.Second, "the abandoned pull to end at the server", func() (bool, string) {
		atServer, pulling := srv.InFlight.Load(), pulls.inFlight()
		return atServer == 0 && pulling == 0, fmt.Sprintf("%d requests in flight at the server, %d pulls in flight", atServer, pulling)
	})
	t.Logf("%d callers, %d requests", callers, srv.Requests.Load())

	srv.Status.Store(http.StatusOK)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: "pile"}, nil)
	if err != nil || obs.State != StateDeployed {
		t.Fatalf("InstallOrUpgrade after the server recovered = %+v, %v; want deployed", obs, err)
	}
	if n := srv.MaxIn.Load(); n != 1 {
		t.Errorf("requests in flight at once at the server = %d, want 1", n)
	}
}

// TestPuller: loads of one key are shared, loads of distinct keys are bounded,
// a load is cancelled once nobody waits for it, and a new load of a key waits
// until a cancelled one returned.
func TestPuller(t *testing.T) {
	p := newPuller(2)
	var running, most, calls atomic.Int32
	release := make(chan struct{})
	load := func(ctx context.Context) ([]byte, error) {
		calls.Add(1)
		n := running.Add(1)
		defer running.Add(-1)
		for {
			if m := most.Load(); n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-release:
			return []byte("chart"), nil
		case <-ctx.Done():
			time.Sleep(20 * time.Millisecond) // a pull takes a moment to stop
			return nil, ctx.Err()
		}
	}

	var wg sync.WaitGroup
	results := make([]error, 12)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = p.do(context.Background(), fmt.Sprintf("key-%d", i%4), load)
		}()
	}
	framework.Eventually(t, 10*time.Second, "two loads running at once", func() (bool, string) {
		n := running.Load()
		return n == 2, fmt.Sprintf("%d loads running", n)
	})
	close(release)
	wg.Wait()
	for i, err := range results {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if m, n := most.Load(), calls.Load(); m != 2 || n < 4 || n > 12 {
		t.Errorf("loads: %d at most at once, %d in all; want 2 at once, at least one per key", m, n)
	}

	// Abandoned: both callers give up, the load is cancelled, a new caller
	// starts a new load only after it stopped.
	calls.Store(0)
	hang := func(ctx context.Context) ([]byte, error) {
		calls.Add(1)
		if running.Add(1) != 1 {
			t.Error("two loads of one key at once")
		}
		defer running.Add(-1)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // stopping takes a while: a new load started meanwhile would show
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.do(ctx, "hang", hang); !errors.Is(err, context.Canceled) {
				t.Errorf("abandoned caller: %v", err)
			}
		}()
	}
	framework.Eventually(t, 10*time.Second, "the abandoned callers' load to start", func() (bool, string) {
		n := calls.Load()
		return n == 1, fmt.Sprintf("%d loads started", n)
	})
	cancel()
	wg.Wait()
	ok := func(context.Context) ([]byte, error) {
		if running.Load() != 0 {
			t.Error("a new load started before the cancelled one returned")
		}
		return []byte("chart"), nil
	}
	if got, err := p.do(context.Background(), "hang", ok); err != nil || string(got) != "chart" {
		t.Errorf("load after abandon = %q, %v", got, err)
	}
	if n := p.inFlight(); n != 0 {
		t.Errorf("flights at the end = %d, want 0", n)
	}
}

// TestNoWritesOutsideCacheDir: an install from a local chart directory and
// one from a chart pulled over HTTP write nothing under $HOME, $TMPDIR or the
// XDG and Helm directories, only under Options.CacheDir. Tests run as root,
// for whom a read-only directory is writable, so the test also watches the
// directory with inotify (entries created and removed again count) and walks
// it afterwards.
func TestNoWritesOutsideCacheDir(t *testing.T) {
	_, ns := setup(t)
	srv := sim.NewChartServer(t, chartDir, http.StatusOK)
	localCache, remoteCache := t.TempDir(), t.TempDir()

	readOnly := t.TempDir()
	env := map[string]string{
		"HOME": "home", "TMPDIR": "tmp",
		"XDG_CONFIG_HOME": "config", "XDG_CACHE_HOME": "cache", "XDG_DATA_HOME": "data",
		"XDG_STATE_HOME": "state", "XDG_RUNTIME_DIR": "runtime",
		"HELM_CONFIG_HOME": "helm-config", "HELM_CACHE_HOME": "helm-cache", "HELM_DATA_HOME": "helm-data",
		"HELM_REGISTRY_CONFIG": "helm-config/registry/config.json", "HELM_REPOSITORY_CONFIG": "helm-config/repositories.yaml",
		"HELM_REPOSITORY_CACHE": "helm-cache/repository", "DOCKER_CONFIG": "docker",
	}
	var dirs []string
	for _, sub := range env {
		if !strings.Contains(sub, "/") { // the others are files or directories under these
			dirs = append(dirs, filepath.Join(readOnly, sub))
		}
	}
	for _, dir := range dirs {
		if err := os.Mkdir(dir, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the test, before t.TempDir removes it
		_ = os.Chmod(readOnly, 0o755)
		for _, dir := range dirs {
			_ = os.Chmod(dir, 0o755)
		}
	})
	for k, sub := range env {
		t.Setenv(k, filepath.Join(readOnly, sub))
	}
	if os.TempDir() != filepath.Join(readOnly, "tmp") {
		t.Fatalf("os.TempDir() = %s, want it under the read-only directory", os.TempDir())
	}

	created := watchCreations(t, append(dirs, readOnly))

	ctx := context.Background()
	for ref, cache := range map[string]string{chartDir: localCache, srv.ChartURL(): remoteCache} {
		c, err := New(restConfig, Options{ChartRef: ref, CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		name := "local"
		if !IsLocalChart(ref) {
			name = "remote"
		}
		if obs, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, nil); err != nil || obs.State != StateDeployed {
			t.Fatalf("InstallOrUpgrade(%s) = %+v, %v", ref, obs, err)
		}
		if obs, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, map[string]any{"controlPlane": map[string]any{"statefulSet": map[string]any{"annotations": map[string]any{"revision": "2"}}}}); err != nil || obs.Revision != 2 {
			t.Fatalf("upgrade (%s) = %+v, %v", ref, obs, err)
		}
		if err := c.Uninstall(ctx, Release{Namespace: ns, Name: name}); err != nil {
			t.Fatalf("Uninstall(%s): %v", ref, err)
		}
	}
	if srv.Requests.Load() == 0 {
		t.Fatal("the remote chart was never pulled")
	}

	for _, path := range created() {
		t.Errorf("created outside the cache directory: %s", path)
	}
	known := map[string]bool{readOnly: true}
	for _, dir := range dirs {
		known[dir] = true
	}
	err := filepath.WalkDir(readOnly, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !known[path] {
			t.Errorf("written outside the cache directory: %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(remoteCache, repositoryCacheDir, srv.File)); err != nil {
		t.Errorf("the pulled chart is not in the cache directory: %v", err)
	}
	if entries, err := os.ReadDir(filepath.Join(localCache, scratchDir)); err != nil || len(entries) != 0 {
		t.Errorf("scratch directory of the local chart: %v, %v; want it used and left empty", entries, err)
	}
}
