package reconcile

import (
	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// RetryRequested reports whether obj carries a kubeopera.io/retry annotation value the reconciler
// has not acted upon yet.
func RetryRequested(obj Object) bool {
	v := obj.GetAnnotations()[commonv1alpha1.RetryAnnotation]
	return v != "" && commonv1alpha1.RetryToken(v) != obj.GetRetryStatus().LastHandledRetry
}

// MarkRetryHandled records obj's current retry annotation value (bounded) as acted upon.
func MarkRetryHandled(obj Object) {
	obj.GetRetryStatus().LastHandledRetry = commonv1alpha1.RetryToken(obj.GetAnnotations()[commonv1alpha1.RetryAnnotation])
}
