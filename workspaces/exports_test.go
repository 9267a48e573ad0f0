package workspaces

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseOwner(t *testing.T) {
	tests := map[string]struct {
		owner                 string
		kind, namespace, name string
		wantErr               bool
	}{
		"namespaced":     {owner: "Tenant default/alice-default", kind: "Tenant", namespace: "default", name: "alice-default"},
		"cluster-scoped": {owner: "ProviderMachineFlavor small", kind: "ProviderMachineFlavor", name: "small"},
		"no kind":        {owner: "default/alice", wantErr: true},
		"empty":          {owner: "", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kind, ns, n, err := ParseOwner(tc.owner)
			if (err != nil) != tc.wantErr || kind != tc.kind || ns != tc.namespace || n != tc.name {
				t.Errorf("ParseOwner(%q) = %q %q %q %v", tc.owner, kind, ns, n, err)
			}
		})
	}
}

// Only a NotFound naming the object asked for is evidence that it is gone.
func TestIsNotFoundOf(t *testing.T) {
	lc := schema.GroupResource{Group: "core.kcp.io", Resource: "logicalclusters"}
	tests := map[string]struct {
		err  error
		want bool
	}{
		"the object":            {err: apierrors.NewNotFound(lc, "cluster"), want: true},
		"a workspace path":      {err: apierrors.NewNotFound(schema.GroupResource{Group: "tenancy.kcp.io", Resource: "workspaces"}, "root:orgs:x")},
		"another object":        {err: apierrors.NewNotFound(lc, "other")},
		"forbidden":             {err: apierrors.NewForbidden(lc, "cluster", errors.New("access denied"))},
		"a 404 without details": {err: apierrors.NewGenericServerResponse(404, "get", lc, "", "Not found", 0, false)},
		"not an API error":      {err: errors.New("connection refused")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := IsNotFoundOf(tc.err, "core.kcp.io", "cluster"); got != tc.want {
				t.Errorf("IsNotFoundOf(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
