package helm

import (
	"context"
	"errors"
	"sync"

	"k8s.io/client-go/rest"
)

// SharedChart is one chart for the clients of many clusters. An SDKClient locates and loads its
// chart on its first install and keeps it for its own life; a manager that installs the same
// chart on many target clusters (Flux on every HostCluster) would pull it once per cluster.
// A SharedChart loads it once for all of them: the first install of any of its clients loads
// it, later ones reuse it. A failed load is retried on the next install. Observe and Uninstall
// never need the chart, so they work while the chart cannot be loaded (e.g. the registry is
// unreachable).
type SharedChart struct {
	opts Options

	mu      sync.Mutex
	archive []byte // packaged chart, set on the first successful load
}

// NewSharedChart returns a SharedChart for opts (ChartRef, ChartVersion, CacheDir and Log as
// for New). It does not load the chart.
func NewSharedChart(opts Options) (*SharedChart, error) {
	if opts.ChartRef == "" {
		return nil, errors.New("failed to create shared chart: chart reference is empty")
	}
	return &SharedChart{opts: opts.withDefaults()}, nil
}

// Options returns the options of the chart, defaults applied.
func (s *SharedChart) Options() Options { return s.opts }

// Load loads the chart unless it was loaded already. Concurrent first loads are one load
// (see loadChartArchive). The error is an *Error; see Error.Terminal.
func (s *SharedChart) Load(ctx context.Context) error {
	_, err := s.load(ctx)
	return err
}

// load returns the packaged chart, loading it on first use.
func (s *SharedChart) load(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	archive := s.archive
	s.mu.Unlock()
	if archive != nil {
		return archive, nil
	}
	archive, err := loadChartArchive(ctx, s.opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.archive == nil {
		s.archive = archive
	}
	archive = s.archive
	s.mu.Unlock()
	return archive, nil
}

// TargetClient is an SDKClient for one cluster whose chart is a SharedChart's. Its operations
// behave as the SDKClient's; InstallOrUpgrade first makes sure the shared chart is loaded.
type TargetClient struct {
	*SDKClient
	shared *SharedChart
}

var _ Client = (*TargetClient)(nil)

// Client returns a client for the cluster of cfg that installs the shared chart. Like New, it
// neither contacts the cluster nor loads the chart. Clients are cheap to drop: nothing of theirs
// outlives them but the shared chart.
func (s *SharedChart) Client(cfg *rest.Config) (*TargetClient, error) {
	c, err := New(cfg, s.opts)
	if err != nil {
		return nil, err
	}
	return &TargetClient{SDKClient: c, shared: s}, nil
}

// InstallOrUpgrade implements Client: SDKClient.InstallOrUpgrade with the shared chart.
func (t *TargetClient) InstallOrUpgrade(ctx context.Context, rel Release, values map[string]any) (Observation, error) {
	archive, err := t.shared.load(ctx)
	if err != nil {
		return Observation{}, newError("install or upgrade", rel.Namespace, rel.Name, err)
	}
	t.chartMu.Lock()
	t.chart = archive // read-only: every operation loads its own *chart.Chart from it
	t.chartMu.Unlock()
	return t.SDKClient.InstallOrUpgrade(ctx, rel, values)
}

// Managed reports whether the latest revision of rel was made by this package (every
// InstallOrUpgrade labels its revisions with the hash of their values), i.e. whether the release
// is ours rather than someone else's of the same name. A missing release is not managed.
func (t *TargetClient) Managed(ctx context.Context, rel Release) (bool, error) {
	const op = "observe"
	cfg, unlock, err := t.enter(ctx, rel)
	if err != nil {
		return false, newError(op, rel.Namespace, rel.Name, err)
	}
	defer unlock()
	latest, _, err := history(cfg, rel.Name)
	if err != nil {
		return false, newError(op, rel.Namespace, rel.Name, err)
	}
	return latest != nil && latest.Labels[valuesHashLabel] != "", nil
}
