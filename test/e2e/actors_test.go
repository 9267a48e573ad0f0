package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kubeopera/kubeopera/test/framework/actors"
)

// vclusterWritesKubeconfig plays the vCluster control plane of release `release` once its Pod is
// up: vCluster writes its kubeconfig into Secret "vc-" + <vCluster name> in its host namespace,
// and the vCluster's name is the Helm release name, so release vc-alice-default writes Secret
// vc-vc-alice-default (keys config, certificate-authority, client-certificate, client-key,
// token; type Opaque; owned by the vCluster's Service; the server of exportKubeConfig.server).
// Source: loft-sh/vcluster v0.21.2 pkg/setup/controllers.go lines 207-273 and
// pkg/util/kubeconfig/kubeconfig.go lines 28-100; actors.VClusterWritesKubeconfig cites each
// part. No Pod runs here (there is no kubelet), so the test does exactly that write and nothing
// else. bin/devenv simulate-vcluster plays it with the same function.
func vclusterWritesKubeconfig(t *testing.T, e *env, namespace, release string) *actors.VClusterKubeconfig {
	t.Helper()
	written, err := actors.VClusterWritesKubeconfig(context.Background(), e.backend.Config, namespace, release)
	if err != nil {
		t.Fatalf("vCluster actor: %v", err)
	}
	return written
}

// secretMaterial is what of a vCluster's credentials must never appear in logs, events, status
// or metrics: its client key's PEM body (as a log of the raw key would show it) and the key's
// base64 (as client-key-data in a kubeconfig, or Secret data in JSON, would show it).
func secretMaterial(vc *actors.VClusterKubeconfig) []string {
	lines := strings.Split(strings.TrimSpace(string(vc.ClientKeyPEM)), "\n")
	return []string{lines[1], b64(string(vc.ClientKeyPEM))}
}

// kubeoperaAPI plays kubeopera-api's CloudSpace endpoint as docs/tenant.md#callback
// describes it: `PATCH /api/v1/cloudspaces/{cloudSpaceID}` with `Content-Type: application/json`,
// a JSON body {vcluster_id, namespace, kubeconfig_secret, status}, and the bearer token
// INTERNAL_SERVICE_TOKEN. It records every call and answers 200, except 503 for cloudSpaceIDs
// starting with "unreachable-" (an unreachable kubeopera-api, which the seed says is non-fatal),
// and 404 for any other method or path.
type kubeoperaAPI struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]apiCall
}

type apiCall struct {
	Auth        string
	ContentType string
	Body        map[string]string
}

func newKubeoperaAPI() *kubeoperaAPI {
	a := &kubeoperaAPI{calls: map[string][]apiCall{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/api/v1/cloudspaces/")
		if !ok || r.Method != http.MethodPatch {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		body := map[string]string{}
		_ = json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.calls[id] = append(a.calls[id], apiCall{Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: body})
		a.mu.Unlock()
		if strings.HasPrefix(id, "unreachable-") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	return a
}

func (a *kubeoperaAPI) callsFor(id string) []apiCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]apiCall(nil), a.calls[id]...)
}
