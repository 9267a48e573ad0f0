package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubeopera/kubeopera/syncer"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/kubeoperaapi"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

const (
	// ControllerName names the controller, its field owner and its event reporter.
	ControllerName = "tenant-controller"
	// DefaultRequeueInterval is how often a Provisioning Tenant is polled (the seed's 15 s).
	DefaultRequeueInterval = 15 * time.Second
	// DefaultReadyRecheckInterval is how often a Ready Tenant is checked for drift (jittered).
	DefaultReadyRecheckInterval = 10 * time.Minute
	// DefaultConcurrency is how many Tenants are reconciled at once, across all workspaces.
	DefaultConcurrency = 8
	// DefaultInstallConcurrency is how many Helm installs and upgrades run at once.
	DefaultInstallConcurrency = 4
)

// Limits are the platform admin's per-workspace limits on Tenants. Zero values mean no limit.
type Limits struct {
	// MaxTenants is how many Tenants one workspace may have.
	MaxTenants int
	// MaxCPU and MaxMemory bound the sum of the quotas of one workspace's Tenants.
	MaxCPU, MaxMemory resource.Quantity
}

// Reconciler drives Tenants through Pending -> Provisioning -> Ready (or Failed).
type Reconciler struct {
	// Workspaces serves every workspace bound to the kubeopera.io export: their cached and
	// uncached (Secrets are never cached) clients and event recorders, shared by all.
	Workspaces *apiexport.Provider
	// Backend reads (uncached) and writes backend namespaces and Secrets.
	Backend syncer.Backend
	// Helm installs vCluster releases on the backend.
	Helm helm.Client
	// API is the optional kubeopera-api callback client; nil or without base URL skips it.
	API *kubeoperaapi.Client
	// Environment is passed through to the Helm values as a label (ENVIRONMENT).
	Environment string
	// IngressClass, when set, lets vClusters sync Ingresses to the shared backend, of that class
	// only; empty keeps Ingress sync off.
	IngressClass string
	// Distro is the vCluster distro (vcluster.DistroK3s, the seed's, when empty).
	Distro string
	// ServiceCIDR is the backend's Service range, given to every vCluster (empty: vCluster
	// detects it).
	ServiceCIDR string
	// Exposure is how vClusters are reached from outside the backend: the delivered kubeconfig
	// names that endpoint (and the in-cluster one under a second key).
	Exposure vcluster.Exposure
	// ClaimsNamespace is the backend namespace holding cloudSpaceID claim records.
	ClaimsNamespace string
	// Claims reads the claim records' metadata from a cache (ClaimMetadata, the claims namespace,
	// label app.kubernetes.io/managed-by=tenant-controller): an admitted Tenant's pass checks its
	// claim there. nil: read from the backend at every pass.
	Claims client.Reader
	// Limits are the per-workspace limits.
	Limits Limits
	// RequeueInterval is the poll interval while Provisioning; DefaultRequeueInterval when zero.
	RequeueInterval time.Duration
	// ReadyRecheckInterval is how often a Ready Tenant is checked for drift;
	// DefaultReadyRecheckInterval when zero.
	ReadyRecheckInterval time.Duration
	// Concurrency is how many Tenants are reconciled at once; DefaultConcurrency when zero.
	Concurrency int
	// InstallConcurrency is how many Helm installs and upgrades run at once, outside the
	// reconcile workers; DefaultInstallConcurrency when zero.
	InstallConcurrency int
	// InstallsPerWorkspace bounds the installs and upgrades of one workspace running at once (0:
	// only InstallConcurrency), so one tenant's Tenants never hold every install slot.
	InstallsPerWorkspace int
	// InstallTimeout bounds one install or upgrade (reconcile.DefaultOperationTimeout when zero).
	InstallTimeout time.Duration
	// BackendWatcher watches the backend for the vCluster kubeconfig Secrets Tenants wait for
	// (their host namespace, the one name): nil, they are polled only.
	BackendWatcher client.WithWatch
	// MaxSecretWatches bounds those watches (256 when zero); beyond, Tenants are polled.
	MaxSecretWatches int

	// installs run Helm installs and upgrades; each one's end requeues its Tenant.
	installs *reconcile.Operations[mcreconcile.Request, helm.Observation]
	// arrivals watch for the vCluster kubeconfig Secrets Tenants wait for.
	arrivals *reconcile.Arrivals
	// kind is the Tenant described to the reconcile skeleton (SetupWithManager).
	kind *reconcile.Kind[*kov1alpha1.Tenant, *scope]
}

