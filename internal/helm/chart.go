package helm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
)

// IsLocalChart reports whether ref names a chart directory or packaged chart
// (.tgz) on the local file system, i.e. whether it has no URL scheme such as
// oci:// or https://.
func IsLocalChart(ref string) bool {
	return !strings.Contains(ref, "://")
}

// Reachable reports whether the chart of opts can be located and loaded: a
// remote chart is pulled into opts.CacheDir, a local one is read from disk. A
// dev launcher uses it to decide whether to fall back to a local chart.
func Reachable(ctx context.Context, opts Options) error {
	_, err := loadChartArchive(ctx, opts.withDefaults())
	return err
}

// loadChartArchive locates and loads the chart of opts and returns it as a
// packaged (.tgz) chart. It returns early when ctx is done; a pull in flight
// then completes in the background.
func loadChartArchive(ctx context.Context, opts Options) ([]byte, error) {
	type result struct {
		archive []byte
		err     error
	}
	done := make(chan result, 1)
	go func() {
		archive, err := packageChart(opts)
		done <- result{archive, err}
	}()
	select {
	case r := <-done:
		return r.archive, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("failed to load chart %s: %w", opts.ChartRef, ctx.Err())
	}
}

// packageChart loads the chart of opts and packages it, so that a fresh
// *chart.Chart can be loaded from memory for every operation: Helm mutates a
// chart while processing its dependencies, so charts are never shared.
func packageChart(opts Options) ([]byte, error) {
	path := opts.ChartRef
	if !IsLocalChart(path) {
		var err error
		if path, err = pullChart(opts); err != nil {
			return nil, fmt.Errorf("failed to pull chart %s version %q: %w", opts.ChartRef, opts.ChartVersion, err)
		}
	}
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("failed to load chart %s: %w", opts.ChartRef, err)
	}
	tmp, err := os.MkdirTemp("", "helm-chart-")
	if err != nil {
		return nil, fmt.Errorf("failed to package chart %s: %w", opts.ChartRef, err)
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // best-effort cleanup of a temp dir
	file, err := chartutil.Save(ch, tmp)
	if err != nil {
		return nil, fmt.Errorf("failed to package chart %s: %w", opts.ChartRef, err)
	}
	return os.ReadFile(file)
}

// pullChart downloads a remote chart into the repository cache of
// opts.CacheDir and returns the path of the downloaded archive.
func pullChart(opts Options) (string, error) {
	settings := cli.New()
	settings.RepositoryCache = filepath.Join(opts.CacheDir, "repository")

	locator := action.NewInstall(&action.Configuration{})
	locator.Version = opts.ChartVersion
	if registry.IsOCI(opts.ChartRef) {
		rc, err := registry.NewClient(
			registry.ClientOptEnableCache(true),
			registry.ClientOptCredentialsFile(settings.RegistryConfig),
		)
		if err != nil {
			return "", fmt.Errorf("failed to create registry client: %w", err)
		}
		locator.SetRegistryClient(rc)
	}
	return locator.LocateChart(opts.ChartRef, settings)
}
