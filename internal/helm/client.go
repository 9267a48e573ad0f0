// Package helm manages the Helm release of a vCluster on a backend cluster
// with the Helm 4 SDK (helm.sh/helm/v4/pkg/action).
//
// Client is shaped like a Crossplane ExternalClient: Observe reports the
// latest revision of a release as an Observation, InstallOrUpgrade converges
// it to the given values and Uninstall removes it. A caller decides what to do
// from the Observation alone (Exists, UpToDate, State): it never reads Helm
// status strings nor hashes values itself.
//
// Every error returned is (or wraps) an *Error. Error.Terminal (reconcile.IsTerminal) tells an error that
// retrying with the same input cannot fix from a transient one. Terminal: the
// chart does not exist (a missing local path, an http(s) 404/410, an OCI tag
// or repository not found, no version matching ChartVersion), the chart does
// not load, the values do not meet the chart's values.schema.json, the chart
// does not render with them, or the API server refuses a rendered object as
// invalid. Transient: everything else, e.g. a registry or API server that
// cannot be reached, timeouts, the caller's context deadline, 5xx, 429,
// conflicts and storage errors. Typed errors are classified with errors.Is
// and errors.As; messages are matched only where Helm gives nothing typed.
//
// Helm keeps release records in Secrets (the "secret" storage driver) of the
// release's storage namespace: the release namespace unless Release.Storage
// names another one, so the Helm CLI can inspect releases made by this package
// (helm --namespace <storage>). Release values are never logged nor returned
// because they may carry secrets. Nothing is written outside Options.CacheDir.
package helm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmkube "helm.sh/helm/v4/pkg/kube"
	ri "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// maxHistory bounds the revisions (Secrets) kept per release.
	maxHistory = 10
	// hookTimeout bounds chart hooks; resources themselves are never waited for.
	hookTimeout = 5 * time.Minute
	// valuesHashLabel is the release label carrying hashValues of the values
	// a revision was made with, so Observe can tell whether a release has the
	// desired values without reading them. Releases made by earlier versions
	// of this package carry it too.
	valuesHashLabel = "kubeopera.io/values-hash"
	// releaseSecretType is the type of the Secrets Helm's secrets driver keeps release records
	// in (pkg/storage/driver/secrets.go newSecretsObject; Helm 3 and Helm 4 write the same records).
	releaseSecretType corev1.SecretType = "helm.sh/release.v1"
)

// State is the state of a release's latest revision, as the reconciler needs it.
type State string

const (
	// StateDeployed: the latest revision is deployed.
	StateDeployed State = "Deployed"
	// StateFailed: the latest revision failed; Observation.Description says why.
	StateFailed State = "Failed"
	// StatePending: the latest revision is pending-install, pending-upgrade or
	// pending-rollback (an operation is running, or was interrupted).
	StatePending State = "Pending"
	// StateUninstalling: the latest revision is uninstalling or uninstalled.
	StateUninstalling State = "Uninstalling"
	// StateUnknown: anything else, e.g. a superseded revision as the latest one.
	StateUnknown State = "Unknown"
)

// Release names one Helm release and where Helm keeps its records.
type Release struct {
	// Namespace is the release namespace: the chart's objects are created there, and their
	// meta.helm.sh/release-namespace annotation names it.
	Namespace string
	// Name is the release name.
	Name string
	// Storage is the namespace of the release's records (Secrets
	// sh.helm.release.v1.<name>.v<revision>); "" is Namespace, Helm's default. A record holds
	// the manifest from which Helm decides what an upgrade prunes and an uninstall deletes,
	// with this client's credentials: whoever may write Secrets where the records live decides
	// what Helm deletes. A release whose namespace others may write Secrets in (a vCluster's
	// syncer does in its host namespace) keeps its records in a namespace only the caller writes.
	//
	// Records of the release found in Namespace while Storage names another namespace (the
	// layout before Storage was set, or forged) are never read: InstallOrUpgrade installs the
	// release into Storage, adopting the objects whose meta.helm.sh/release-name and
	// release-namespace annotations name it (Helm's install adopts those instead of failing),
	// and then deletes those records; Uninstall deletes them too. A failed adopting install is
	// forgotten and tried again, never uninstalled (which would delete the adopted objects). So
	// a release made before its records moved keeps its objects (no reinstall from scratch) and
	// a forged record never decides a deletion.
	Storage string
}

