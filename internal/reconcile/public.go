package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// PublicError is an error whose text a tenant may read in status and events. Transient errors are
// shown to tenants in the platform's words: an error's own text can name internal URLs, addresses
// or objects (a backend API server's address, the provisioner's service URL), so the status says
// which step failed and what kind of failure it was (TransientMessage) and the whole error goes to
// the manager's log. An error the platform words itself for the tenant, or one about the tenant's
// own input or cluster, is wrapped with Public to be shown as it is.
type PublicError interface {
	error
	// PublicMessage is what the tenant may read.
	PublicMessage() string
}

// Public wraps err so that msg is what tenants read of it; Error() is msg followed by err.
func Public(msg string, err error) error {
	return &publicError{msg: msg, err: err}
}

type publicError struct {
	msg string
	err error
}

func (e *publicError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}
func (e *publicError) Unwrap() error         { return e.err }
func (e *publicError) PublicMessage() string { return e.msg }

// TransientMessage is the status message of a transient error of the step named step: the step
// and a description of the failure that names no address, URL or object of the platform's: the
// outermost PublicError's message, else the API status (code and reason) of a Kubernetes API
// error, else the kind of network failure, else "an internal error".
func TransientMessage(step string, err error) string {
	what := "reconcile"
	if step != "" {
		what = step
	}
	return fmt.Sprintf("Failed to %s: %s (retrying; the platform's operators find the details in the manager's log)", what, describeFailure(err))
}

// describeFailure describes err without its text (see TransientMessage).
func describeFailure(err error) string {
	var pub PublicError
	if errors.As(err, &pub) {
		return pub.PublicMessage()
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if st.Code != 0 {
			return fmt.Sprintf("an API server answered %d %s", st.Code, st.Reason)
		}
		return fmt.Sprintf("an API server answered %s", st.Reason)
	}
	var dns *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "a request timed out"
	case errors.Is(err, context.Canceled):
		return "the request was cancelled (the manager is shutting down or the object changed)"
	case errors.As(err, &dns):
		return "a host name did not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "a connection was refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "a connection was reset"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "a request timed out"
	}
	return "an internal error"
}
