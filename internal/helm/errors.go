package helm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Error is the error returned by every operation of this package. Terminal
// tells whether the operation can succeed by retrying it with the same input;
// see Error.Terminal.
type Error struct {
	// Op is the operation that failed, e.g. "install", "upgrade",
	// "uninstall", "observe" or "load chart oci://…".
	Op string
	// Namespace and Release name the release the operation was for; both are
	// empty for operations on the chart alone (Reachable).
	Namespace, Release string
	// Permanent is true when retrying the same operation with the same input
	// (chart reference, version and values) cannot succeed: the chart does
	// not exist or does not load, the values do not meet the chart's schema,
	// or the chart does not render with them.
	Permanent bool
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Release == "" {
		return fmt.Sprintf("failed to %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("failed to %s release %s/%s: %v", e.Op, e.Namespace, e.Release, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Terminal reports whether retrying with the same input cannot succeed (Permanent): the
// reconcile skeleton stalls the object then.
func (e *Error) Terminal() bool { return e.Permanent }

// newError returns an *Error for op on namespace/release, classified with
// isTerminal. A cause that already is an *Error keeps its classification.
func newError(op, namespace, release string, err error) *Error {
	terminal := isTerminal(err)
	var inner *Error
	if errors.As(err, &inner) {
		terminal = inner.Permanent
	}
	var registryErr *errcode.ErrorResponse
	var wrapped *registryStatusError
	if errors.As(err, &registryErr) && !errors.As(err, &wrapped) {
		err = &registryStatusError{StatusCode: registryErr.StatusCode, Err: err}
	}
	return &Error{Op: op, Namespace: namespace, Release: release, Permanent: terminal, Err: err}
}

// Sentinel causes attached where this package knows which step failed, because
// Helm reports that step with untyped errors.
var (
	// errChartNotFound marks a chart that does not exist: a local chart path
	// that does not exist.
	errChartNotFound = errors.New("chart not found")
	// errInvalidChart marks a chart that was found but that Helm's loader
	// refuses (no Chart.yaml, bad metadata, not a chart archive…).
	errInvalidChart = errors.New("invalid chart")
)

// httpStatusError is the answer of an http(s) chart server other than 200 OK.
type httpStatusError struct {
	URL        string
	StatusCode int
	Status     string
}

// Error implements error.
func (e *httpStatusError) Error() string {
	return fmt.Sprintf("GET %s: %s", e.URL, e.Status)
}

// PublicMessage says what failed without the chart's URL (reconcile.PublicError: status messages
// name no internal address).
func (e *httpStatusError) PublicMessage() string {
	return "the chart server answered " + e.Status
}

// registryStatusError is an OCI registry's answer other than success (oras' errcode.ErrorResponse,
// whose text names the registry's URL).
type registryStatusError struct {
	StatusCode int
	Err        error
}

func (e *registryStatusError) Error() string { return e.Err.Error() }
func (e *registryStatusError) Unwrap() error { return e.Err }

// PublicMessage says what failed without the registry's URL (reconcile.PublicError).
func (e *registryStatusError) PublicMessage() string {
	return fmt.Sprintf("the chart registry answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// transientMessages are fragments of error messages that Helm flattens into
// strings (e.g. an API error inside a template's lookup call, or an
// OpenAPI download during manifest validation) and that mean the network or
// the API server failed, not the input. They are checked before
// terminalMessages, since such a message may also carry a terminal-looking
// prefix such as "execution error at (…)".
var transientMessages = []string{
	"connection refused",
	"connection reset by peer",
	"broken pipe",
	"i/o timeout",
	"no such host",
	"tls handshake timeout",
	"context deadline exceeded",
	"context canceled",
	"client rate limiter wait returned an error",
	"the server is currently unable to handle the request",
	"the server was unable to return a response in the time allotted",
	"too many requests",
	"http2: client connection lost",
	"unexpected eof",
}

// terminalMessages are fragments of error messages for failures that no retry
// with the same input can fix, where Helm gives no typed error (it formats
// them with %s or github.com/pkg/errors.Errorf).
var terminalMessages = []string{
	// chartutil.ToRenderValuesWithSchemaValidation: values refused by values.schema.json.
	"values don't meet the specifications of the schema",
	// engine.Render: template parse and execution errors (including the fail function).
	"parse error at (",
	"parse error in (",
	"execution error at (",
	"execution error in (",
	"rendering template failed",
	"rendering template has a nested reference name",
	// releaseutil.SortManifests: a rendered manifest that is not YAML.
	"yaml parse error on",
	// action: the chart's kubeVersion constraint refuses this cluster.
	"chart requires kubeversion",
	// kube.Client.Build: a rendered object does not match the API server's OpenAPI schema.
	"error validating data",
	// registry.Client.ValidateReference / GetTagMatchingVersionOrConstraint: no such chart version.
	"could not locate a version matching provided version string",
	"unable to locate any tags in provided repository",
	"chart reference and version mismatch",
	"invalid chart url format",
}

// isTerminal classifies a cause. The rules, in order (the first match wins):
//
//  1. Transient, typed: context cancellation or deadline; a url, net.OpError
//     or DNS error, or any error that says it is a timeout; connection refused, reset or
//     broken pipe; an unexpected EOF; a Kubernetes API error that is a
//     timeout, 429, conflict, internal or other 5xx error; Helm's storage
//     driver finding no release record where it expected one (the release
//     changed under the operation); an http(s) chart server or OCI registry
//     answering anything but 404/410.
//  2. Terminal, typed: a local chart path that does not exist
//     (errChartNotFound); a chart Helm's loader refuses (errInvalidChart); an
//     http(s) chart server answering 404 Not Found or 410 Gone; an OCI
//     registry answering 404 or oras reporting the tag/manifest not found
//     (errdef.ErrNotFound); a Kubernetes API server refusing a rendered
//     object as invalid (422), since the same values render the same object.
//  3. Transient, by message (transientMessages): network and API failures
//     that Helm flattened into strings.
//  4. Terminal, by message (terminalMessages): schema validation, template
//     rendering and chart version resolution errors, which Helm does not type.
//  5. Everything else is transient: retrying with backoff is the safe default.
func isTerminal(err error) bool {
	if err == nil {
		return false
	}
	if isTransientTyped(err) {
		return false
	}
	if isTerminalTyped(err) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range transientMessages {
		if strings.Contains(msg, m) {
			return false
		}
	}
	for _, m := range terminalMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// isTransientTyped implements rule 1 of isTerminal.
func isTransientTyped(err error) bool {
	var urlErr *url.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var netErr net.Error
	var statusErr *httpStatusError
	var registryErr *errcode.ErrorResponse
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	// Not any net.Error: syscall.Errno implements it too, ENOENT included.
	case errors.As(err, &urlErr), errors.As(err, &opErr), errors.As(err, &dnsErr),
		errors.As(err, &netErr) && netErr.Timeout():
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.Is(err, driver.ErrReleaseNotFound), errors.Is(err, driver.ErrNoDeployedReleases):
		return true
	case errors.As(err, &statusErr):
		return !notFoundStatus(statusErr.StatusCode)
	case errors.As(err, &registryErr):
		return !notFoundStatus(registryErr.StatusCode)
	}
	for _, s := range apiStatuses(err) {
		switch code, reason := s.Code, s.Reason; {
		case code >= http.StatusInternalServerError, code == http.StatusTooManyRequests,
			reason == metav1.StatusReasonTimeout, reason == metav1.StatusReasonServerTimeout,
			reason == metav1.StatusReasonConflict, reason == metav1.StatusReasonTooManyRequests,
			reason == metav1.StatusReasonInternalError, reason == metav1.StatusReasonServiceUnavailable:
			return true
		}
	}
	return false
}

// isTerminalTyped implements rule 2 of isTerminal.
func isTerminalTyped(err error) bool {
	var statusErr *httpStatusError
	var registryErr *errcode.ErrorResponse
	switch {
	case errors.Is(err, errChartNotFound), errors.Is(err, errInvalidChart):
		return true
	case errors.As(err, &statusErr):
		return notFoundStatus(statusErr.StatusCode)
	case errors.As(err, &registryErr):
		return notFoundStatus(registryErr.StatusCode)
	case errors.Is(err, errdef.ErrNotFound):
		return true
	}
	for _, s := range apiStatuses(err) {
		if s.Reason == metav1.StatusReasonInvalid {
			return true
		}
	}
	return false
}

// apiStatuses returns the status of every Kubernetes API error in the tree of
// err. apierrors' predicates only look at the first one, while Helm joins the
// errors of all the objects of a release (go-multierror).
func apiStatuses(err error) []metav1.Status {
	var statuses []metav1.Status
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		var status apierrors.APIStatus
		if s, ok := err.(apierrors.APIStatus); ok { //nolint:errorlint // one node of the tree at a time
			statuses = append(statuses, s.Status())
		} else if as, ok := err.(interface{ As(any) bool }); ok && as.As(&status) {
			statuses = append(statuses, status.Status()) // e.g. a go-multierror chain node
		}
		switch u := err.(type) { //nolint:errorlint // walking the tree by hand
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return statuses
}

// notFoundStatus reports whether an HTTP status says the resource does not exist.
func notFoundStatus(code int) bool {
	return code == http.StatusNotFound || code == http.StatusGone
}