// storage returns the namespace of r's records.
func (r Release) storage() string {
	if r.Storage == "" {
		return r.Namespace
	}
	return r.Storage
}

// separate reports whether r's records live outside its namespace.
func (r Release) separate() bool { return r.storage() != r.Namespace }

// Observation is what a controller needs to know about a release. It carries
// neither values nor manifests, as values may be sensitive.
type Observation struct {
	// Exists is true when a revision of the release exists.
	Exists bool
	// UpToDate is true when the latest revision was made with exactly the
	// desired values; false when !Exists.
	UpToDate bool
	// State is the state of the latest revision; empty when !Exists.
	State State
	// Revision is the number of the latest revision, starting at 1; 0 when !Exists.
	Revision int
	// ChartVersion is the version of the chart the latest revision was made from.
	ChartVersion string
	// Description is Helm's description of the latest revision, e.g.
	// "Install complete" or the error that failed it.
	Description string
}

// Client installs, upgrades, observes and uninstalls Helm releases. Every
// error it returns is (or wraps) an *Error; see Error.Terminal.
type Client interface {
	// Observe reports the latest revision of rel (from its storage namespace),
	// compared with the desired values. A missing release is not an error:
	// the Observation says !Exists.
	Observe(ctx context.Context, rel Release, values map[string]any) (Observation, error)
	// InstallOrUpgrade converges rel to values: it installs the chart, or
	// upgrades the release if it exists. It never waits for workloads to
	// become ready and returns the observation of the new revision (the zero
	// Observation on error). The release and storage namespaces must exist.
	InstallOrUpgrade(ctx context.Context, rel Release, values map[string]any) (Observation, error)
	// Uninstall removes rel: its objects and its records. A missing release
	// is not an error. When rel's records live outside its namespace and
	// that namespace is gone, only the records are left to remove.
	Uninstall(ctx context.Context, rel Release) error
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
	// CacheDir is the only directory this package writes to: downloaded
	// charts, scratch files, and the (read-only) registry credentials and
	// repositories files live under it. Defaults to os.UserCacheDir()/helm.
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
// life of the process; a failed load is retried on the next call. Loads of
// one chart are shared by concurrent callers, and a caller stops waiting when
// its context is done.
//
// Operations on the releases of one release namespace are serialised,
// operations in distinct namespaces run concurrently. A caller's context
// bounds waiting for the chart and for the namespace; once a Helm action has
// started it runs to completion (bounded by hook timeouts, never waiting for
// workloads), so that no Helm write outlives the namespace's lock. A Helm action configuration is built
// per operation on one shared connection pool, discovery client and REST
// mapper; nothing is kept per namespace.
//
// InstallOrUpgrade recovers from interrupted or failed operations as follows.
// A latest revision that is still pending (pending-install, pending-upgrade or
// pending-rollback) is marked failed: the caller is assumed to be the only
// writer of its releases (a leader-elected controller) and operations in a
// release namespace are serialised, so a pending revision seen at the start of
// a call is a leftover of an interrupted operation. Then a release that never
// reached deployed (its first install failed) or is being uninstalled is
// uninstalled and installed again, while a release with a deployed revision is
// upgraded (Helm upgrades from the last deployed revision).
type SDKClient struct {
	opts   Options
	getter *restClientGetter
	// factory and clients are shared by every operation: Helm's own Init builds a factory, and
	// with it a clientset of ~56 REST clients, per configuration.
	factory   *sharedFactory
	clientset kubernetes.Interface

	// caps are the backend's capabilities, shared by every operation (capabilitiesTTL).
	caps *capabilities

	chartMu sync.Mutex
	chart   []byte // packaged chart, set on first successful load

	namespaces keyedLock // serialises operations by namespace

	// inNamespace, when set (by tests), is called once an operation holds
	// its namespace's lock; the function it returns is called just before
	// the lock is released.
	inNamespace func(namespace string) (done func())
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
	factory, err := newSharedFactory(getter)
	if err != nil {
		return nil, fmt.Errorf("failed to create helm client: %w", err)
	}
	caps := &capabilities{discovery: getter.discovery, ttl: capabilitiesTTL, now: time.Now}
	return &SDKClient{opts: opts.withDefaults(), getter: getter, factory: factory, clientset: factory.clientset, caps: caps}, nil
}

// Observe implements Client.
func (c *SDKClient) Observe(ctx context.Context, rel Release, values map[string]any) (Observation, error) {
	const op = "observe"
	cfg, unlock, err := c.enter(ctx, rel)
	if err != nil {
		return Observation{}, newError(op, rel.Namespace, rel.Name, err)
	}
	defer unlock()

	latest, _, err := history(cfg, rel.Name)
	if err != nil {
		return Observation{}, newError(op, rel.Namespace, rel.Name, err)
	}
	return observation(latest, hashValues(values)), nil
}

// InstallOrUpgrade implements Client; see SDKClient for how it recovers from
// pending and failed releases, and Release.Storage for records left in the
// release namespace.
func (c *SDKClient) InstallOrUpgrade(ctx context.Context, rel Release, values map[string]any) (Observation, error) {
	const op = "install or upgrade"
	namespace, name := rel.Namespace, rel.Name
	log := c.logger(ctx).WithValues("namespace", namespace, "release", name)
	if values == nil {
		values = map[string]any{}
	}
	if err := ctx.Err(); err != nil {
		return Observation{}, newError(op, namespace, name, err)
	}
	ch, err := c.loadChart(ctx)
	if err != nil {
		return Observation{}, newError(op, namespace, name, err)
	}

	cfg, unlock, err := c.enter(ctx, rel)
	if err != nil {
		return Observation{}, newError(op, namespace, name, err)
	}
	defer unlock()

	latest, revisions, err := history(cfg, name)
	if err != nil {
		return Observation{}, newError(op, namespace, name, err)
	}
	if latest != nil && latest.Info.Status.IsPending() {
		log.Info("Marking interrupted release revision as failed", "revision", latest.Version, "status", latest.Info.Status)
		latest.SetStatus(rcommon.StatusFailed, fmt.Sprintf("Interrupted while %s; marked failed", latest.Info.Status))
		if err := cfg.Releases.Update(latest); err != nil {
			return Observation{}, newError(op, namespace, name, fmt.Errorf("failed to mark revision %d as failed: %w", latest.Version, err))
		}
	}
	var moving []corev1.Secret // records left in the release namespace: their objects are to be adopted
	listed := false            // moving was listed (in this call, under the namespace's lock)
	if rel.separate() && (latest == nil || needsReinstall(latest, revisions)) {
		listed = true
		if moving, err = c.namespaceRecords(ctx, rel); err != nil {
			return Observation{}, newError(op, namespace, name, err)
		}
	}
	if latest != nil && needsReinstall(latest, revisions) {
		if len(moving) > 0 && latest.Info.Status == rcommon.StatusFailed {
			// The install that was to adopt the objects of the release recorded in the release
			// namespace failed: forget it and adopt them again, rather than uninstalling them.
			log.Info("Forgetting the failed install that was to adopt the release's objects", "revision", latest.Version)
			if err := deleteRecords(cfg, revisions); err != nil {
				return Observation{}, newError(op, namespace, name, err)
			}
		} else {
			log.Info("Uninstalling release before installing it again", "revision", latest.Version, "status", latest.Info.Status)
			if err := uninstall(cfg, name); err != nil {
				return Observation{}, newError(op, namespace, name, fmt.Errorf("failed to uninstall before installing again: %w", err))
			}
		}
		latest = nil
	}

	hash := hashValues(values)
	var out ri.Releaser
	if latest == nil {
		if len(moving) > 0 {
			// Never read: installing adopts the objects the records' release made.
			log.Info("Installing release into its storage namespace, adopting its objects; its records in the release namespace are not read", "storage", rel.Storage, "records", len(moving))
		}
		log.V(1).Info("Installing release", "chartVersion", ch.Metadata.Version)
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace = name, namespace
		in.CreateNamespace, in.Timeout = false, hookTimeout
		in.WaitStrategy = helmkube.HookOnlyStrategy // hooks only: workloads are never waited for
		in.ServerSideApply, in.ForceConflicts = true, true
		in.Labels = map[string]string{valuesHashLabel: hash}
		// Run, not RunWithContext: the latter returns on cancellation while the
		// install goes on in the background, outside the namespace's lock.
		if out, err = in.Run(ch, values); err != nil {
			return Observation{}, newError("install", namespace, name, err)
		}
	} else {
		log.V(1).Info("Upgrading release", "revision", latest.Version, "chartVersion", ch.Metadata.Version)
		up := action.NewUpgrade(cfg)
		up.Namespace = namespace
		up.WaitStrategy, up.Timeout, up.MaxHistory = helmkube.HookOnlyStrategy, hookTimeout, maxHistory
		// Server-side apply always, also for a revision made with client-side apply (by Helm 3,
		// whose records carry no apply method: Helm 4's "auto" would keep client-side apply for
		// them). Helm then moves the fields its client-side manager owned to its apply manager
		// (pkg/action/upgrade.go releasingUpgrade, ClientUpdateOptionUpgradeClientSideFieldManager),
		// so fields the chart no longer sets are removed, as Helm 3's three-way merge did.
		up.ServerSideApply, up.ForceConflicts = "true", true
		up.ResetValues = true // values are the complete desired state, never merged with older ones
		up.Labels = map[string]string{valuesHashLabel: hash}
		if out, err = up.Run(name, ch, values); err != nil {
			return Observation{}, newError("upgrade", namespace, name, err)
		}
	}
	// Records in the release namespace are deleted once the release lives in its storage; none
	// to delete when there were none a moment ago, before the install wrote the first objects.
	if !listed || len(moving) > 0 {
		if err := c.deleteNamespaceRecords(ctx, rel); err != nil {
			return Observation{}, newError(op, namespace, name, err)
		}
	}
	made, err := v1Release(out)
	if err != nil {
		return Observation{}, newError(op, namespace, name, err)
	}
	return observation(made, hash), nil
}

// Uninstall implements Client.
func (c *SDKClient) Uninstall(ctx context.Context, rel Release) error {
	const op = "uninstall"
	cfg, unlock, err := c.enter(ctx, rel)
	if err != nil {
		return newError(op, rel.Namespace, rel.Name, err)
	}
	defer unlock()

	gone := false
	if rel.separate() {
		// Without its namespace a release has no objects left, and nothing there to delete them with.
		_, err := c.clientset.CoreV1().Namespaces().Get(ctx, rel.Namespace, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone = true
		case err != nil:
			return newError(op, rel.Namespace, rel.Name, fmt.Errorf("failed to get the release namespace: %w", err))
		}
	}
	latest, revisions, err := history(cfg, rel.Name)
	switch {
	case err != nil:
	case latest != nil && gone:
		err = deleteRecords(cfg, revisions)
	case latest != nil:
		c.logger(ctx).V(1).Info("Uninstalling release", "namespace", rel.Namespace, "release", rel.Name, "revision", latest.Version)
		err = uninstall(cfg, rel.Name)
	}
	if err == nil && !gone {
		err = c.deleteNamespaceRecords(ctx, rel)
	}
	if err != nil {
		return newError(op, rel.Namespace, rel.Name, err)
	}
	return nil
}

// recordPrefix is the name prefix of release name's records (Helm's secrets driver names them
// sh.helm.release.v1.<name>.v<revision>, pkg/storage/storage.go makeKey).
func recordPrefix(name string) string { return "sh.helm.release.v1." + name + ".v" }

// recordSelector selects the records of release name (the labels Helm's secrets driver puts on
// them, pkg/storage/driver/secrets.go newSecretsObject).
func recordSelector(name string) string { return "owner=helm,name=" + name }

// namespaceRecords lists rel's records in its release namespace when its storage is another
// namespace (see Release.Storage): Secrets of Helm's type, name and labels for the release. It
// never decodes one.
func (c *SDKClient) namespaceRecords(ctx context.Context, rel Release) ([]corev1.Secret, error) {
	if !rel.separate() {
		return nil, nil
	}
	list, err := c.clientset.CoreV1().Secrets(rel.Namespace).List(ctx, metav1.ListOptions{LabelSelector: recordSelector(rel.Name)})
	if err != nil {
		return nil, fmt.Errorf("failed to list release records in the release namespace: %w", err)
	}
	var out []corev1.Secret
	for _, s := range list.Items {
		if s.Type == releaseSecretType && strings.HasPrefix(s.Name, recordPrefix(rel.Name)) {
			out = append(out, s)
		}
	}
	return out, nil
}

// deleteNamespaceRecords deletes, unread, rel's records in its release namespace when its storage
// is another namespace: the release lives in its storage namespace.
func (c *SDKClient) deleteNamespaceRecords(ctx context.Context, rel Release) error {
	records, err := c.namespaceRecords(ctx, rel)
	if err != nil {
		return err
	}
	for _, s := range records {
		err := c.clientset.CoreV1().Secrets(rel.Namespace).Delete(ctx, s.Name, *metav1.NewPreconditionDeleteOptions(string(s.UID)))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("failed to delete release record %s from the release namespace: %w", s.Name, err)
		}
	}
	return nil
}

