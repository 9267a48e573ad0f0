package sim

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// ChartRepo is a Helm chart repository on 127.0.0.1, as Helm's docs describe one ("The chart
// repository structure": an index.yaml at the repository's URL and the packaged charts it lists)
// and as a Flux HelmRepository of type default reads it: source-controller fetches
// <url>/index.yaml, then the entry's urls[0] (resolved against the repository URL). The index
// and the packages are made with Helm's own code: each chart directory is packaged as `helm
// package` does (chartutil.Save: <name>-<version>.tgz) and indexed as `helm repo index` does
// (repo.IndexDirectory: name, version, digest, urls, created). Nothing else is served.
type ChartRepo struct {
	// URL is the repository's URL (http://127.0.0.1:<port>), what a HelmRepository's spec.url
	// and `helm repo add` take.
	URL string
	// Dir holds index.yaml and the packaged charts.
	Dir string

	srv *http.Server
	ln  net.Listener
}

// StartChartRepo packages the charts in chartDirs (each a chart directory with Chart.yaml),
// indexes them in dir and serves them on a free port of 127.0.0.1 until Close. dir is created
// when missing.
func StartChartRepo(dir string, chartDirs ...string) (*ChartRepo, error) {
	if len(chartDirs) == 0 {
		return nil, errors.New("a chart repository needs at least one chart")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, d := range chartDirs {
		ch, err := loader.Load(d)
		if err != nil {
			return nil, fmt.Errorf("failed to load chart %s: %w", d, err)
		}
		if _, err := chartutil.Save(ch, dir); err != nil {
			return nil, fmt.Errorf("failed to package chart %s: %w", d, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	// The entries' urls are relative (<name>-<version>.tgz), as `helm repo index` without --url
	// writes them; clients resolve them against the repository's URL.
	idx, err := repo.IndexDirectory(dir, "")
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("failed to index %s: %w", dir, err)
	}
	idx.SortEntries()
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		_ = ln.Close()
		return nil, err
	}
	files := http.FileServer(http.Dir(dir))
	r := &ChartRepo{URL: url, Dir: dir, ln: ln}
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		// Only the index and the packages: no directory listing.
		name := strings.TrimPrefix(req.URL.Path, "/")
		if name != "index.yaml" && (!strings.HasSuffix(name, ".tgz") || strings.Contains(name, "/")) {
			http.NotFound(w, req)
			return
		}
		files.ServeHTTP(w, req)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// NewChartRepo is StartChartRepo in a test's temporary directory, closed when the test ends.
func NewChartRepo(t testing.TB, chartDirs ...string) *ChartRepo {
	t.Helper()
	r, err := StartChartRepo(t.TempDir(), chartDirs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// Index is the repository's index.
func (r *ChartRepo) Index() (*repo.IndexFile, error) {
	return repo.LoadIndexFile(filepath.Join(r.Dir, "index.yaml"))
}

// Close stops serving.
func (r *ChartRepo) Close() error {
	return r.srv.Close()
}

// StandInCharts are the minimal charts in test/fixtures/charts of the repository at repoRoot
// that stand in, under the upstream chart's name, for infrastructure charts the GitOps tree
// installs and that cannot be fetched offline (see test/fixtures/charts/README.md). They deploy
// no workload.
func StandInCharts(repoRoot string) []string {
	base := filepath.Join(repoRoot, "test", "fixtures", "charts")
	out := []string{}
	for _, name := range []string{"cert-manager", "ingress-nginx", "kube-prometheus-stack", "kyverno", "aws-ebs-csi-driver"} {
		out = append(out, filepath.Join(base, name))
	}
	return out
}
