package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// internalAddress matches what a tenant must never read in a status message: URLs, IP addresses
// and host:port pairs.
var internalAddress = regexp.MustCompile(`https?://|\b\d{1,3}(\.\d{1,3}){3}\b|\[?[0-9a-f:]*::[0-9a-f:]*\]?|[a-z0-9.-]+:\d{2,5}\b`)

func TestTransientMessageNamesNoInternalAddress(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 96, 0, 17), Port: 8080}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"the provisioner's service refuses the connection": {
			err:  fmt.Errorf("failed to poll run r-1: %w", &url.Error{Op: "Get", URL: "http://kubeopera-provisioner.kubeopera-provisioning.svc:8080/provisions/r-1", Err: dial}),
			want: "a connection was refused",
		},
		"the backend API server is unavailable": {
			err:  fmt.Errorf("failed to create backend namespace kcp-0123456789ab: %w", apierrors.NewServiceUnavailable("etcd leader changed on 10.0.0.3:2379")),
			want: "an API server answered 503 ServiceUnavailable",
		},
		"a conflict": {
			err:  apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "kcp-0123456789ab/x", errors.New("the object has been modified")),
			want: "an API server answered 409 Conflict",
		},
		"a timeout": {
			err:  &url.Error{Op: "Post", URL: "https://10.0.0.1:6443/api", Err: context.DeadlineExceeded},
			want: "a request timed out",
		},
		"a name that does not resolve": {
			err:  &url.Error{Op: "Get", URL: "http://kubeopera-api.internal:8080/", Err: &net.DNSError{Err: "no such host", Name: "kubeopera-api.internal", Server: "10.96.0.10:53"}},
			want: "a host name did not resolve",
		},
		"anything else": {
			err:  fmt.Errorf("unexpected answer from https://10.1.2.3:9443/webhook"),
			want: "an internal error",
		},
		"an error the platform worded for the tenant": {
			err:  reconcile.Public("the chart server answered 503 Service Unavailable", errors.New("GET http://127.0.0.1:33333/vcluster-0.21.2.tgz: 503")),
			want: "the chart server answered 503 Service Unavailable",
		},
	} {
		t.Run(name, func(t *testing.T) {
			msg := reconcile.TransientMessage("poll the provisioning run", tc.err)
			if !strings.HasPrefix(msg, "Failed to poll the provisioning run: ") || !strings.Contains(msg, tc.want) {
				t.Errorf("message %q does not name the step and %q", msg, tc.want)
			}
			if m := internalAddress.FindString(msg); m != "" {
				t.Errorf("message %q names %q", msg, m)
			}
		})
	}
}
