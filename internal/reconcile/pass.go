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
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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
	// (transient). An error of an external client that says retrying cannot help (Terminal() true
	// somewhere in its chain) stalls the object with the reason Failed.
	Run func(ctx context.Context, s S) error
	// Failed is the reason the object stalls with when the step's external client fails for good
	// (see Run); commonv1alpha1.FailedReason when empty.
	Failed string
	// Once: when Condition is True at the object's generation and every step before it was
	// skipped in this pass, the step is not run again while the object works toward Ready, so
	// the passes that follow its progress (an install's end, a Secret's arrival) do not redo
	// finished work. It runs again in every pass of a Ready object (the drift check), after a
	// transient error, in a new attempt, and whenever a step before it had work to do (what it
	// did, a namespace made again, may undo what this one found). Only for steps whose later
	// steps need nothing from them in the pass' scope.
	Once bool
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
	// Phase is the kind's state machine as a pure function (Cluster API's reconcilePhase): the
	// phase of obj, from its status, while the pass stands at the step owning condition at (the
	// step that waits or failed). The skeleton sets the phases every kind shares itself (Pending
	// for a new attempt, Ready once every step is done, Failed when stalled, Deleting); nil: those
	// only.
	Phase func(obj Object, at string) string
	// PublishPhases writes every phase the pass enters before the next step moves it on (one
	// status write per phase, in the same pass), so kubectl get -w shows each phase of the
	// state machine; off, a pass writes the phase it ends in.
	PublishPhases bool
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
		if err := p.runSteps(ctx, p.Delete, nil); err != nil {
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

	shown := &shownPhase{patcher: patcher, written: phaseBefore}
	err = p.runSteps(ctx, p.Normal, shown)
	if err == nil && p.PublishPhases {
		// The last phase the pass entered is seen too, before the object is Ready.
		if perr := shown.enter(ctx, obj, PhaseReady); perr != nil {
			err = &stepFailure{name: "show the phase reached", err: perr}
		}
	}
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

// runSteps runs steps in order and returns the first outcome that is not nil, wrapped with its
// step. With shown (reconcileNormal) and PublishPhases, each step is entered in the phase the
// kind's Phase gives for it.
func (p Pass[S]) runSteps(ctx context.Context, steps []Step[S], shown *shownPhase) error {
	// Only the leading steps that are done are skipped: once one step runs, every later one does.
	skipping := shown != nil && !p.redoAll()
	for _, st := range steps {
		if skipping && st.Once && doneAtGeneration(p.Object, st.Condition) {
			continue
		}
		skipping = false
		if shown != nil && p.PublishPhases && p.Phase != nil {
			if err := shown.enter(ctx, p.Object, p.Phase(p.Object, st.Condition)); err != nil {
				return &stepFailure{name: st.Name, condition: st.Condition, err: err}
			}
		}
		if err := st.Run(ctx, p.Scope); err != nil {
			return &stepFailure{name: st.Name, condition: st.Condition, err: stallIfTerminal(err, st.Failed)}
		}
	}
	return nil
}

// shownPhase publishes the phases a pass enters (Pass.PublishPhases).
type shownPhase struct {
	patcher *StatusPatcher
	// written is the phase the stored status shows.
	written string
}

// enter moves obj to phase next. When obj's current phase was never written (this pass entered
// it), it is written first, so every phase is seen before the next one begins.
func (sp *shownPhase) enter(ctx context.Context, obj Object, next string) error {
	cur := phaseOf(obj)
	if next == "" || next == cur {
		return nil
	}
	if cur != sp.written {
		markReconciling(obj, commonv1alpha1.ProgressingReason, fmt.Sprintf("%s done; %s next", cur, next))
		if err := sp.patcher.Publish(ctx, obj); err != nil {
			return err
		}
		sp.written = cur
	}
	setPhase(obj, next)
	return nil
}

// stallingError is an external client's error that says by itself that retrying cannot help, and
// with which reason: e.g. *readlimit.Error (ReadLimitExceeded), whose doc says why.
type stallingError interface {
	error
	StalledReason() string
}

// terminalError is an external client's error that says whether retrying can help (the Helm
// client's, the provisioner's and the scaffolder's, authapi's): Terminal() true stalls the object.
type terminalError interface {
	error
	Terminal() bool
}

// IsTerminal reports whether err is, or wraps, an external client's error that says retrying
// cannot help (Terminal() true): what the skeleton stalls an object for. Nil and every other
// error are not terminal.
func IsTerminal(err error) bool {
	var te terminalError
	return errors.As(err, &te) && te.Terminal()
}

// stallIfTerminal makes a step error with a stallingError in its chain the Stalled outcome with
// that error's reason and message (not the wrapping text around it), and one with a terminal
// external client error the Stalled outcome with the step's reason failed and the step's message,
// so no step has to check for either; Waiting and Stalled outcomes are left as they are.
func stallIfTerminal(err error, failed string) error {
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
	if IsTerminal(err) {
		if failed == "" {
			failed = commonv1alpha1.FailedReason
		}
		return Stalled(failed, err.Error())
	}
	return err
}

// redoAll reports whether this pass runs the steps done already too (Step.Once): the object is
// Ready (a drift check), its last pass failed transiently (what failed may need an earlier step
// again, a namespace deleted meanwhile), or a new attempt begins (phase Pending).
func (p Pass[S]) redoAll() bool {
	if IsTrue(p.Object, commonv1alpha1.ReadyCondition) || phaseOf(p.Object) == PhasePending || phaseOf(p.Object) == "" {
		return true
	}
	c := GetCondition(p.Object, commonv1alpha1.ReconcilingCondition)
	return c != nil && c.Reason == commonv1alpha1.TransientErrorReason
}

// doneAtGeneration reports whether condition is True for the object's generation.
func doneAtGeneration(obj Object, condition string) bool {
	c := GetCondition(obj, condition)
	return condition != "" && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.GetGeneration()
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
			// A drift check: behind every object that changed or waits for something.
			return ctrl.Result{RequeueAfter: p.ReadyRequeue(), Priority: ptr.To(handler.LowPriority)}, nil
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
	if p.Phase != nil && reasonOverride == "" {
		if _, stalled := AsStalled(err); !stalled {
			if next := p.Phase(obj, condition); next != "" {
				setPhase(obj, next)
			}
		}
	}
	if w, ok := AsWaiting(err); ok {
		if condition != "" {
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
