package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// vclusterWritesKubeconfig plays the vCluster control plane: once its Pod is up, vCluster writes
// its kubeconfig into Secret vc-<release> (key "config") in its host namespace. No Pod runs here
// (there is no kubelet), so the test does exactly that write and nothing else.
func vclusterWritesKubeconfig(t *testing.T, ctx context.Context, backend client.Client, namespace, release string) {
	t.Helper()
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- name: my-vcluster
  cluster:
    server: https://localhost:8443
    certificate-authority-data: ` + b64("vcluster-ca") + `
contexts:
- name: my-vcluster
  context: {cluster: my-vcluster, user: my-vcluster}
current-context: my-vcluster
users:
- name: my-vcluster
  user:
    client-certificate-data: ` + b64("vcluster-client-cert") + `
    client-key-data: ` + b64("vcluster-client-key") + `
`
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: release},
		Data:       map[string][]byte{"config": []byte(kubeconfig)},
	}
	if err := backend.Create(ctx, s); err != nil {
		t.Fatalf("vCluster actor failed to write Secret %s/%s: %v", namespace, release, err)
	}
}

// kubeoperaAPI plays kubeopera-api: it records CloudSpace PATCH callbacks and fails those for
// cloudSpaceIDs starting with "unreachable-".
type kubeoperaAPI struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]apiCall
}

type apiCall struct {
	Auth string
	Body map[string]string
}

func newKubeoperaAPI(t *testing.T) *kubeoperaAPI {
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
		a.calls[id] = append(a.calls[id], apiCall{Auth: r.Header.Get("Authorization"), Body: body})
		a.mu.Unlock()
		if strings.HasPrefix(id, "unreachable-") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *kubeoperaAPI) callsFor(id string) []apiCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]apiCall(nil), a.calls[id]...)
}
