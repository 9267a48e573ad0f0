package sim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// KubeoperaAPI plays kubeopera-api's CloudSpace endpoint as docs/tenant.md#callback describes
// it: `PATCH /api/v1/cloudspaces/{cloudSpaceID}` with `Content-Type: application/json`, a JSON
// body {vcluster_id, namespace, kubeconfig_secret, status}, and the bearer token
// INTERNAL_SERVICE_TOKEN. It records every call and answers 200, except 503 for cloudSpaceIDs
// starting with "unreachable-" (an unreachable kubeopera-api, which docs/tenant.md says is
// non-fatal), and 404 for any other method or path. It listens on loopback; Close stops it.
type KubeoperaAPI struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]KubeoperaAPICall
}

// KubeoperaAPICall is one PATCH the endpoint answered.
type KubeoperaAPICall struct {
	Auth        string
	ContentType string
	Body        map[string]string
}

// NewKubeoperaAPI starts the endpoint.
func NewKubeoperaAPI() *KubeoperaAPI {
	a := &KubeoperaAPI{calls: map[string][]KubeoperaAPICall{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/api/v1/cloudspaces/")
		if !ok || r.Method != http.MethodPatch {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		body := map[string]string{}
		_ = json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.calls[id] = append(a.calls[id], KubeoperaAPICall{Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: body})
		a.mu.Unlock()
		if strings.HasPrefix(id, "unreachable-") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	return a
}

// CallsFor returns the calls made for cloudSpaceID id, oldest first.
func (a *KubeoperaAPI) CallsFor(id string) []KubeoperaAPICall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]KubeoperaAPICall(nil), a.calls[id]...)
}