// deleteRecords deletes the given revisions of a release from its storage, and nothing else.
func deleteRecords(cfg *action.Configuration, revisions []*release.Release) error {
	for _, r := range revisions {
		if _, err := cfg.Releases.Delete(r.Name, r.Version); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			return fmt.Errorf("failed to delete release record of revision %d: %w", r.Version, err)
		}
	}
	return nil
}

// enter locks rel's release namespace and returns a fresh Helm configuration for rel and the
// function that unlocks it. It fails when ctx is done before the lock is held.
func (c *SDKClient) enter(ctx context.Context, rel Release) (*action.Configuration, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	namespace := rel.Namespace
	unlock, err := c.namespaces.lock(ctx, namespace)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		unlock()
		return nil, nil, err
	}
	cfg, err := c.configuration(rel)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	if c.inNamespace != nil {
		done := c.inNamespace(namespace)
		return cfg, func() { done(); unlock() }, nil
	}
	return cfg, unlock, nil
}

// configuration returns a new Helm action configuration for rel, as
// action.Configuration.Init does (Secrets storage driver, a kube client in the
// release namespace) but on the shared factory and clientset, and with the
// storage driver in rel's storage namespace, and the backend's capabilities read
// at most once per capabilitiesTTL: it allocates a few small structs, no clients.
func (c *SDKClient) configuration(rel Release) (*action.Configuration, error) {
	caps, err := c.caps.get()
	if err != nil {
		return nil, err
	}
	// Helm logs through slog: its Info and Warn go to V(1), its Debug to V(5) (logr's slog
	// handler puts slog.LevelDebug at V(4) of the logger it is given), its errors as errors.
	log := logr.ToSlogHandler(c.opts.Log.WithValues("namespace", rel.Namespace).V(1))
	kc := &helmkube.Client{Factory: c.factory, Namespace: rel.Namespace}
	kc.SetLogger(log)
	secrets := driver.NewSecrets(c.clientset.CoreV1().Secrets(rel.storage()))
	secrets.SetLogger(log)
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(log))
	cfg.RESTClientGetter = c.getter.forNamespace(rel.Namespace)
	cfg.KubeClient = kubeClient{Client: kc, caps: c.caps}
	cfg.Capabilities = caps.Copy() // an action may add to its own
	cfg.Releases = storage.Init(secrets)
	cfg.HookOutputFunc = func(_, _, _ string) io.Writer { return io.Discard }
	return cfg, nil
}

