package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// ConflictRequeue is how soon a pass whose status patch lost an optimistic-lock race runs again,
// from the current object.
const ConflictRequeue = time.Second

// StatusGrace is how long the status patch of a pass that ran past its deadline (the fleet's
// controller wrapper gives every pass one) may take: the status still says how the pass ended.
const StatusGrace = 10 * time.Second

// Step is one ordered step of a reconcile pass. It shares the pass' scope S with the other steps.
type Step[S any] struct {
	// Name says what the step does, for logs and for transient-error messages ("install the
	// vCluster release").
	Name string
	// Condition is the step condition the step owns, if any. The step sets it True itself when it
	// finishes (with its own message); when the step waits, stalls or fails, the skeleton sets it
	// False with the outcome's reason and message.
	Condition string
	// Run does the step's work. It returns nil when done, Waiting or Stalled, or an error
	// (transient).
	Run func(ctx context.Context, s S) error
}

// Pass is one reconcile pass of one object: the object, its scope, its steps and how to write its
// status.
type Pass[S any] struct {
	// Client writes the object's finalizer and status (the workspace client it was read with).
	Client client.Client
	// Object is the object reconciled, as read at the start of the pass.
	Object Object
	// Scope is handed to every step.
	Scope S
	// Finalizer is the object's finalizer; the delete steps run before it is removed.
	Finalizer string
	// Normal are the steps of reconcileNormal, in order.
	Normal []Step[S]
	// Delete are the steps of reconcileDelete, in order; the finalizer is removed after the last.
	Delete []Step[S]
	// Recorder, if set, receives the events of the skeleton's transitions (stalled, ready, retry).
	Recorder events.EventRecorder
	// ReadyMessage says, once every step is done, what is ready (status.message and Ready's message).
	ReadyMessage func(S) string
	// ReadyRequeue, if set, returns the (jittered) interval after which a Ready object is checked
	// for drift.
	ReadyRequeue func() time.Duration
}

// Run runs the pass and returns what controller-runtime should do next. It is the only place where
// step outcomes become conditions, phase, events and a ctrl.Result.
func (p Pass[S]) Run(ctx context.Context) (res ctrl.Result, retErr error) {
	obj := p.Object
	log := ctrl.LoggerFrom(ctx)
	patcher := NewStatusPatcher(p.Client, obj)
	ctx = withPatcher(ctx, patcher)
	phaseBefore := phaseOf(obj)
	readyBefore := IsTrue(obj, commonv1alpha1.ReadyCondition)
	stalledBefore := GetCondition(obj, commonv1alpha1.StalledCondition)

	defer func() {
		if after := phaseOf(obj); after != phaseBefore {
			log.Info("Phase changed", "from", phaseBefore, "to", after, "reason", reasonOf(retErr))
		}
		patchCtx := ctx
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			var cancel context.CancelFunc
			patchCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), StatusGrace)
			defer cancel()
		}
		switch err := patcher.Patch(patchCtx, obj, retErr); {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			// This pass worked from a stale copy; do it again from the current one.
			res, retErr = ctrl.Result{RequeueAfter: ConflictRequeue}, nil
		default:
			// The status does not say how the pass ended: retry with backoff, even after a
			// terminal outcome (which would otherwise never be written).
			retErr = err
		}
		if retErr != nil {
			res = ctrl.Result{} // never an error together with RequeueAfter
		}
	}()

	if !obj.GetDeletionTimestamp().IsZero() {
		if !controllerutil.ContainsFinalizer(obj, p.Finalizer) {
			return ctrl.Result{}, nil
		}
		setPhase(obj, PhaseDeleting)
		if err := p.runSteps(ctx, p.Delete); err != nil {
			res, err := p.finish(ctx, err, nil, commonv1alpha1.DeletingReason)
			setPhase(obj, PhaseDeleting) // a stalled deletion is still a deletion
			return res, err
		}
		if err := RemoveFinalizer(ctx, p.Client, obj, p.Finalizer); err != nil {
			return ctrl.Result{}, err
		}
		patcher.Rebase(obj)
		log.Info("Deleted; backend state removed and finalizer dropped")
		return ctrl.Result{}, nil
	}

	added, err := EnsureFinalizer(ctx, p.Client, obj, p.Finalizer)
	if err != nil {
		return ctrl.Result{}, err
	}
	if added {
		patcher.Rebase(obj)
	}

	specChanged := obj.GetObservedGeneration() != 0 && obj.GetGeneration() != obj.GetObservedGeneration()
	switch {
	case RetryRequested(obj):
		MarkRetryHandled(obj)
		p.event(corev1.EventTypeNormal, commonv1alpha1.RetryRequestedReason, "Retry requested; starting a new attempt")
		setPhase(obj, PhasePending)
		RemoveCondition(obj, commonv1alpha1.StalledCondition)
	case specChanged && phaseOf(obj) == PhaseFailed:
		setPhase(obj, PhasePending)
		RemoveCondition(obj, commonv1alpha1.StalledCondition)
	case phaseOf(obj) == PhaseFailed || (phaseOf(obj) == "" && stalledBefore != nil && stalledBefore.Status == metav1.ConditionTrue && !specChanged):
		// Nothing to do until the user (retry annotation, spec change) or an admin (status.phase
		// back to Pending) asks again; the status says why.
		return ctrl.Result{}, nil
	}
	if phaseOf(obj) == "" {
		setPhase(obj, PhasePending)
	}

	err = p.runSteps(ctx, p.Normal)
	ready := func() {
		msg := "Reconciled"
		if p.ReadyMessage != nil {
			msg = p.ReadyMessage(p.Scope)
		}
		markReady(obj, msg)
		if !readyBefore {
			p.event(corev1.EventTypeNormal, commonv1alpha1.SucceededReason, msg)
		}
	}
	return p.finish(ctx, err, ready, "")
}

