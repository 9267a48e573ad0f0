package flavorcatalog

import (
	"context"
	"errors"
	"time"

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
