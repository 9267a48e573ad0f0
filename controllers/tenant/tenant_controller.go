package tenant

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/kubeoperaapi"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"
)

const (
	// ControllerName names the controller, its field owner and its event reporter.
	ControllerName = "tenant-controller"
	// DefaultRequeueInterval is how often a Provisioning Tenant is polled (the seed's 15 s).
	DefaultRequeueInterval = 15 * time.Second
	// DefaultReadyRecheckInterval is how often a Ready Tenant is checked for drift (jittered).
	DefaultReadyRecheckInterval = 10 * time.Minute
)

// Reconciler drives Tenants through Pending -> Provisioning -> Ready (or Failed).
type Reconciler struct {
	// Manager gives access to the engaged workspaces.
	Manager mcmanager.Manager
	// Backend reads (uncached) and writes backend namespaces and Secrets.
	Backend workspaces.Backend
	// Helm installs vCluster releases on the backend.
	Helm helm.Client
	// API is the optional kubeopera-api callback client; nil or without base URL skips it.
	API *kubeoperaapi.Client
	// Environment is passed through to the Helm values as a label (ENVIRONMENT).
	Environment string
	// RequeueInterval is the poll interval while Provisioning; DefaultRequeueInterval when zero.
	RequeueInterval time.Duration
	// ClusterFilter selects the engaged clusters that serve Tenants (those of the kubeopera.io export).
	ClusterFilter mcbuilder.ClusterFilterFunc
	// ReadyRecheckInterval is how often a Ready Tenant's delivered kubeconfig is checked for drift;
	// DefaultReadyRecheckInterval when zero.
	ReadyRecheckInterval time.Duration

	// direct caches one uncached workspace client per engaged cluster, by cluster name.
	direct sync.Map
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	r.Manager = mgr
	if r.RequeueInterval == 0 {
		r.RequeueInterval = DefaultRequeueInterval
	}
	if r.ReadyRecheckInterval == 0 {
		r.ReadyRecheckInterval = DefaultReadyRecheckInterval
	}
	opts := []mcbuilder.ForOption{}
	if r.ClusterFilter != nil {
		opts = append(opts, mcbuilder.WithClusterFilter(r.ClusterFilter))
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named("tenant").
		For(&kov1alpha1.Tenant{}, opts...).
		Complete(r)
}

// scope carries what one reconcile pass knows; comments say which step sets each field.
type scope struct {
	// tenant is the object being reconciled (Reconcile).
	tenant *kov1alpha1.Tenant
	// logicalCluster is the tenant's workspace (Reconcile).
	logicalCluster string
	// ws is the cached workspace client for the Tenant itself (Reconcile).
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
	// owner identifies this Tenant on the backend objects it claims: "<namespace>/<name>" (Reconcile).
	owner string
}

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (res ctrl.Result, retErr error) {
	lc := workspaces.LogicalCluster(req.ClusterName)
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", lc, "tenant", klog.KRef(req.Namespace, req.Name))
	ctx = ctrl.LoggerInto(ctx, log)

	cl, err := r.Manager.GetCluster(ctx, req.ClusterName)
	if err != nil {
		if errors.Is(err, multicluster.ErrClusterNotFound) {
			// The workspace was disengaged (unbound or deleted) since the request was queued;
			// its backend state is the terminator's and the orphan sweep's business.
			log.V(1).Info("Workspace no longer engaged; dropping the request")
			r.direct.Delete(req.ClusterName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get cluster %s: %w", req.ClusterName, err)
	}
	t := &kov1alpha1.Tenant{}
	if err := cl.GetClient().Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s, err := r.newScope(req.ClusterName, cl, lc, t)
	if err != nil {
		return ctrl.Result{}, err
	}

	before := t.DeepCopy()
	log.V(1).Info("Reconciling Tenant", "phase", t.Status.Phase, "generation", t.Generation)
	defer func() {
		if before.Status.Phase != t.Status.Phase {
			log.Info("Tenant phase changed", "from", before.Status.Phase, "to", t.Status.Phase, "message", t.Status.Message)
		}
		switch err := patchStatus(ctx, s.ws, before, t, retErr); {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			// This pass worked from a stale copy; do it again from the current one.
			res = ctrl.Result{RequeueAfter: time.Second}
		default:
			retErr = errors.Join(retErr, err)
		}
		if retErr != nil {
			res = ctrl.Result{} // never an error together with RequeueAfter
		}
	}()

	if !t.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if !controllerutil.ContainsFinalizer(t, kov1alpha1.TenantFinalizer) {
		base := t.DeepCopy()
		controllerutil.AddFinalizer(t, kov1alpha1.TenantFinalizer)
		if err := s.ws.Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to add finalizer: %w", err)
		}
		// Keep the status snapshot in step with the new resourceVersion.
		before.ObjectMeta = *t.ObjectMeta.DeepCopy()
	}
	return r.reconcileNormal(ctx, s)
}

func (r *Reconciler) newScope(name multicluster.ClusterName, cl cluster.Cluster, lc string, t *kov1alpha1.Tenant) (*scope, error) {
	direct, err := r.directClient(name, cl)
	if err != nil {
		return nil, fmt.Errorf("failed to create workspace client: %w", err)
	}
	release := "vc-" + t.Spec.TenantName
	return &scope{
		tenant:           t,
		logicalCluster:   lc,
		ws:               cl.GetClient(),
		wsDirect:         direct,
		recorder:         cl.GetEventRecorder(ControllerName),
		releaseName:      release,
		hostNamespace:    workspaces.VClusterNamespace(lc, t.Spec.TenantName),
		storeNamespace:   workspaces.Namespace(lc),
		kubeconfigSecret: "tenant-" + t.Spec.CloudSpaceID + "-kubeconfig",
		owner:            "Tenant " + t.Namespace + "/" + t.Name,
	}, nil
}

// directClient returns the uncached workspace client of cl, built once per engaged cluster (and
// again when the workspace is engaged anew).
func (r *Reconciler) directClient(name multicluster.ClusterName, cl cluster.Cluster) (client.Client, error) {
	if e, ok := r.direct.Load(name); ok && e.(directEntry).cluster == cl {
		return e.(directEntry).client, nil
	}
	c, err := syncer.DirectClient(cl)
	if err != nil {
		return nil, err
	}
	r.direct.Store(name, directEntry{cluster: cl, client: c})
	return c, nil
}

// directEntry is a cached uncached client and the engaged cluster it was built for.
type directEntry struct {
	cluster cluster.Cluster
	client  client.Client
}

// patchStatus writes the status with one merge patch when it changed, guarded by the
// resourceVersion the pass started from, so a pass that read a stale copy cannot overwrite a newer
// status (an admin's phase reset, another pass). observedGeneration is bumped only when the pass
// succeeded or ended in a terminal failure the status explains.
func patchStatus(ctx context.Context, c client.Client, before, t *kov1alpha1.Tenant, passErr error) error {
	if passErr == nil || errors.Is(passErr, reconcile.TerminalError(nil)) {
		t.Status.ObservedGeneration = t.Generation
	}
	if equality.Semantic.DeepEqual(before.Status, t.Status) {
		return nil
	}
	if err := c.Status().Patch(ctx, t, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to patch status: %w", err)
	}
	return nil
}
