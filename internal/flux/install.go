package flux

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/helm"
)

const (
	// Namespace is where Flux runs on a target, as `flux install` and `flux bootstrap` put it.
	Namespace = "flux-system"
	// ReleaseName is the Helm release of Flux in Namespace.
	ReleaseName = "flux2"

	// DefaultChartRef is the community Flux chart (github.com/fluxcd-community/helm-charts,
	// charts/flux2). No OCI registry is reachable in tests and the local dev environment: they
	// install the local chart hack/build-tools.sh assembles (_tools/charts/flux2) instead.
	DefaultChartRef = "oci://ghcr.io/fluxcd-community/charts/flux2"
	// DefaultChartVersion is the community chart's version used with DefaultChartRef: 2.19.1
	// (Flux v2.9.5), the newest release found on 2026-11-29 (fluxcd-community/helm-charts
	// pull request 293, merged 2026-09-19: "Chart versions: flux2 2.19.1").
	DefaultChartVersion = "2.19.1"

	// SourceController and KustomizeController are the Deployments (and ServiceAccounts) of the
	// two Flux controllers a sync needs, named as every Flux distribution names them.
	SourceController    = "source-controller"
	KustomizeController = "kustomize-controller"

	// PartOfLabel is the label, with value PartOfValue, that the community chart and `flux install`
	// put on every Flux object; CheckHealth finds Flux's Deployments by it.
	PartOfLabel = "app.kubernetes.io/part-of"
	PartOfValue = "flux"
)

// Options configure an Installer.
type Options struct {
	// ChartRef is the Flux chart: an OCI reference, an http(s) URL of a packaged chart, or a local
	// chart directory or .tgz. Empty means DefaultChartRef (at DefaultChartVersion).
	ChartRef string
	// ChartVersion is the version of a remote chart; empty selects the latest, or
	// DefaultChartVersion when ChartRef is empty too. Ignored for local charts.
	ChartVersion string
	// CacheDir is where downloaded charts are kept (see helm.Options.CacheDir).
	CacheDir string
	// Values are the chart's values for every target; nil means the chart's defaults.
	Values map[string]any
	// Log receives Helm's debug output; it is used when a call's context carries no logger.
	Log logr.Logger
}

// release is Flux's Helm release, its records in its own namespace (Helm's default).
var release = helm.Release{Namespace: Namespace, Name: ReleaseName}

// Installer installs Flux on target clusters with the Helm SDK. One Installer serves a whole
// manager: the chart is located and loaded once, on the first install, and shared by every
// target; everything per target (clients, connections) lives only for one call.
type Installer struct {
	chart  *helm.SharedChart
	values map[string]any
	scheme *runtime.Scheme
}

