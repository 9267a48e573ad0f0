package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"
)

const (
	// chartPullTimeout bounds one load of a chart, pull included; it is also
	// the timeout of every HTTP request of a pull.
	chartPullTimeout = 5 * time.Minute
	// maxConcurrentPulls bounds the chart loads in flight in the process.
	maxConcurrentPulls = 4
)

// Paths under Options.CacheDir. Nothing of this package is written anywhere
// else: the manager runs with a read-only root file system.
const (
	// repositoryCacheDir holds downloaded charts (like $HELM_CACHE_HOME/repository).
	repositoryCacheDir = "repository"
	// contentCacheDir is Helm 4's content-addressed chart cache (like $HELM_CACHE_HOME/content).
	contentCacheDir = "content"
	// repositoryConfigFile is Helm's repositories.yaml; it is only read, and
	// only when it exists.
	repositoryConfigFile = "repositories.yaml"
	// registryConfigFile holds OCI registry credentials (like
	// $HELM_REGISTRY_CONFIG); it is only read, and only when it exists. Helm's
	// registry client also falls back to reading Docker's credential store
	// ($HOME/.docker/config.json) when that exists; it never writes there.
	registryConfigFile = "registry/config.json"
	// scratchDir holds temporary files, e.g. a local chart directory while it is packaged.
	scratchDir = "tmp"
)

// IsLocalChart reports whether ref names a chart directory or packaged chart
// (.tgz) on the local file system, i.e. whether it has no URL scheme such as
// oci:// or https://.
func IsLocalChart(ref string) bool {
	return !strings.Contains(ref, "://")
}

// Reachable reports whether the chart of opts can be located and loaded: a
// remote chart is pulled into opts.CacheDir, a local one is read from disk. A
// dev launcher uses it to decide whether to fall back to a local chart. The
// error is an *Error; Error.Terminal (reconcile.IsTerminal) tells a chart that does not exist or does not
// load from a registry that cannot be reached.
func Reachable(ctx context.Context, opts Options) error {
	_, err := loadChartArchive(ctx, opts.withDefaults())
	return err
}

// pulls is the process-wide single flight of chart loads: charts are
// process-wide state (one cache directory per process), and the bound on
// concurrent pulls holds across every SDKClient and Reachable.
var pulls = newPuller(maxConcurrentPulls)

// pullTransport is the HTTP transport of every chart pull, shared so that
// pulls reuse connections. Each pull binds its own context on top of it
// (contextTransport), so an abandoned pull stops.
var pullTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.DisableCompression = true // charts are gzipped already
	return t
}()

// loadChartArchive locates and loads the chart of opts and returns it as a
// packaged (.tgz) chart, or an *Error. Loads of one chart reference, version
// and cache directory are shared by all callers in flight; a caller returns
// when its ctx is done, and the load is cancelled once no caller waits for it.
func loadChartArchive(ctx context.Context, opts Options) ([]byte, error) {
	op := "load chart " + opts.ChartRef
	if !IsLocalChart(opts.ChartRef) && opts.ChartVersion != "" {
		op += " version " + opts.ChartVersion
	}
	key := strings.Join([]string{opts.ChartRef, opts.ChartVersion, opts.CacheDir}, "\x00")
	archive, err := pulls.do(ctx, key, func(ctx context.Context) ([]byte, error) {
		return packageChart(ctx, opts)
	})
	if err != nil {
		return nil, newError(op, "", "", err)
	}
	return archive, nil
}

// packageChart loads the chart of opts and returns it packaged, so that a
// fresh *chart.Chart can be loaded from memory for every operation: Helm
// mutates a chart while processing its dependencies, so charts are never
// shared. ctx cancels a pull.
func packageChart(ctx context.Context, opts Options) ([]byte, error) {
	path := opts.ChartRef
	if IsLocalChart(path) {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", errChartNotFound, err)
		}
	} else {
		var err error
		if path, err = pullChart(ctx, opts); err != nil {
			return nil, err
		}
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		archive, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if _, err := loader.LoadArchive(bytes.NewReader(archive)); err != nil {
			return nil, fmt.Errorf("%w: %w", errInvalidChart, err)
		}
		return archive, nil
	}
	ch, err := loader.Load(path)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errInvalidChart, err)
	}
	tmp, err := scratch(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // best-effort cleanup of a scratch dir
	file, err := chartutil.Save(ch, tmp)
	if err != nil {
		return nil, fmt.Errorf("failed to package chart: %w", err)
	}
	return os.ReadFile(file)
}