// SetupWithManager registers the controller with the workspaces' provider (apiexport.NewController:
// one handler per informer for all workspaces).
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	if r.Workspaces == nil {
		return errors.New("tenant controller needs the workspaces of the kubeopera.io export")
	}
	if r.RequeueInterval == 0 {
		r.RequeueInterval = DefaultRequeueInterval
	}
	if r.ReadyRecheckInterval == 0 {
		r.ReadyRecheckInterval = DefaultReadyRecheckInterval
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	if r.InstallConcurrency == 0 {
		r.InstallConcurrency = DefaultInstallConcurrency
	}
	// A Helm install takes about a second even with Wait=false; run in the reconcile workers it
	// would hold them from every other Tenant's quick pass.
	installs, installEnds, err := reconcile.NewOperations[helm.Observation](mgr, r.InstallConcurrency, r.InstallsPerWorkspace, r.InstallTimeout)
	if err != nil {
		return err
	}
	r.installs = installs
	// The vCluster writes its kubeconfig Secret seconds after its release is deployed: watched
	// (one name in one host namespace), so it is delivered at once; the poll stays the fallback.
	arrivals, arrived, err := reconcile.NewArrivals(mgr, r.BackendWatcher, r.MaxSecretWatches)
	if err != nil {
		return err
	}
	r.arrivals = arrivals
	r.kind = &reconcile.Kind[*kov1alpha1.Tenant, *scope]{
		Controller:   ControllerName,
		GVK:          kov1alpha1.GroupVersion.WithKind("Tenant"),
		Workspaces:   r.Workspaces,
		Backend:      r.Backend,
		Finalizer:    kov1alpha1.TenantFinalizer,
		New:          func() *kov1alpha1.Tenant { return &kov1alpha1.Tenant{} },
		Scope:        r.scope,
		Normal:       func(*kov1alpha1.Tenant) []reconcile.Step[*scope] { return r.normalSteps() },
		Delete:       func(*kov1alpha1.Tenant) []reconcile.Step[*scope] { return r.deleteSteps() },
		Phase:        phase,
		ReadyMessage: readyMessage,
		ReadyRequeue: func(*kov1alpha1.Tenant) time.Duration { return wait.Jitter(r.ReadyRecheckInterval, 0.2) },
		Namespaces: func(t *kov1alpha1.Tenant, lc string) []string {
			return []string{workspaces.VClusterNamespace(lc, t.Spec.TenantName)}
		},
	}
	return apiexport.NewController(mgr, "tenant", r.Workspaces, &kov1alpha1.Tenant{},
		mccontroller.Options{Reconciler: r.kind, MaxConcurrentReconciles: r.Concurrency}, r.kind.Watch(), installEnds, arrived)
}

// scope is what one reconcile pass knows of a Tenant, around the shared workspace↔backend Scope.
type scope struct {
	*reconcile.Scope
	// tenant is the object reconciled.
	tenant *kov1alpha1.Tenant
	// releaseName is vc-<tenantName>, hostNamespace kcp-<fp>-vc-<tenantName>.
	releaseName, hostNamespace string
	// kubeconfigSecret is tenant-<cloudSpaceID>-kubeconfig, stored in kcp-<fp> and delivered.
	kubeconfigSecret string
	// host is the vCluster's external host name with vcluster.ExposeIngress.
	host string
	// values are the vCluster Helm values.
	values map[string]any
}

// scope describes a Tenant to the shared Scope and builds its own around it.
func (r *Reconciler) scope(base *reconcile.Scope, t *kov1alpha1.Tenant) *scope {
	base.Labels = map[string]string{
		kov1alpha1.TenantIDLabel:  t.Spec.CloudSpaceID,
		kov1alpha1.ManagedByLabel: ControllerName,
	}
	base.NamedBy = fmt.Sprintf("cloudSpaceID %q", t.Spec.CloudSpaceID)
	base.Poll = r.RequeueInterval
	release := "vc-" + t.Spec.TenantName
	hostNamespace := workspaces.VClusterNamespace(base.LogicalCluster, t.Spec.TenantName)
	var host string
	if r.Exposure.Mode == vcluster.ExposeIngress {
		host = r.Exposure.Host(t.Spec.TenantName, workspaces.Fingerprint(base.LogicalCluster))
	}
	return &scope{
		Scope:            base,
		tenant:           t,
		releaseName:      release,
		hostNamespace:    hostNamespace,
		kubeconfigSecret: "tenant-" + t.Spec.CloudSpaceID + "-kubeconfig",
		host:             host,
		values: vcluster.Values(t, release, hostNamespace, host, vcluster.Options{
			Environment: r.Environment, IngressClass: r.IngressClass, Distro: r.Distro, Exposure: r.Exposure, ServiceCIDR: r.ServiceCIDR,
		}),
	}
}

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	return r.kind.Reconcile(ctx, req)
}
