package helm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/reconcile"

	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

func TestIsTerminalRules(t *testing.T) {
	quota := schema.GroupResource{Resource: "resourcequotas"}
	dial := &url.Error{Op: "Get", URL: "https://ghcr.io/v2/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ResourceQuota"}, "vc-acme", field.ErrorList{field.Invalid(field.NewPath("spec", "hard"), "bogus", "must be a standard resource")})
	for name, tc := range map[string]struct {
		err      error
		terminal bool
		reason   string
	}{
		"nil": {nil, false, "no error is not terminal"},
		"deadline": {
			fmt.Errorf("waiting: %w", context.DeadlineExceeded), false,
			"a caller's deadline says nothing about the input",
		},
		"canceled":           {context.Canceled, false, "cancellation is not a verdict on the input"},
		"connection refused": {dial, false, "a registry that is down may come back"},
		"dns": {
			&url.Error{Op: "Get", URL: "https://nowhere.invalid", Err: &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}}, false,
			"DNS failures are network failures",
		},
		"timeout": {
			&url.Error{Op: "Get", URL: "https://ghcr.io", Err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}}, false,
			"an HTTP client timeout is transient",
		},
		"connection reset":   {fmt.Errorf("read: %w", syscall.ECONNRESET), false, "a reset connection is transient"},
		"unexpected eof":     {fmt.Errorf("reading chart: %w", io.ErrUnexpectedEOF), false, "a truncated download is transient"},
		"api unavailable":    {apierrors.NewServiceUnavailable("etcd"), false, "503 from the API server"},
		"api internal":       {apierrors.NewInternalError(errors.New("boom")), false, "500 from the API server"},
		"api 429":            {apierrors.NewTooManyRequests("slow down", 1), false, "throttled by the API server"},
		"api conflict":       {apierrors.NewConflict(quota, "vc-acme", errors.New("modified")), false, "a conflict is retried"},
		"api timeout":        {apierrors.NewTimeoutError("slow", 1), false, "an API server timeout"},
		"api server timeout": {apierrors.NewServerTimeout(quota, "create", 1), false, "an API server timeout"},
		"api 502": {
			apierrors.NewGenericServerResponse(502, "create", quota, "vc-acme", "bad gateway", 0, false), false,
			"any 5xx from the API server",
		},
		"api forbidden": {apierrors.NewForbidden(quota, "vc-acme", errors.New("rbac")), false, "RBAC can be fixed by an admin without changing the input"},
		"api not found": {apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "kcp-x"), false, "the namespace may be created later"},
		"api invalid":   {fmt.Errorf("release acme failed: %w", invalid), true, "the API server refuses the rendered object; the same values render it again"},
		"invalid and unavailable": {
			errors.Join(invalid, apierrors.NewServiceUnavailable("etcd")), false,
			"when part of an operation failed transiently, retrying may succeed",
		},
		"multierror invalid then unavailable": {
			asChain{invalid, apierrors.NewServiceUnavailable("etcd")}, false,
			"Helm joins the errors of a release's objects with go-multierror; any transient one makes the whole transient",
		},
		"multierror invalid": {
			asChain{fmt.Errorf("create: %w", invalid), invalid}, true,
			"every object refused as invalid",
		},
		"release not found": {fmt.Errorf("upgrade: %w", driver.ErrReleaseNotFound), false, "the release changed under the operation"},
		"storage":           {errors.New("create: failed to create: secrets \"sh.helm.release.v1.acme.v1\" already exists"), false, "storage driver errors are transient"},
		"local chart missing": {
			fmt.Errorf("%w: %w", errChartNotFound, &os.PathError{Op: "stat", Path: "/charts/x", Err: syscall.ENOENT}), true,
			"a chart path that does not exist",
		},
		"invalid chart": {fmt.Errorf("%w: Chart.yaml file is missing", errInvalidChart), true, "a chart Helm's loader refuses"},
		"http 404":      {&httpStatusError{URL: "https://charts.example/x.tgz", StatusCode: 404, Status: "404 Not Found"}, true, "the chart URL does not exist"},
		"http 410":      {&httpStatusError{URL: "https://charts.example/x.tgz", StatusCode: 410, Status: "410 Gone"}, true, "the chart URL is gone"},
		"http 503":      {&httpStatusError{URL: "https://charts.example/x.tgz", StatusCode: 503, Status: "503 Service Unavailable"}, false, "the chart server is down"},
		"http 429":      {&httpStatusError{URL: "https://charts.example/x.tgz", StatusCode: 429, Status: "429 Too Many Requests"}, false, "throttled by the chart server"},
		"http 401":      {&httpStatusError{URL: "https://charts.example/x.tgz", StatusCode: 401, Status: "401 Unauthorized"}, false, "credentials can be fixed without changing the input"},
		"oci tag missing": {
			fmt.Errorf("ghcr.io/loft-sh/charts/vcluster:9.9.9: %w", errdef.ErrNotFound), true,
			"oras reports a missing tag as errdef.ErrNotFound",
		},
		"oci repository missing": {
			&errcode.ErrorResponse{Method: "GET", URL: &url.URL{Scheme: "https", Host: "ghcr.io", Path: "/v2/x/tags/list"}, StatusCode: 404}, true,
			"the registry does not know the repository",
		},
		"oci 500": {
			&errcode.ErrorResponse{Method: "GET", URL: &url.URL{Scheme: "https", Host: "ghcr.io", Path: "/v2/"}, StatusCode: 500}, false,
			"the registry failed",
		},
		"oci version": {
			errors.New("Could not locate a version matching provided version string 9.x"), true,
			"Helm's registry client found no matching tag (untyped)",
		},
		"schema": {
			errors.New("values don't meet the specifications of the schema(s) in the following chart(s):\nvcluster:\n- exportKubeConfig: Additional property enabled is not allowed"), true,
			"values refused by values.schema.json (untyped)",
		},
		"template exec": {
			errors.New("execution error at (vcluster/templates/statefulset.yaml:12:4): replicas must be positive"), true,
			"a template's fail call or a bad value (untyped)",
		},
		"template parse": {
			errors.New(`parse error at (vcluster/templates/service.yaml:3): unexpected "}" in operand`), true,
			"a template that does not parse (untyped)",
		},
		"rendered yaml": {
			errors.New("YAML parse error on vcluster/templates/service.yaml: error converting YAML to JSON"), true,
			"a rendered manifest that is not YAML (untyped)",
		},
		"openapi validation": {
			errors.New(`unable to build kubernetes objects from release manifest: error validating "": error validating data: ValidationError(StatefulSet.spec): unknown field "bogus"`), true,
			"a rendered object that does not match the server's schema (untyped)",
		},
		"lookup unreachable": {
			errors.New(`execution error at (vcluster/templates/secret.yaml:2:10): error calling lookup: Get "https://10.0.0.1/api/v1": dial tcp 10.0.0.1:443: connect: connection refused`), false,
			"a template's lookup call failing on the network is transient despite the render prefix",
		},
		"unknown": {errors.New("something odd"), false, "retrying with backoff is the safe default"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := isTerminal(tc.err); got != tc.terminal {
				t.Errorf("isTerminal(%v) = %v, want %v: %s", tc.err, got, tc.terminal, tc.reason)
			}
		})
	}
}

