// Package helm manages the Helm release of a vCluster on a backend cluster
// with the Helm SDK (helm.sh/helm/v3/pkg/action).
//
// Client is shaped like a Crossplane ExternalClient: Observe reports the
// latest revision of a release, InstallOrUpgrade converges it to the given
// values and Uninstall removes it. Helm keeps release state in Secrets of the
// release namespace (the "secret" storage driver), so the Helm CLI can inspect
// releases made by this package. Release values are never logged nor returned
// because they may carry secrets.
package helm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/client-go/rest"
)

const (
	// storageDriver is the Helm storage driver for release records.
	storageDriver = "secret"
	// maxHistory bounds the revisions (Secrets) kept per release.
	maxHistory = 10
	// chartPullTimeout bounds locating and loading the chart.
	chartPullTimeout = 5 * time.Minute
	// hookTimeout bounds chart hooks; resources themselves are never waited for.
	hookTimeout = 5 * time.Minute
)

// ReleaseInfo is what a controller needs to know about a release. It carries
// neither values nor manifests, as values may be sensitive.
type ReleaseInfo struct {
	// Name is the release name.
	Name string
	// Namespace is the release namespace.
	Namespace string
	// Revision is the release revision, starting at 1.
	Revision int
	// Status is the Helm status of the revision, e.g. "deployed" or "failed".
	Status release.Status
	// ChartVersion is the version of the chart the revision was made from.
	ChartVersion string
	// ValuesHash is the hash of the values the revision was made with (see HashValues), read from
	// the release's label; empty for releases made by other tools.
	ValuesHash string
	// Description is Helm's human-readable description of the revision,
	// e.g. "Install complete" or the error that failed it.
	Description string
}

// Client installs, upgrades, observes and uninstalls Helm releases.
type Client interface {
	// Observe returns the latest revision of release name in namespace, or
	// (nil, nil) when no release exists.
	Observe(ctx context.Context, namespace, name string) (*ReleaseInfo, error)
	// InstallOrUpgrade installs the chart as release name in namespace, or
	// upgrades the release to values if it exists. It never waits for
	// workloads to become ready. The namespace must exist.
	InstallOrUpgrade(ctx context.Context, namespace, name string, values map[string]any) (*ReleaseInfo, error)
	// Uninstall removes release name from namespace; a missing release is
	// not an error.
	Uninstall(ctx context.Context, namespace, name string) error
}

// Options configures an SDKClient.
type Options struct {
	// ChartRef is the chart to install: an OCI reference such as
	// "oci://ghcr.io/loft-sh/charts/vcluster", an http(s) URL of a packaged
	// chart, or the path of a local chart directory or .tgz archive.
	ChartRef string
	// ChartVersion is the version of a remote chart, e.g. "0.21.2"; empty
	// selects the latest. It is ignored for local charts.
	ChartVersion string
	// CacheDir is the Helm cache directory (like $HELM_CACHE_HOME) where
	// remote charts are downloaded. Defaults to os.UserCacheDir()/helm.
	CacheDir string
	// Log receives Helm's debug output at V(1) and is used when the context
	// of a call carries no logger. The zero value discards.
	Log logr.Logger
}

// withDefaults returns opts with unset fields defaulted.
func (o Options) withDefaults() Options {
	if o.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		o.CacheDir = filepath.Join(dir, "helm")
	}
	return o
}

var _ Client = (*SDKClient)(nil)

// SDKClient is a Client backed by the Helm SDK and a single backend cluster.
//
// The chart is located and loaded on first use, then kept in memory for the
// life of the process; a failed load is retried on the next call. Operations
// in one namespace are serialised, operations in distinct namespaces run
// concurrently.
//
// InstallOrUpgrade recovers from interrupted or failed operations as follows.
// A latest revision that is still pending (pending-install, pending-upgrade or
// pending-rollback) is marked failed: the caller is assumed to be the only
// writer of its releases (a leader-elected controller) and operations in a
// namespace are serialised, so a pending revision seen at the start of a call
// is a leftover of an interrupted operation. Then a release that never
// reached deployed (its first install failed) or is being uninstalled is
// uninstalled and installed again, while a release with a deployed revision is
// upgraded (Helm upgrades from the last deployed revision).
type SDKClient struct {
	opts   Options
	getter *restClientGetter

	chartMu sync.Mutex
	chart   []byte // packaged chart, set on first successful load

	mu      sync.Mutex
	configs map[string]*namespaceConfig // by namespace
}

// namespaceConfig is the Helm action configuration of a namespace; its lock
// serialises the operations in that namespace.
type namespaceConfig struct {
	sync.Mutex
	cfg *action.Configuration
}