// loadChart returns a fresh copy of the chart, loading it on first use.
func (c *SDKClient) loadChart(ctx context.Context) (*chart.Chart, error) {
	c.chartMu.Lock()
	archive := c.chart
	c.chartMu.Unlock()
	if archive == nil {
		var err error
		if archive, err = loadChartArchive(ctx, c.opts); err != nil {
			return nil, err
		}
		c.chartMu.Lock()
		c.chart = archive
		c.chartMu.Unlock()
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, newError("load chart "+c.opts.ChartRef, "", "", fmt.Errorf("%w: %w", errInvalidChart, err))
	}
	return ch, nil
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
	records, err := action.NewHistory(cfg).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("failed to get release history: %w", err)
	}
	revisions := make([]*release.Release, 0, len(records))
	for _, r := range records {
		v1, err := v1Release(r)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to get release history: %w", err)
		}
		revisions = append(revisions, v1)
	}
	var latest *release.Release
	for _, r := range revisions {
		if latest == nil || r.Version > latest.Version {
			latest = r
		}
	}
	return latest, revisions, nil
}

// v1Release returns r as the release record of chart API v2 that the secrets driver decodes and
// every action of this package makes (Helm 4 returns records as the untyped release.Releaser).
func v1Release(r ri.Releaser) (*release.Release, error) {
	switch rel := r.(type) {
	case *release.Release:
		return rel, nil
	case release.Release:
		return &rel, nil
	default:
		return nil, fmt.Errorf("unsupported release record type %T", r)
	}
}

