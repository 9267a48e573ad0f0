package machinecapabilities

import (
	"context"
	"errors"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

// ControllerName names the controller and its event reporter.
const ControllerName = "machinecapabilities-controller"

// finalizer is the MachineCapabilities' finalizer; it holds nothing outside the object, so its
// delete steps are empty.
const finalizer = "platform.edgeconnect.eu/machinecapabilities"

// DefaultConcurrency is how many MachineCapabilities are matched at once, across all workspaces.
const DefaultConcurrency = 4

// noMatchRecheck is how often a MachineCapabilities without a match is matched again, besides
// every change of the catalog.
const noMatchRecheck = 10 * time.Minute

// Reconciler matches MachineCapabilities to the catalog.
type Reconciler struct {
	// Workspaces serves every workspace bound to the platform.edgeconnect.eu export.
	Workspaces *apiexport.Provider
	// Concurrency is how many MachineCapabilities are matched at once; DefaultConcurrency when
	// zero.
	Concurrency int

	// kind is the MachineCapabilities described to the reconcile skeleton (SetupWithManager).
	kind *reconcile.Kind[*platformv1alpha1.MachineCapabilities, *scope]
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	if r.Workspaces == nil {
		return errors.New("machinecapabilities controller needs the platform export's workspaces")
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	r.kind = &reconcile.Kind[*platformv1alpha1.MachineCapabilities, *scope]{
		Controller: ControllerName,
		GVK:        platformv1alpha1.GroupVersion.WithKind("MachineCapabilities"),
		Workspaces: r.Workspaces,
		Finalizer:  finalizer,
		New:        func() *platformv1alpha1.MachineCapabilities { return &platformv1alpha1.MachineCapabilities{} },
		Scope: func(base *reconcile.Scope, mc *platformv1alpha1.MachineCapabilities) *scope {
			return &scope{Scope: base, mc: mc}
		},
		Normal: func(*platformv1alpha1.MachineCapabilities) []reconcile.Step[*scope] {
			return []reconcile.Step[*scope]{{Name: "match the catalog", Condition: platformv1alpha1.FlavorMatchedCondition, Run: match}}
		},
		Delete:       func(*platformv1alpha1.MachineCapabilities) []reconcile.Step[*scope] { return nil },
		ReadyMessage: readyMessage,
	}
	return apiexport.NewController(mgr, "machinecapabilities", r.Workspaces, &platformv1alpha1.MachineCapabilities{},
		mccontroller.Options{Reconciler: r.kind, MaxConcurrentReconciles: r.Concurrency}, r.kind.Watch(),
		apiexport.Watch{Object: &platformv1alpha1.ProviderMachineFlavor{}, Map: r.allOfWorkspace})
}

// allOfWorkspace maps a flavor of a workspace's catalog to every MachineCapabilities there.
func (r *Reconciler) allOfWorkspace(obj client.Object) []types.NamespacedName {
	ws, ok := r.Workspaces.Workspace(r.Workspaces.ClusterName(logicalcluster.From(obj).String()))
	if !ok {
		return nil
	}
	list := &platformv1alpha1.MachineCapabilitiesList{}
	if err := ws.Client().List(context.Background(), list); err != nil {
		return nil
	}
	out := make([]types.NamespacedName, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, types.NamespacedName{Namespace: m.Namespace, Name: m.Name})
	}
	return out
}

// scope is what one reconcile pass knows of a MachineCapabilities: the shared Scope (it writes
// nothing on the backend) and the object.
type scope struct {
	*reconcile.Scope
	mc *platformv1alpha1.MachineCapabilities
}

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	return r.kind.Reconcile(ctx, req)
}