// runSteps runs steps in order and returns the first outcome that is not nil, wrapped with its step.
func (p Pass[S]) runSteps(ctx context.Context, steps []Step[S]) error {
	for _, st := range steps {
		if err := st.Run(ctx, p.Scope); err != nil {
			return &stepFailure{name: st.Name, condition: st.Condition, err: stallIfTerminal(err)}
		}
	}
	return nil
}

// stallingError is an external client's error that says by itself that retrying cannot help, and
// with which reason: e.g. *readlimit.Error (ReadLimitExceeded), whose doc says why.
type stallingError interface {
	error
	StalledReason() string
}

// stallIfTerminal makes a step error with a stallingError in its chain the Stalled outcome with
// that error's reason and message (not the wrapping text around it), so no step has to check for
// it; Waiting and Stalled outcomes are left as they are.
func stallIfTerminal(err error) error {
	if _, ok := AsStalled(err); ok {
		return err
	}
	if _, ok := AsWaiting(err); ok {
		return err
	}
	var se stallingError
	if errors.As(err, &se) {
		return Stalled(se.StalledReason(), se.Error())
	}
	return err
}

// stepFailure carries a step's name and condition with its outcome.
type stepFailure struct {
	name, condition string
	err             error
}

func (f *stepFailure) Error() string { return fmt.Sprintf("failed to %s: %v", f.name, f.err) }
func (f *stepFailure) Unwrap() error { return f.err }

// finish maps the outcome of the steps to conditions, phase, events and a result. ready runs when
// every step is done; reasonOverride, when set, is the Ready reason while not done (Deleting).
func (p Pass[S]) finish(ctx context.Context, err error, ready func(), reasonOverride string) (ctrl.Result, error) {
	obj := p.Object
	if err == nil {
		if ready != nil {
			ready()
		}
		if p.ReadyRequeue != nil {
			return ctrl.Result{RequeueAfter: p.ReadyRequeue()}, nil
		}
		return ctrl.Result{}, nil
	}
	var f *stepFailure
	condition := ""
	if errors.As(err, &f) {
		condition = f.condition
	}
	summaryReason := func(r string) string {
		if reasonOverride != "" {
			return reasonOverride
		}
		return r
	}
	if w, ok := AsWaiting(err); ok {
		if condition != "" && !w.Commit {
			MarkFalse(obj, condition, w.Reason, w.Message)
		}
		markReconciling(obj, summaryReason(w.Reason), w.Message)
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting", "reason", w.Reason, "message", w.Message, "after", w.After.String())
		return ctrl.Result{RequeueAfter: w.After}, nil
	}
	if s, ok := AsStalled(err); ok {
		if condition != "" {
			MarkFalse(obj, condition, s.Reason, s.Message)
		}
		prev := GetCondition(obj, commonv1alpha1.StalledCondition)
		markStalled(obj, s.Reason, s.Message)
		if prev == nil || prev.Status != "True" || prev.Reason != s.Reason {
			p.event(corev1.EventTypeWarning, s.Reason, s.Message)
		}
		return ctrl.Result{}, reconcile.TerminalError(s)
	}
	// Transient: say so in the conditions, in the platform's words (the error's text can name
	// internal addresses; controller-runtime logs it whole), and let controller-runtime retry
	// with backoff.
	step := ""
	if f != nil {
		step = f.name
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded) {
		// The pass itself ran out of time (the fleet's controller wrapper gives it a deadline),
		// not one request.
		err = Public("the reconcile pass ran past its deadline", err)
	}
	msg := TransientMessage(step, err)
	if condition != "" {
		MarkFalse(obj, condition, commonv1alpha1.TransientErrorReason, msg)
	}
	markReconciling(obj, summaryReason(commonv1alpha1.TransientErrorReason), msg)
	return ctrl.Result{}, err
}

// event records an event on the object when a recorder is set.
func (p Pass[S]) event(eventType, reason, note string) {
	Event(p.Recorder, p.Object, eventType, reason, note)
}

// Event tells the object's owner what happened, with a condition reason as the event reason so
// conditions and events tell one story. A nil recorder records nothing.
func Event(rec events.EventRecorder, obj client.Object, eventType, reason, note string) {
	if rec == nil {
		return
	}
	action := "Reconcile"
	if eventType == corev1.EventTypeWarning {
		action = "Failed"
	}
	rec.Eventf(obj, nil, eventType, reason, action, "%s", Truncate(note))
}

// reasonOf returns the reason of a pass outcome for logs.
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	if s, ok := AsStalled(err); ok {
		return s.Reason
	}
	return commonv1alpha1.TransientErrorReason
}
