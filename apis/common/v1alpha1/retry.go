package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// RetryStatus is embedded in every kind's status: it records which retry request
// (kubeopera.io/retry annotation) the reconciler last acted upon.
type RetryStatus struct {
	// lastHandledRetry is the kubeopera.io/retry annotation value the reconciler last acted upon:
	// the value itself when it is at most 63 characters, otherwise "sha256:" and the first 32 hex
	// characters of its SHA-256 (see RetryToken). Setting the annotation to a different value
	// starts a new attempt.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LastHandledRetry string `json:"lastHandledRetry,omitempty"`
}

// maxRetryTokenLength is the longest annotation value kept as is in lastHandledRetry.
const maxRetryTokenLength = 63

// RetryToken returns what lastHandledRetry records for a retry annotation value: short values as
// they are (so `kubectl get -o yaml` shows the user's own value), long ones as a bounded hash, so
// the status never outgrows its schema whatever the annotation holds.
func RetryToken(value string) string {
	if len(value) <= maxRetryTokenLength {
		return value
	}
	sum := sha256.Sum256([]byte(value))
	return "sha256:" + hex.EncodeToString(sum[:])[:32]
}
