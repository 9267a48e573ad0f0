// Package browser drives Debian's chromium with chromedp for the browser tests. Chromium is not
// on a fresh machine: `make test` installs the Debian package before the tests run
// (hack/ensure-chromium.sh, target `make chromium`); a test never installs it.
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kubeopera/kubeopera/test/framework"
)

// Chromium returns the path of the chromium on PATH, and fails t when there is none, naming the
// make target that installs it.
func Chromium(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium on PATH for the browser tests (%v): `make test` installs Debian's chromium before the tests; alone, run `make chromium` (hack/ensure-chromium.sh)", err)
	}
	return p
}

// Start starts a headless chromium for t and returns a chromedp context of its first tab; it is
// closed when t ends. Self-signed certificates are accepted (the manager's secure endpoints make
// their own). Chromium's own background connections are turned off: the test machine has no
// network beyond its package registries.
func Start(t testing.TB) context.Context {
	t.Helper()
	framework.SkipWithoutServers(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
		chromedp.IgnoreCertErrors,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("failed to start chromium: %v", err)
	}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// Do runs steps in the tab of ctx, in order, with a timeout.
func Do(ctx context.Context, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// Run runs one action in the tab of ctx with a timeout and returns its value.
func Run[T any](ctx context.Context, timeout time.Duration, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// ArtifactsDir is where browser tests keep their screenshots: $KUBEOPERA_TEST_ARTIFACTS, else
// _artifacts in the repository (ignored by git).
func ArtifactsDir() string {
	if d := os.Getenv("KUBEOPERA_TEST_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(framework.RepoRoot(), "_artifacts")
}

// Screenshot saves a full-page PNG of the tab of ctx as <ArtifactsDir>/<name>.png and returns its
// path.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png, err := Run(ctx, 30*time.Second, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	dir := ArtifactsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	t.Logf("screenshot: %s", path)
	return path
}
