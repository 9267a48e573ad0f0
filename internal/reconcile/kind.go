package reconcile

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/kubeopera/kubeopera/syncer"

	"github.com/kcp-dev/logicalcluster/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
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
	// Namespaces, if set, returns the backend namespaces a Ready object has besides kcp-<fp> of
	// its workspace (logicalCluster): one missing at a cold start makes it due at once (Settled).
	Namespaces func(obj O, logicalCluster string) []string

	// namespacesUnavailable is when (Unix nanoseconds) Settled may ask the namespaces' cache
	// again after it could not answer.
	namespacesUnavailable atomic.Int64
}

// settledCheckTimeout bounds the wait for the backend namespaces' cache in Settled.
const settledCheckTimeout = 10 * time.Second

// Watch is how the controller watches its own kind (give it to apiexport.NewController): an
// update is queued only when it carries something a pass acts on (Changed), so the controller's
// own status, finalizer and annotation writes do not wake it again: the pass that wrote them
// already returned what should happen next.
func (k *Kind[O, S]) Watch() apiexport.Watch {
	return apiexport.Watch{Object: k.New(), Updates: k.Changed, Settled: k.Settled}
}

// Settled says how long the first pass of an object found at a cold start may wait: an object
// Ready at its generation, holding the kind's finalizer, not being deleted and whose backend
// namespaces are there (the manager's cache of them says so, no request) is due only for its
// drift check (ReadyRequeue), which a restart does not make more urgent; it is scheduled at a
// random point of that interval, so the checks of every object do not all run, against the
// backend's rate limit, at the start. Anything else (0) is reconciled at once: a new or restored
// backend (namespaces missing) is rebuilt at the start, not at the next drift check.
func (k *Kind[O, S]) Settled(obj client.Object) time.Duration {
	o, ok := obj.(O)
	if !ok || k.ReadyRequeue == nil || k.Backend.Namespaces == nil || o.GetDeletionTimestamp() != nil || !controllerutil.ContainsFinalizer(o, k.Finalizer) {
		return 0
	}
	c := GetCondition(o, commonv1alpha1.ReadyCondition)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != o.GetGeneration() || phaseOf(o) != PhaseReady {
		return 0
	}
	lc := logicalcluster.From(o).String()
	if lc == "" {
		return 0
	}
	namespaces := []string{workspaces.Namespace(lc)}
	if k.Namespaces != nil {
		namespaces = append(namespaces, k.Namespaces(o, lc)...)
	}
	// A cache that could not answer (the backend unreachable at the start) is not asked again
	// for a while: every object is then reconciled at once, as without a cache.
	if time.Now().UnixNano() < k.namespacesUnavailable.Load() {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), settledCheckTimeout)
	defer cancel()
	for _, ns := range namespaces {
		meta := syncer.NamespaceMetadata()
		err := k.Backend.Namespaces.Get(ctx, client.ObjectKey{Name: ns}, meta)
		if err != nil && !apierrors.IsNotFound(err) {
			k.namespacesUnavailable.Store(time.Now().Add(time.Minute).UnixNano())
		}
		if err != nil || meta.DeletionTimestamp != nil {
			return 0
		}
	}
	interval := k.ReadyRequeue(o)
	if interval <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(interval))) + 1
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
