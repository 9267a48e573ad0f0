// Package reconcile is the one reconcile skeleton every KubeOpera controller is built on (see
// docs/architecture.md#reconcile-skeleton and the README's "Adding a controller").
//
// A pass (Pass.Run) has one shape everywhere: snapshot the object -> defer one status patch ->
// reconcileDelete if the object is being deleted -> ensure the finalizer -> handle a retry request
// -> reconcileNormal as an ordered list of small Steps sharing a scope. Steps return typed
// outcomes, and this package alone maps them to conditions, phase, events and a ctrl.Result:
//
//   - nil: the step is done, the next one runs; when all are done the object is Ready (Ready True,
//     no Reconciling, no Stalled, phase Ready) and is re-checked for drift after a jittered
//     interval (Pass.ReadyRequeue).
//   - Waiting(reason, message, after): waiting on an external actor. Ready False, Reconciling
//     True, the step's condition False with the reason; RequeueAfter(after), nil error.
//   - Stalled(reason, message): cannot succeed by retrying. Ready False, Stalled True, phase
//     Failed, a Warning event; reconcile.TerminalError, so controller-runtime does not retry. The
//     user retries with the kubeopera.io/retry annotation or a spec change.
//   - any other error: transient. Ready False and Reconciling True with reason TransientError and
//     the error in the message (so `kubectl describe` always says why a pass did not finish); the
//     error is returned, so controller-runtime retries with backoff.
//
// Status is written once per pass with a merge patch under optimistic lock (never Update, never
// spec and status together); observedGeneration is bumped only when the pass succeeded (done or
// waiting, the conditions saying which) or ended in a terminal failure, never after a transient
// error; a conflict becomes a quick requeue.
package reconcile