// needsReinstall reports whether the release must be uninstalled before it
// can be installed again instead of upgraded: it is being (or was)
// uninstalled, or it failed without any revision ever being deployed.
func needsReinstall(latest *release.Release, revisions []*release.Release) bool {
	switch latest.Info.Status {
	case rcommon.StatusUninstalling, rcommon.StatusUninstalled:
		return true
	case rcommon.StatusFailed:
		for _, r := range revisions {
			if s := r.Info.Status; s == rcommon.StatusDeployed || s == rcommon.StatusSuperseded {
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
	un.WaitStrategy, un.Timeout = helmkube.HookOnlyStrategy, hookTimeout // hooks only: deletions are never waited for
	_, err := un.Run(name)
	return err
}

// observation summarises rel, the latest revision of a release or nil, for
// the desired values whose hashValues is wantHash.
func observation(rel *release.Release, wantHash string) Observation {
	if rel == nil {
		return Observation{}
	}
	o := Observation{Exists: true, Revision: rel.Version, State: StateUnknown}
	o.UpToDate = rel.Labels[valuesHashLabel] == wantHash
	if rel.Info != nil {
		o.State, o.Description = stateOf(rel.Info.Status), rel.Info.Description
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		o.ChartVersion = rel.Chart.Metadata.Version
	}
	return o
}

// stateOf maps a Helm release status to a State.
func stateOf(s rcommon.Status) State {
	switch s {
	case rcommon.StatusDeployed:
		return StateDeployed
	case rcommon.StatusFailed:
		return StateFailed
	case rcommon.StatusPendingInstall, rcommon.StatusPendingUpgrade, rcommon.StatusPendingRollback:
		return StatePending
	case rcommon.StatusUninstalling, rcommon.StatusUninstalled:
		return StateUninstalling
	default:
		return StateUnknown
	}
}

// hashValues returns a short stable hash of values (encoding/json sorts map
// keys); nil and empty values hash alike.
func hashValues(values map[string]any) string {
	if values == nil {
		values = map[string]any{}
	}
	raw, _ := json.Marshal(values)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:16]
}