// scratch returns a new temporary directory under cacheDir; the caller removes it.
func scratch(cacheDir string) (string, error) {
	dir := filepath.Join(cacheDir, scratchDir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	return os.MkdirTemp(dir, "chart-")
}

// pullChart downloads a remote chart into the repository cache of
// opts.CacheDir and returns the path of the downloaded archive. Every request
// is bound to ctx and times out after chartPullTimeout.
func pullChart(ctx context.Context, opts Options) (string, error) {
	dest := filepath.Join(opts.CacheDir, repositoryCacheDir)
	if err := os.MkdirAll(dest, 0o750); err != nil {
		return "", err
	}
	client := &http.Client{Transport: contextTransport{ctx: ctx, base: pullTransport}, Timeout: chartPullTimeout}
	httpGetter := func(...getter.Option) (getter.Getter, error) { return &httpChartGetter{ctx: ctx, client: client}, nil }
	dl := downloader.ChartDownloader{
		Out:    io.Discard,
		Verify: downloader.VerifyNever,
		Getters: getter.Providers{
			{Schemes: []string{"http", "https"}, New: httpGetter},
			{Schemes: []string{registry.OCIScheme}, New: getter.NewOCIGetter},
		},
		RepositoryConfig: filepath.Join(opts.CacheDir, repositoryConfigFile),
		RepositoryCache:  dest,
		ContentCache:     filepath.Join(opts.CacheDir, contentCacheDir),
	}
	if registry.IsOCI(opts.ChartRef) {
		rc, err := registry.NewClient(
			registry.ClientOptHTTPClient(client),
			registry.ClientOptEnableCache(true),
			registry.ClientOptCredentialsFile(filepath.Join(opts.CacheDir, registryConfigFile)),
		)
		if err != nil {
			return "", fmt.Errorf("failed to create registry client: %w", err)
		}
		dl.RegistryClient, dl.Options = rc, []getter.Option{getter.WithRegistryClient(rc)}
	}
	path, _, err := dl.DownloadTo(opts.ChartRef, opts.ChartVersion, dest)
	return path, err
}

// contextTransport binds every request to ctx: Helm's registry client makes
// its requests with context.Background(), so this is how a pull is cancelled.
type contextTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t contextTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.base.RoundTrip(req.WithContext(t.ctx))
}

// httpChartGetter is a getter.Getter for http(s) chart URLs whose requests are
// bound to a context, which Helm's own HTTP getter cannot be. It ignores
// getter options (repository credentials and TLS files from repositories.yaml,
// which this package never writes).
type httpChartGetter struct {
	ctx    context.Context
	client *http.Client
}

// Get implements getter.Getter.
func (g *httpChartGetter) Get(href string, _ ...getter.Option) (*bytes.Buffer, error) {
	req, err := http.NewRequestWithContext(g.ctx, http.MethodGet, href, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/gzip,application/octet-stream")
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	if resp.StatusCode != http.StatusOK {
		return nil, &httpStatusError{URL: href, StatusCode: resp.StatusCode, Status: resp.Status}
	}
	buf := new(bytes.Buffer)
	if _, err := io.Copy(buf, resp.Body); err != nil {
		return nil, err
	}
	return buf, nil
}

// puller runs loads single-flight by key, with a bound on loads in flight.
type puller struct {
	slots chan struct{} // one token per load in flight

	mu      sync.Mutex
	flights map[string]*flight // by key
}

// flight is one load in flight.
type flight struct {
	done    chan struct{} // closed once archive and err are set
	archive []byte
	err     error

	cancel    context.CancelFunc
	waiters   int  // guarded by puller.mu
	abandoned bool // every waiter left and the load was cancelled; guarded by puller.mu
}

// newPuller returns a puller running at most limit loads at once.
func newPuller(limit int) *puller {
	return &puller{slots: make(chan struct{}, limit), flights: map[string]*flight{}}
}

// do returns the result of load for key, starting load unless one is in
// flight for key already. It returns ctx.Err() when ctx is done first; load's
// context is cancelled once no caller waits for it any more, and a new load
// of key starts only after a cancelled one returned.
func (p *puller) do(ctx context.Context, key string, load func(context.Context) ([]byte, error)) ([]byte, error) {
	for {
		p.mu.Lock()
		f := p.flights[key]
		if f != nil && f.abandoned {
			p.mu.Unlock()
			select {
			case <-f.done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if f == nil {
			lctx, cancel := context.WithTimeout(context.Background(), chartPullTimeout)
			f = &flight{done: make(chan struct{}), cancel: cancel}
			p.flights[key] = f
			go p.run(lctx, key, f, load)
		}
		f.waiters++
		p.mu.Unlock()

		select {
		case <-f.done:
			p.leave(f)
			return f.archive, f.err
		case <-ctx.Done():
			p.leave(f)
			return nil, ctx.Err()
		}
	}
}

// run runs load for f once a slot is free.
func (p *puller) run(ctx context.Context, key string, f *flight, load func(context.Context) ([]byte, error)) {
	defer f.cancel()
	var archive []byte
	var err error
	select {
	case p.slots <- struct{}{}:
		archive, err = load(ctx)
		<-p.slots
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f.archive, f.err = archive, err
	if p.flights[key] == f {
		delete(p.flights, key)
	}
	close(f.done)
}

// leave drops a waiter of f and cancels f when it was the last one and f is
// still running.
func (p *puller) leave(f *flight) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f.waiters--
	if f.waiters > 0 {
		return
	}
	select {
	case <-f.done:
	default:
		f.abandoned = true
		f.cancel()
	}
}

// inFlight returns the number of loads in flight or being cancelled.
func (p *puller) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.flights)
}