// asChain mimics a go-multierror chain node: its first error answers As, the
// rest is its Unwrap.
type asChain []error

func (c asChain) Error() string      { return c[0].Error() }
func (c asChain) As(target any) bool { return errors.As(c[0], target) }
func (c asChain) Unwrap() error {
	if len(c) == 1 {
		return nil
	}
	return c[1:]
}

func TestError(t *testing.T) {
	cause := fmt.Errorf("%w: stat /charts/x: no such file or directory", errChartNotFound)
	chartErr := newError("load chart /charts/x", "", "", cause)
	if !chartErr.Permanent || chartErr.Error() != "failed to load chart /charts/x: chart not found: stat /charts/x: no such file or directory" {
		t.Errorf("chart error = %q, terminal %v", chartErr, chartErr.Permanent)
	}
	err := fmt.Errorf("reconciling: %w", newError("install or upgrade", "kcp-1", "vc-acme", chartErr))
	if !reconcile.IsTerminal(err) || !errors.Is(err, errChartNotFound) {
		t.Errorf("reconcile.IsTerminal(%v) = false, want the wrapped classification", err)
	}
	if want := "reconciling: failed to install or upgrade release kcp-1/vc-acme: failed to load chart /charts/x: chart not found: stat /charts/x: no such file or directory"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	var herr *Error
	if !errors.As(err, &herr) || herr.Namespace != "kcp-1" || herr.Release != "vc-acme" || herr.Op != "install or upgrade" {
		t.Errorf("errors.As = %#v", herr)
	}
	// An inner *Error keeps its classification even when its message looks otherwise.
	transient := &Error{Op: "load chart x", Err: errors.New("values don't meet the specifications of the schema")}
	if newError("upgrade", "ns", "r", transient).Permanent {
		t.Error("newError re-classified an *Error cause")
	}
	if reconcile.IsTerminal(nil) || reconcile.IsTerminal(errors.New("values don't meet the specifications of the schema")) {
		t.Error("IsTerminal is true for an error not from this package")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if err := newError("observe", "ns", "r", ctx.Err()); err.Permanent || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v terminal %v", err, err.Permanent)
	}
}
