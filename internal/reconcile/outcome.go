package reconcile

import (
	"errors"
	"fmt"
	"time"
)

// WaitingError is the outcome of a step that waits on an external actor. Create it with Waiting.
type WaitingError struct {
	Reason  string
	Message string
	After   time.Duration
}

func (e *WaitingError) Error() string { return fmt.Sprintf("%s: %s", e.Reason, e.Message) }

// Waiting says the step waits on something outside the reconciler (a release, a Pod, a Secret):
// the pass stops, the object shows Reconciling with reason and message, and is looked at again
// after the given interval. It is not an error: nothing failed.
func Waiting(reason, message string, after time.Duration) error {
	return &WaitingError{Reason: reason, Message: message, After: after}
}

// StalledError is the outcome of a step that cannot succeed by retrying. Create it with Stalled.
type StalledError struct {
	Reason  string
	Message string
}

func (e *StalledError) Error() string { return fmt.Sprintf("%s: %s", e.Reason, e.Message) }

// Stalled says the step cannot succeed until the user or an admin changes something: the object
// becomes Failed and Stalled with reason and message, and is not retried until a spec change or a
// retry request.
func Stalled(reason, message string) error {
	return &StalledError{Reason: reason, Message: message}
}

// Stalledf is Stalled with a formatted message.
func Stalledf(reason, format string, args ...any) error {
	return Stalled(reason, fmt.Sprintf(format, args...))
}

// AsWaiting returns the WaitingError in err's chain, if any.
func AsWaiting(err error) (*WaitingError, bool) {
	var w *WaitingError
	ok := errors.As(err, &w)
	return w, ok
}

// AsStalled returns the StalledError in err's chain, if any.
func AsStalled(err error) (*StalledError, bool) {
	var s *StalledError
	ok := errors.As(err, &s)
	return s, ok
}
