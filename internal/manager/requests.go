package manager

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiRequests counts the manager's requests by target (kcp or backend), verb and resource: what
// client-go's rest_client_requests_total (by host, method and code) cannot say, which of the
// manager's reads and writes a reconcile costs. Its labels are bounded by the kinds the manager
// touches, never by workspaces or names.
var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kubeopera_api_requests_total",
	Help: "Requests the manager sent, by target (kcp; backend, and helm for the backend requests of Helm's operations), Kubernetes verb and resource (resource/subresource).",
}, []string{"target", "verb", "resource"})

func init() { metrics.Registry.MustRegister(apiRequests) }

// Targets of apiRequests.
const (
	targetKCP     = "kcp"
	targetBackend = "backend"
	// targetHelm is the backend too, the requests of Helm's operations.
	targetHelm = "helm"
)

// countRequests makes every client built from cfg count its requests in apiRequests under
// target.
func countRequests(cfg *rest.Config, target string) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestCounter{next: rt, target: target} })
}

type requestCounter struct {
	next   http.RoundTripper
	target string
}

func (c requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := classify(req)
	apiRequests.WithLabelValues(c.target, verb, resource).Inc()
	return c.next.RoundTrip(req)
}

// requestInfo parses Kubernetes API paths the way the apiserver does.
var requestInfo = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// classify returns the Kubernetes verb and the resource (with its subresource) of req. kcp's
// prefixes (/clusters/<name>, a virtual workspace's /services/.../clusters/<name>) are cut
// first; a path that is no resource (discovery, /version) is counted under its verb and "-".
func classify(req *http.Request) (verb, resource string) {
	path := req.URL.Path
	if i := strings.LastIndex(path, "/clusters/"); i >= 0 {
		rest := path[i+len("/clusters/"):]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			path = rest[j:]
		} else {
			path = "/"
		}
	}
	r := req.Clone(req.Context())
	r.URL.Path = path
	info, err := requestInfo.NewRequestInfo(r)
	if err != nil || !info.IsResourceRequest {
		return strings.ToLower(req.Method), "-"
	}
	resource = info.Resource
	if info.Subresource != "" {
		resource += "/" + info.Subresource
	}
	return info.Verb, resource
}