// New returns an SDKClient for the cluster of cfg. It does not contact the
// cluster nor load the chart.
func New(cfg *rest.Config, opts Options) (*SDKClient, error) {
	if cfg == nil {
		return nil, errors.New("failed to create helm client: rest config is nil")
	}
	if opts.ChartRef == "" {
		return nil, errors.New("failed to create helm client: chart reference is empty")
	}
	getter, err := newRESTClientGetter(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create helm client: %w", err)
	}
	return &SDKClient{
		opts:    opts.withDefaults(),
		getter:  getter,
		configs: map[string]*namespaceConfig{},
	}, nil
}

// Observe implements Client.
func (c *SDKClient) Observe(_ context.Context, namespace, name string) (*ReleaseInfo, error) {
	nc, err := c.lock(namespace)
	if err != nil {
		return nil, fmt.Errorf("failed to observe release %s/%s: %w", namespace, name, err)
	}
	defer nc.Unlock()

	latest, _, err := history(nc.cfg, name)
	if err != nil {
		return nil, fmt.Errorf("failed to observe release %s/%s: %w", namespace, name, err)
	}
	return toInfo(latest), nil
}

// InstallOrUpgrade implements Client; see SDKClient for how it recovers from
// pending and failed releases.
func (c *SDKClient) InstallOrUpgrade(ctx context.Context, namespace, name string, values map[string]any) (*ReleaseInfo, error) {
	log := c.logger(ctx).WithValues("namespace", namespace, "release", name)
	if values == nil {
		values = map[string]any{}
	}
	ch, err := c.loadChart(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to install or upgrade release %s/%s: %w", namespace, name, err)
	}

	nc, err := c.lock(namespace)
	if err != nil {
		return nil, fmt.Errorf("failed to install or upgrade release %s/%s: %w", namespace, name, err)
	}
	defer nc.Unlock()
	cfg := nc.cfg
	cfg.Capabilities = nil // rediscover: the cluster may have changed since the last operation

	latest, revisions, err := history(cfg, name)
	if err != nil {
		return nil, fmt.Errorf("failed to install or upgrade release %s/%s: %w", namespace, name, err)
	}
	if latest != nil && latest.Info.Status.IsPending() {
		log.Info("Marking interrupted release revision as failed", "revision", latest.Version, "status", latest.Info.Status)
		latest.SetStatus(release.StatusFailed, fmt.Sprintf("Interrupted while %s; marked failed", latest.Info.Status))
		if err := cfg.Releases.Update(latest); err != nil {
			return nil, fmt.Errorf("failed to mark release %s/%s revision %d as failed: %w", namespace, name, latest.Version, err)
		}
	}
	if latest != nil && needsReinstall(latest, revisions) {
		log.Info("Uninstalling release before installing it again", "revision", latest.Version, "status", latest.Info.Status)
		if err := uninstall(cfg, name); err != nil {
			return nil, fmt.Errorf("failed to uninstall release %s/%s before installing it again: %w", namespace, name, err)
		}
		latest = nil
	}

	var rel *release.Release
	if latest == nil {
		log.V(1).Info("Installing release", "chartVersion", ch.Metadata.Version)
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace = name, namespace
		in.CreateNamespace, in.Wait, in.Timeout = false, false, hookTimeout
		in.Labels = map[string]string{ValuesHashLabel: HashValues(values)}
		if rel, err = in.RunWithContext(ctx, ch, values); err != nil {
			return nil, fmt.Errorf("failed to install release %s/%s: %w", namespace, name, err)
		}
	} else {
		log.V(1).Info("Upgrading release", "revision", latest.Version, "chartVersion", ch.Metadata.Version)
		up := action.NewUpgrade(cfg)
		up.Namespace = namespace
		up.Wait, up.Timeout, up.MaxHistory = false, hookTimeout, maxHistory
		up.ResetValues = true // values are the complete desired state, never merged with older ones
		up.Labels = map[string]string{ValuesHashLabel: HashValues(values)}
		if rel, err = up.RunWithContext(ctx, name, ch, values); err != nil {
			return nil, fmt.Errorf("failed to upgrade release %s/%s: %w", namespace, name, err)
		}
	}
	return toInfo(rel), nil
}

