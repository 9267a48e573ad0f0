package flavorcatalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

const (
	// ControllerName names the controller and its field owner.
	ControllerName = "flavorcatalog"
	// DefaultConcurrency is how many copies are written at once, across all workspaces.
	DefaultConcurrency = 4
	// CatalogLabel marks a workspace's ProviderMachineFlavor as the platform catalog's copy; only
	// such copies are updated or removed.
	CatalogLabel = "platform.edgeconnect.eu/catalog"
)

// Reconciler keeps every bound workspace's copy of the catalog.
type Reconciler struct {
	// Workspaces serves every workspace bound to the platform.edgeconnect.eu export.
	Workspaces *apiexport.Provider
	// Catalog reads the platform workspace's ProviderMachineFlavors (a cache on it, started by
	// the manager).
	Catalog cache.Cache
	// Concurrency is how many copies are written at once; DefaultConcurrency when zero.
	Concurrency int

	trigger *apiexport.Trigger
}

// SetupWithManager registers the controller: copies are watched through the export, the
// catalog through its own informer, and every newly bound workspace gets the whole catalog.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr mcmanager.Manager) error {
	if r.Workspaces == nil || r.Catalog == nil {
		return errors.New("catalog controller needs the platform export's workspaces and the catalog cache")
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	r.trigger = &apiexport.Trigger{}
	// The catalog's kind may not be served yet when the manager starts (its CRD was just applied):
	// the watch is set up by a runnable that retries until it is.
	if err := mgr.GetLocalManager().Add(manager.RunnableFunc(r.watchCatalog)); err != nil {
		return err
	}
	r.Workspaces.WhenEngaged(func(lc string) {
		// Not in the provider's goroutine: the list may wait for the catalog's cache to sync.
		go func() {
			list := &platformv1alpha1.ProviderMachineFlavorList{}
			if err := r.Catalog.List(context.Background(), list); err != nil {
				return // not watched yet: once it is, its events reach every engaged workspace
			}
			for _, f := range list.Items {
				r.enqueue(lc, f.Name)
			}
		}()
	})
	return apiexport.NewController(mgr, ControllerName, r.Workspaces, &platformv1alpha1.ProviderMachineFlavor{},
		mccontroller.Options{Reconciler: r, MaxConcurrentReconciles: r.Concurrency}, apiexport.Watch{Trigger: r.trigger})
}

// watchCatalog sets up the catalog's informer, retrying with backoff until the kind is served,
// and fans every change out to every engaged workspace.
func (r *Reconciler) watchCatalog(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName(ControllerName)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 100, Cap: 30 * time.Second}
	var inf cache.Informer
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		var err error
		inf, err = r.Catalog.GetInformer(ctx, &platformv1alpha1.ProviderMachineFlavor{}, cache.BlockUntilSynced(false))
		if err != nil {
			log.Info("The catalog cannot be watched yet; retrying", "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil // the context ended
	}
	fanOut := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if f, ok := obj.(client.Object); ok {
			for _, lc := range r.Workspaces.EngagedWorkspaces() {
				r.enqueue(lc, f.GetName())
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    fanOut,
		UpdateFunc: func(_, obj any) { fanOut(obj) },
		DeleteFunc: fanOut,
	}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func (r *Reconciler) enqueue(lc, name string) {
	r.trigger.Enqueue(mcreconcile.Request{ClusterName: r.Workspaces.ClusterName(lc), Request: ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}})
}

// Reconcile makes one workspace's copy of one flavor match the catalog: created or updated when
// the catalog has it, deleted when it does not. A flavor of the same name that is not a catalog
// copy is left alone.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	ctx, log := reconcile.RequestLogger(ctx, req, "ProviderMachineFlavor")
	ws, ok := r.Workspaces.Workspace(req.ClusterName)
	if !ok {
		return ctrl.Result{}, nil
	}
	want := &platformv1alpha1.ProviderMachineFlavor{}
	err := r.Catalog.Get(ctx, client.ObjectKey{Name: req.Name}, want)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to read the catalog: %w", err)
	}
	inCatalog := err == nil
	c := ws.Client()
	cur := &platformv1alpha1.ProviderMachineFlavor{}
	err = c.Get(ctx, client.ObjectKey{Name: req.Name}, cur)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	switch {
	case !inCatalog && exists && cur.Labels[CatalogLabel] == "true":
		log.Info("Flavor left the catalog; removing the workspace's copy")
		return ctrl.Result{}, client.IgnoreNotFound(c.Delete(ctx, cur))
	case !inCatalog:
		return ctrl.Result{}, nil
	case !exists:
		cp := &platformv1alpha1.ProviderMachineFlavor{
			ObjectMeta: metav1.ObjectMeta{Name: want.Name, Labels: copyLabels(want), Annotations: want.Annotations},
			Spec:       want.Spec,
		}
		log.V(1).Info("Publishing a catalog flavor to the workspace")
		err := c.Create(ctx, cp)
		if apierrors.IsMethodNotSupported(err) {
			// kcp refuses creates while the workspace is being deleted ("create not allowed
			// while custom resource definition is terminating"): nothing to publish to.
			log.V(1).Info("The workspace is being deleted; not publishing")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, client.IgnoreAlreadyExists(err)
	case cur.Labels[CatalogLabel] != "true":
		log.Info("A flavor of the catalog's name exists in the workspace and is not the catalog's; leaving it")
		return ctrl.Result{}, nil
	case equality.Semantic.DeepEqual(cur.Spec, want.Spec) && maps.Equal(cur.Labels, copyLabels(want)):
		return ctrl.Result{}, nil
	}
	before := cur.DeepCopy()
	cur.Spec, cur.Labels = want.Spec, copyLabels(want)
	log.V(1).Info("Updating the workspace's copy of a catalog flavor")
	return ctrl.Result{}, c.Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func copyLabels(f *platformv1alpha1.ProviderMachineFlavor) map[string]string {
	l := maps.Clone(f.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[CatalogLabel] = "true"
	return l
}
