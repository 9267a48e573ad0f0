package tenant

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

// Conditions follow kstatus: Ready always present; Reconciling and Stalled only while true.

func setCondition(t *kov1alpha1.Tenant, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: truncate(msg), ObservedGeneration: t.Generation,
	})
}

// markProgress records a step that is under way: Ready False, Reconciling True, no Stalled.
func markProgress(t *kov1alpha1.Tenant, step string, status metav1.ConditionStatus, reason, msg string) {
	if step != kov1alpha1.ReadyCondition {
		setCondition(t, step, status, reason, msg)
	}
	setCondition(t, kov1alpha1.ReadyCondition, metav1.ConditionFalse, reason, msg)
	setCondition(t, kov1alpha1.ReconcilingCondition, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(&t.Status.Conditions, kov1alpha1.StalledCondition)
	t.Status.Message = truncate(msg)
}

// markFailed moves the Tenant to Failed: Ready False, Stalled True, no Reconciling. It returns a
// terminal error: retrying cannot help until the user or an admin asks for a new attempt.
func markFailed(t *kov1alpha1.Tenant, step, reason, msg string) (ctrl.Result, error) {
	t.Status.Phase = kov1alpha1.TenantPhaseFailed
	setCondition(t, step, metav1.ConditionFalse, reason, msg)
	setCondition(t, kov1alpha1.ReadyCondition, metav1.ConditionFalse, reason, msg)
	setCondition(t, kov1alpha1.StalledCondition, metav1.ConditionTrue, reason,
		msg+fmt.Sprintf(" (set annotation %s to a new value to retry)", kov1alpha1.RetryAnnotation))
	meta.RemoveStatusCondition(&t.Status.Conditions, kov1alpha1.ReconcilingCondition)
	t.Status.Message = truncate(msg)
	return ctrl.Result{}, reconcile.TerminalError(errors.New(reason + ": " + truncate(msg)))
}

// markReady: Ready True, no Reconciling, no Stalled.
func markReady(t *kov1alpha1.Tenant, msg string) {
	setCondition(t, kov1alpha1.ReadyCondition, metav1.ConditionTrue, kov1alpha1.SucceededReason, msg)
	meta.RemoveStatusCondition(&t.Status.Conditions, kov1alpha1.ReconcilingCondition)
	meta.RemoveStatusCondition(&t.Status.Conditions, kov1alpha1.StalledCondition)
	t.Status.Message = truncate(msg)
}

// event tells the tenant what happened, with the condition reasons as event reasons.
func (s *scope) event(eventType, reason, note string) {
	action := "Reconcile"
	if eventType == corev1.EventTypeWarning {
		action = "Failed"
	}
	s.recorder.Eventf(s.tenant, nil, eventType, reason, action, "%s", truncate(note))
}

func truncate(s string) string {
	const max = 1024
	if len(s) > max {
		return s[:max-3] + "..."
	}
	return s
}
