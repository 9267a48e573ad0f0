package reconcile

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kubeopera/kubeopera/syncer"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

// Kind is one reconciled kind, described to the skeleton: how its objects are read, what its
// scope is, its steps and its state machine. Its Reconcile is the controller's: it reads the
// object from its workspace, builds the shared Scope and the kind's scope around it, and runs one
// Pass. A controller keeps only its domain steps.
type Kind[O Object, S any] struct {
	// Controller names the controller: its field owner and event reporter.
	Controller string
	// GVK is the kind reconciled.
	GVK schema.GroupVersionKind
	// Workspaces serves every workspace bound to the kind's export.
	Workspaces *apiexport.Provider
	// Backend reads (uncached) and writes the backend cluster.
	Backend syncer.Backend
	// Finalizer is the kind's finalizer.
	Finalizer string
	// New returns an empty object of the kind.
	New func() O
	// Scope describes the object to the shared Scope (Owner is set already; Labels, NamedBy and
	// Poll are the kind's) and returns the kind's scope, which embeds it.
	Scope func(base *Scope, obj O) S
	// Normal and Delete return the steps of reconcileNormal and reconcileDelete for obj.
	Normal, Delete func(obj O) []Step[S]
	// Phase is the kind's state machine (see Pass.Phase).
	Phase func(obj O, at string) string
	// PublishPhases writes every phase as it is entered (see Pass.PublishPhases).
	PublishPhases bool
	// ReadyMessage says what is ready once every step is done.
	ReadyMessage func(obj O) string
	// ReadyRequeue, if set, returns the (jittered) interval after which a Ready object is checked
	// for drift.
	ReadyRequeue func(obj O) time.Duration
	// OwnAnnotations are the annotations the steps write on the object (a job's ID, when a wait
	// began): a change of one of them alone wakes no pass (Watch).
	OwnAnnotations []string
}

// Watch is how the controller watches its own kind (give it to apiexport.NewController): an
// update is queued only when it carries something a pass acts on (Changed), so the controller's
// own status, finalizer and annotation writes do not wake it again: the pass that wrote them
// already returned what should happen next.
func (k *Kind[O, S]) Watch() apiexport.Watch {
	return apiexport.Watch{Object: k.New(), Updates: k.Changed}
}

// Changed reports whether an update of one of the kind's objects carries anything a pass acts
// on: a new generation (the spec), a deletion, the kind's finalizer taken away, other labels or
// annotations (the retry annotation among them; not OwnAnnotations), or the phase set back to
// Pending (an admin's retry, docs/architecture.md). Any other change is the manager's own
// status write.
func (k *Kind[O, S]) Changed(oldObj, newObj client.Object) bool {
	o, ok1 := oldObj.(Object)
	n, ok2 := newObj.(Object)
	if !ok1 || !ok2 {
		return true
	}
	ownAnnotation := func(key string) bool { return slices.Contains(k.OwnAnnotations, key) }
	switch {
	case o.GetGeneration() != n.GetGeneration(),
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()),
		controllerutil.ContainsFinalizer(o, k.Finalizer) && !controllerutil.ContainsFinalizer(n, k.Finalizer),
		!maps.Equal(o.GetLabels(), n.GetLabels()),
		!maps.EqualFunc(withoutKeys(o.GetAnnotations(), ownAnnotation), withoutKeys(n.GetAnnotations(), ownAnnotation), func(a, b string) bool { return a == b }),
		phaseOf(n) == PhasePending && phaseOf(o) != PhasePending:
		return true
	}
	return false
}

// withoutKeys is m without the keys drop says to drop.
func withoutKeys(m map[string]string, drop func(string) bool) map[string]string {
	out := make(map[string]string, len(m))
	for key, v := range m {
		if !drop(key) {
			out[key] = v
		}
	}
	return out
}

// Reconcile implements mcreconcile.Reconciler for the kind.
func (k *Kind[O, S]) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	ctx, log := RequestLogger(ctx, req, k.GVK.Kind)
	obj := k.New()
	ws, found, err := k.Workspaces.Read(ctx, req, obj)
	if !found {
		if err == nil {
			log.V(1).Info("Workspace unbound or object gone; dropping the request")
		}
		return ctrl.Result{}, err
	}
	base := &Scope{
		Request:        req,
		Object:         obj,
		GVK:            k.GVK,
		LogicalCluster: ws.LogicalCluster,
		Workspace:      ws.Client(),
		Direct:         ws.Direct(),
		Recorder:       ws.Recorder(k.Controller),
		Backend:        k.Backend,
		Namespace:      workspaces.Namespace(ws.LogicalCluster),
		Owner:          k.GVK.Kind + " " + obj.GetNamespace() + "/" + obj.GetName(),
	}
	s := k.Scope(base, obj)
	log.V(1).Info("Reconciling "+k.GVK.Kind, "phase", phaseOf(obj), "generation", obj.GetGeneration())
	p := Pass[S]{
		Client:        base.Workspace,
		Object:        obj,
		Scope:         s,
		Finalizer:     k.Finalizer,
		Normal:        k.Normal(obj),
		Delete:        k.Delete(obj),
		Recorder:      base.Recorder,
		PublishPhases: k.PublishPhases,
	}
	if k.ReadyRequeue != nil {
		p.ReadyRequeue = func() time.Duration { return k.ReadyRequeue(obj) }
	}
	if k.Phase != nil {
		p.Phase = func(o Object, at string) string { return k.Phase(o.(O), at) }
	}
	if k.ReadyMessage != nil {
		p.ReadyMessage = func(S) string { return k.ReadyMessage(obj) }
	}
	return p.Run(ctx)
}
