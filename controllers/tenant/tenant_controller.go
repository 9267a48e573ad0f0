package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/fleet"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/kubeoperaapi"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces"
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
	Workspaces *fleet.Provider
	// Backend reads (uncached) and writes backend namespaces and Secrets.
	Backend workspaces.Backend
	// Helm installs vCluster releases on the backend.
	Helm helm.Client
	// API is the optional kubeopera-api callback client; nil or without base URL skips it.
	API *kubeoperaapi.Client
	// Environment is passed through to the Helm values as a label (ENVIRONMENT).
	Environment string
	// IngressClass, when set, lets vClusters sync Ingresses to the shared backend, of that class
	// only; empty keeps Ingress sync off.
	IngressClass string
	// ClaimsNamespace is the backend namespace holding cloudSpaceID claim records.
	ClaimsNamespace string
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

	// installs run Helm installs and upgrades; each one's end requeues its Tenant (trigger).
	installs *reconcile.Operations[mcreconcile.Request, helm.Observation]
	trigger  *fleet.Trigger
}

// SetupWithManager registers the controller with the workspaces' provider (fleet.NewController:
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
	r.trigger = &fleet.Trigger{}
	r.installs = &reconcile.Operations[mcreconcile.Request, helm.Observation]{
		Limit: r.InstallConcurrency, PerWorkspace: r.InstallsPerWorkspace, Workspace: reconcile.RequestWorkspace,
		Timeout: r.InstallTimeout, Done: r.trigger.Enqueue,
	}
	if err := mgr.GetLocalManager().Add(r.installs); err != nil {
		return err
	}
	return fleet.NewController(mgr, "tenant", r.Workspaces, &kov1alpha1.Tenant{},
		mccontroller.Options{Reconciler: r, MaxConcurrentReconciles: r.Concurrency}, fleet.Watch{Trigger: r.trigger})
}

// scope carries what one reconcile pass knows; comments say which step sets each field.
type scope struct {
	// req is the request being reconciled (Reconcile).
	req mcreconcile.Request
	// tenant is the object being reconciled (Reconcile).
	tenant *kov1alpha1.Tenant
	// logicalCluster is the tenant's workspace (Reconcile).
	logicalCluster string
	// ws is the cached workspace client for Tenants (Reconcile).
	ws client.Client
	// wsDirect is the uncached workspace client for Secrets (Reconcile).
	wsDirect client.Client
	// recorder emits events into the tenant's workspace (Reconcile).
	recorder events.EventRecorder
	// releaseName is vc-<tenantName> and hostNamespace kcp-<fp>-vc-<tenantName> (Reconcile).
	releaseName, hostNamespace string
	// storeNamespace is kcp-<fp>, where the kubeconfig Secret is stored (Reconcile).
	storeNamespace string
	// kubeconfigSecret is tenant-<cloudSpaceID>-kubeconfig (Reconcile).
	kubeconfigSecret string
	// owner identifies this Tenant on the backend objects it claims: "Tenant <namespace>/<name>" (Reconcile).
	owner string
	// values are the vCluster Helm values (Reconcile).
	values map[string]any
}

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	ctx, log := reconcile.RequestLogger(ctx, req, "Tenant")
	t := &kov1alpha1.Tenant{}
	ws, found, err := r.Workspaces.Read(ctx, req, t)
	if !found {
		if err == nil {
			log.V(1).Info("Workspace unbound or object gone; dropping the request")
		}
		return ctrl.Result{}, err
	}
	lc := ws.LogicalCluster
	release := "vc-" + t.Spec.TenantName
	hostNamespace := workspaces.VClusterNamespace(lc, t.Spec.TenantName)
	s := &scope{
		req:              req,
		tenant:           t,
		logicalCluster:   lc,
		ws:               ws.Client(),
		wsDirect:         ws.Direct(),
		recorder:         ws.Recorder(ControllerName),
		releaseName:      release,
		hostNamespace:    hostNamespace,
		storeNamespace:   workspaces.Namespace(lc),
		kubeconfigSecret: "tenant-" + t.Spec.CloudSpaceID + "-kubeconfig",
		owner:            "Tenant " + t.Namespace + "/" + t.Name,
		values:           vclusterValues(t, release, hostNamespace, r.Environment, r.IngressClass),
	}
	log.V(1).Info("Reconciling Tenant", "phase", t.Status.Phase, "generation", t.Generation)
	return reconcile.Pass[*scope]{
		Client:    s.ws,
		Object:    t,
		Scope:     s,
		Finalizer: kov1alpha1.TenantFinalizer,
		Normal:    r.normalSteps(),
		Delete:    r.deleteSteps(),
		Recorder:  s.recorder,
		ReadyMessage: func(s *scope) string {
			return fmt.Sprintf("vCluster %s is ready; kubeconfig in Secret %s", s.releaseName, s.kubeconfigSecret)
		},
		ReadyRequeue: func() time.Duration { return wait.Jitter(r.ReadyRecheckInterval, 0.2) },
	}.Run(ctx)
}