// NewInstaller returns an Installer for opts. It loads nothing and contacts nobody.
func NewInstaller(opts Options) (*Installer, error) {
	if opts.ChartRef == "" {
		opts.ChartRef = DefaultChartRef
		if opts.ChartVersion == "" {
			opts.ChartVersion = DefaultChartVersion
		}
	}
	chart, err := helm.NewSharedChart(helm.Options{
		ChartRef: opts.ChartRef, ChartVersion: opts.ChartVersion, CacheDir: opts.CacheDir, Log: opts.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the Flux installer: %w", err)
	}
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := appsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	values := opts.Values
	if values == nil {
		values = map[string]any{}
	}
	return &Installer{chart: chart, values: values, scheme: s}, nil
}

// Result is what Ensure did.
type Result struct {
	// Adopted is true when Flux was already running in Namespace, installed by someone else, and
	// was left as it is: nothing was installed.
	Adopted bool
	// Revision is the revision of release ReleaseName (0 when Adopted).
	Revision int
	// ChartVersion is the version of the chart the release was made from ("" when Adopted).
	ChartVersion string
	// Message says what happened, for a condition or an event.
	Message string
}

// Ensure installs Flux on the cluster of target into Namespace, or adopts a Flux already there.
//
//   - Release ReleaseName exists in Namespace and was made by this package (internal/helm labels
//     its releases): it is ours. Deployed with the same values (and, for a pinned remote chart,
//     the same chart version), Ensure is a no-op; otherwise it is upgraded (or its interrupted or
//     failed install is recovered, see helm.SDKClient).
//   - Otherwise, when Flux's controllers (Deployments SourceController and KustomizeController)
//     exist in Namespace, Flux was installed by someone else (`flux install`, `flux bootstrap`,
//     a Helm release of theirs): when CheckHealth finds it healthy it is adopted as it is
//     (Adopted, nothing written); when not, Ensure fails with a transient error and installs
//     nothing over it (Helm would refuse to take over its objects anyway).
//   - Otherwise Flux is installed: the namespace is created when missing, then the chart.
//
// Ensure never waits for workloads; CheckHealth says when Flux runs. Errors say what failed;
// those of Helm are (or wrap) a *helm.Error, and its Terminal method (reconcile.IsTerminal) tells the ones retrying cannot
// fix (the chart does not exist or does not render with Values) from transient ones. Every other
// error is transient.
func (i *Installer) Ensure(ctx context.Context, target *rest.Config) (Result, error) {
	if target == nil {
		return Result{}, fmt.Errorf("failed to ensure Flux: target rest config is nil")
	}
	c, err := client.New(target, client.Options{Scheme: i.scheme})
	if err != nil {
		return Result{}, fmt.Errorf("failed to create a client for the target: %w", err)
	}
	hc, err := i.chart.Client(target)
	if err != nil {
		return Result{}, fmt.Errorf("failed to create a Helm client for the target: %w", err)
	}

	obs, err := hc.Observe(ctx, release, i.values)
	if err != nil {
		return Result{}, fmt.Errorf("failed to read Flux's Helm release: %w", err)
	}
	ours := false
	if obs.Exists {
		if ours, err = hc.Managed(ctx, release); err != nil {
			return Result{}, fmt.Errorf("failed to read Flux's Helm release: %w", err)
		}
	}
	if ours && obs.State == helm.StateDeployed && obs.UpToDate && i.chartVersionMatches(obs.ChartVersion) {
		return Result{Revision: obs.Revision, ChartVersion: obs.ChartVersion,
			Message: fmt.Sprintf("Flux release %s/%s revision %d (chart %s) is deployed and up to date", Namespace, ReleaseName, obs.Revision, obs.ChartVersion)}, nil
	}

	if !ours {
		found, err := controllersExist(ctx, c)
		if err != nil {
			return Result{}, err
		}
		if found || obs.Exists {
			h, err := CheckHealth(ctx, c)
			if err != nil {
				return Result{}, err
			}
			by := "not installed by KubeOpera"
			if obs.Exists {
				by = fmt.Sprintf("Helm release %s/%s was not installed by KubeOpera", Namespace, ReleaseName)
			}
			if !h.Healthy {
				return Result{}, fmt.Errorf("flux found in %s (%s) is not healthy (%s): not installing over it", Namespace, by, h.Message)
			}
			return Result{Adopted: true,
				Message: fmt.Sprintf("Adopted the Flux already running in %s (%s): %s", Namespace, by, h.Message)}, nil
		}
		if err := ensureNamespace(ctx, c); err != nil {
			return Result{}, err
		}
	}

	verb := "Installed"
	if obs.Exists {
		verb = "Upgraded"
	}
	obs, err = hc.InstallOrUpgrade(ctx, release, i.values)
	if err != nil {
		return Result{}, fmt.Errorf("failed to install Flux: %w", err)
	}
	return Result{Revision: obs.Revision, ChartVersion: obs.ChartVersion,
		Message: fmt.Sprintf("%s Flux: release %s/%s revision %d (chart %s)", verb, Namespace, ReleaseName, obs.Revision, obs.ChartVersion)}, nil
}

// chartVersionMatches reports whether a release made from chart version v needs no upgrade for
// the chart version: always for a local chart or an unpinned remote one (their version is only
// known after a load, which a no-op must not need), else when v is the pinned version.
func (i *Installer) chartVersionMatches(v string) bool {
	opts := i.chart.Options()
	if helm.IsLocalChart(opts.ChartRef) || opts.ChartVersion == "" {
		return true
	}
	return strings.TrimPrefix(v, "v") == strings.TrimPrefix(opts.ChartVersion, "v")
}

// controllersExist reports whether either Flux controller's Deployment exists in Namespace.
func controllersExist(ctx context.Context, c client.Client) (bool, error) {
	for _, name := range []string{SourceController, KustomizeController} {
		err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, &appsv1.Deployment{})
		switch {
		case err == nil:
			return true, nil
		case !apierrors.IsNotFound(err):
			return false, fmt.Errorf("failed to read Deployment %s/%s: %w", Namespace, name, err)
		}
	}
	return false, nil
}

// ensureNamespace creates Namespace unless it exists; one being deleted is a transient error.
func ensureNamespace(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: Namespace}, ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create namespace %s: %w", Namespace, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to read namespace %s: %w", Namespace, err)
	case ns.DeletionTimestamp != nil:
		return fmt.Errorf("namespace %s is being deleted; Flux is installed once it is gone", Namespace)
	}
	return nil
}
