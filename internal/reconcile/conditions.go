package reconcile

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// maxMessage bounds condition and status messages (status.message allows 4096).
const maxMessage = 1024

// Truncate bounds a message for conditions, status and events.
func Truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage-3] + "..."
	}
	return s
}

// SetCondition sets condition typ on obj, stamped with obj's generation. The transition time
// changes only when the status does.
func SetCondition(obj Object, typ string, status metav1.ConditionStatus, reason, message string) {
	conds := obj.GetConditions()
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: Truncate(message), ObservedGeneration: obj.GetGeneration(),
	})
	obj.SetConditions(conds)
}

// MarkTrue sets condition typ True.
func MarkTrue(obj Object, typ, reason, message string) {
	SetCondition(obj, typ, metav1.ConditionTrue, reason, message)
}

// MarkFalse sets condition typ False.
func MarkFalse(obj Object, typ, reason, message string) {
	SetCondition(obj, typ, metav1.ConditionFalse, reason, message)
}

// RemoveCondition removes condition typ.
func RemoveCondition(obj Object, typ string) {
	conds := obj.GetConditions()
	meta.RemoveStatusCondition(&conds, typ)
	obj.SetConditions(conds)
}

// GetCondition returns condition typ, or nil.
func GetCondition(obj Object, typ string) *metav1.Condition {
	return meta.FindStatusCondition(obj.GetConditions(), typ)
}

// IsTrue reports whether condition typ is True.
func IsTrue(obj Object, typ string) bool {
	return meta.IsStatusConditionTrue(obj.GetConditions(), typ)
}

// The kstatus summary, written only by the skeleton: Ready always present; Reconciling and Stalled
// only while true.

func markReconciling(obj Object, reason, message string) {
	MarkFalse(obj, commonv1alpha1.ReadyCondition, reason, message)
	MarkTrue(obj, commonv1alpha1.ReconcilingCondition, reason, message)
	RemoveCondition(obj, commonv1alpha1.StalledCondition)
	setMessage(obj, message)
}

func markStalled(obj Object, reason, message string) {
	MarkFalse(obj, commonv1alpha1.ReadyCondition, reason, message)
	MarkTrue(obj, commonv1alpha1.StalledCondition, reason,
		message+" (set annotation "+commonv1alpha1.RetryAnnotation+" to a new value to retry)")
	RemoveCondition(obj, commonv1alpha1.ReconcilingCondition)
	setPhase(obj, PhaseFailed)
	setMessage(obj, message)
}

func markReady(obj Object, message string) {
	MarkTrue(obj, commonv1alpha1.ReadyCondition, commonv1alpha1.SucceededReason, message)
	RemoveCondition(obj, commonv1alpha1.ReconcilingCondition)
	RemoveCondition(obj, commonv1alpha1.StalledCondition)
	setPhase(obj, PhaseReady)
	setMessage(obj, message)
}