// Uninstall implements Client.
func (c *SDKClient) Uninstall(_ context.Context, namespace, name string) error {
	nc, err := c.lock(namespace)
	if err != nil {
		return fmt.Errorf("failed to uninstall release %s/%s: %w", namespace, name, err)
	}
	defer nc.Unlock()

	latest, _, err := history(nc.cfg, name)
	if err == nil && latest != nil {
		err = uninstall(nc.cfg, name)
	}
	if err != nil {
		return fmt.Errorf("failed to uninstall release %s/%s: %w", namespace, name, err)
	}
	// The namespace's Helm configuration is not needed any more (one vCluster per namespace);
	// drop it so the client does not grow with every namespace it ever saw.
	c.mu.Lock()
	if c.configs[namespace] == nc {
		delete(c.configs, namespace)
	}
	c.mu.Unlock()
	return nil
}

// loadChart returns a fresh copy of the chart, loading it on first use.
func (c *SDKClient) loadChart(ctx context.Context) (*chart.Chart, error) {
	c.chartMu.Lock()
	defer c.chartMu.Unlock()
	// A registry that hangs must not hold every reconcile behind this lock forever.
	ctx, cancel := context.WithTimeout(ctx, chartPullTimeout)
	defer cancel()
	if c.chart == nil {
		archive, err := loadChartArchive(ctx, c.opts)
		if err != nil {
			return nil, err
		}
		c.chart = archive
	}
	ch, err := loader.LoadArchive(bytes.NewReader(c.chart))
	if err != nil {
		return nil, fmt.Errorf("failed to load chart %s: %w", c.opts.ChartRef, err)
	}
	return ch, nil
}

// lock returns the locked Helm configuration of namespace, creating it on
// first use. Callers must unlock it.
func (c *SDKClient) lock(namespace string) (*namespaceConfig, error) {
	c.mu.Lock()
	nc, ok := c.configs[namespace]
	if !ok {
		nc = &namespaceConfig{}
		c.configs[namespace] = nc
	}
	c.mu.Unlock()

	nc.Lock()
	if nc.cfg == nil {
		log := c.opts.Log.WithValues("namespace", namespace)
		cfg := new(action.Configuration)
		debug := func(format string, v ...any) { log.V(1).Info(fmt.Sprintf(format, v...)) }
		if err := cfg.Init(c.getter.forNamespace(namespace), namespace, storageDriver, debug); err != nil {
			nc.Unlock()
			return nil, fmt.Errorf("failed to initialize helm for namespace %s: %w", namespace, err)
		}
		nc.cfg = cfg
	}
	return nc, nil
}

// logger returns the logger of ctx, or the configured one.
func (c *SDKClient) logger(ctx context.Context) logr.Logger {
	if log, err := logr.FromContext(ctx); err == nil {
		return log
	}
	return c.opts.Log
}

// history returns the latest revision of release name and all its revisions,
// or no revision if the release does not exist.
func history(cfg *action.Configuration, name string) (*release.Release, []*release.Release, error) {
	revisions, err := action.NewHistory(cfg).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("failed to get release history: %w", err)
	}
	var latest *release.Release
	for _, r := range revisions {
		if latest == nil || r.Version > latest.Version {
			latest = r
		}
	}
	return latest, revisions, nil
}

// needsReinstall reports whether the release must be uninstalled before it
// can be installed again instead of upgraded: it is being (or was)
// uninstalled, or it failed without any revision ever being deployed.
func needsReinstall(latest *release.Release, revisions []*release.Release) bool {
	switch latest.Info.Status {
	case release.StatusUninstalling, release.StatusUninstalled:
		return true
	case release.StatusFailed:
		for _, r := range revisions {
			if s := r.Info.Status; s == release.StatusDeployed || s == release.StatusSuperseded {
				return false
			}
		}
		return true
	}
	return false
}

// uninstall uninstalls release name and purges its history.
func uninstall(cfg *action.Configuration, name string) error {
	un := action.NewUninstall(cfg)
	un.DeletionPropagation = "background"
	un.Timeout = hookTimeout
	_, err := un.Run(name)
	return err
}

// toInfo summarises rel, or returns nil if rel is nil.
func toInfo(rel *release.Release) *ReleaseInfo {
	if rel == nil {
		return nil
	}
	info := &ReleaseInfo{Name: rel.Name, Namespace: rel.Namespace, Revision: rel.Version}
	if rel.Info != nil {
		info.Status, info.Description = rel.Info.Status, rel.Info.Description
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		info.ChartVersion = rel.Chart.Metadata.Version
	}
	info.ValuesHash = rel.Labels[ValuesHashLabel]
	return info
}

// ValuesHashLabel is the release label carrying HashValues of the values a revision was made with,
// so a caller can tell whether a release already has the values it wants without reading them.
const ValuesHashLabel = "kubeopera.io/values-hash"

// HashValues returns a short stable hash of values (encoding/json sorts map keys).
func HashValues(values map[string]any) string {
	raw, _ := json.Marshal(values)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:16]
}
