package manager

import (
	"net/http"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, url    string
		verb, resource string
	}{
		{"GET", "https://b/api/v1/namespaces/kcp-abc/secrets/vc-x", "get", "secrets"},
		{"GET", "https://b/api/v1/namespaces/kcp-abc/secrets?labelSelector=owner%3Dhelm", "list", "secrets"},
		{"GET", "https://b/api/v1/namespaces?watch=true&labelSelector=x", "watch", "namespaces"},
		{"POST", "https://b/api/v1/namespaces", "create", "namespaces"},
		{"PATCH", "https://b/apis/rbac.authorization.k8s.io/v1/namespaces/n/rolebindings/r", "patch", "rolebindings"},
		{"DELETE", "https://b/api/v1/namespaces/n", "delete", "namespaces"},
		{"POST", "https://b/apis/authentication.k8s.io/v1/selfsubjectreviews", "create", "selfsubjectreviews"},
		// kcp: a workspace path and a virtual workspace's wildcard.
		{"PUT", "https://k/clusters/root:platform/apis/kubeopera.io/v1alpha1/namespaces/default/tenants/t/status", "update", "tenants/status"},
		{"GET", "https://k/services/apiexport/2abc/kubeopera.io/clusters/*/apis/kubeopera.io/v1alpha1/tenants?watch=true", "watch", "tenants"},
		{"PATCH", "https://k/services/apiexport/2abc/kubeopera.io/clusters/1xyz/apis/kubeopera.io/v1alpha1/namespaces/default/tenants/t", "patch", "tenants"},
		// Not a resource: discovery and the version.
		{"GET", "https://k/clusters/root/version", "get", "-"},
		{"GET", "https://b/apis", "get", "-"},
	} {
		req, err := http.NewRequest(tc.method, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		verb, resource := classify(req)
		if verb != tc.verb || resource != tc.resource {
			t.Errorf("%s %s: got %s %s, want %s %s", tc.method, tc.url, verb, resource, tc.verb, tc.resource)
		}
	}
}
