package workspaces_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestExportsAreBoundOnlyThroughTheTenantWorkspaceType plays a tenant who wants the platform's
// APIs in a workspace the platform does not know as a tenant's: a workspace of kcp's universal
// type (no terminator, so deleting it would leave the backend behind; and a way around per-
// workspace limits, one workspace after another). On a real kcp, with the platform bootstrapped
// over an older one that granted bind to every authenticated user:
//   - the bootstrap removes that grant;
//   - kcp's unprivileged "user", admin of a universal workspace it created, is refused an
//     APIBinding to either export;
//   - a kubeopera-tenant workspace the same user creates still gets both exports bound (kcp's
//     apibinder initializer binds with its own identity; the user needs no bind).
func TestExportsAreBoundOnlyThroughTheTenantWorkspaceType(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kcp := framework.StartKCP(t)
	userCfg, err := kcp.ContextConfig("user")
	if err != nil {
		t.Fatal(err)
	}
	scheme := manager.Scheme()
	kc := func(cfg *rest.Config, path string) client.Client {
		t.Helper()
		c, err := client.New(workspaces.ClusterConfig(cfg, path), client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// An older platform: bind granted to system:authenticated (what apiexports/bootstrap/rbac.yaml
	// applied before).
	if err := workspaces.Bootstrap(ctx, kcp.Config, platform); err != nil {
		t.Fatal(err)
	}
	applyRBAC(ctx, t, kc(kcp.Config, platform), "kubeopera:bind", "ignored", []any{map[string]any{
		"apiGroups": []any{"apis.kcp.io"}, "resources": []any{"apiexports"},
		"resourceNames": []any{"kubeopera.io", "platform.edgeconnect.eu"}, "verbs": []any{"bind"},
	}})
	crb := &unstructured.Unstructured{}
	crb.SetAPIVersion("rbac.authorization.k8s.io/v1")
	crb.SetKind("ClusterRoleBinding")
	if err := kc(kcp.Config, platform).Get(ctx, client.ObjectKey{Name: "kubeopera:bind"}, crb); err != nil {
		t.Fatal(err)
	}
	crb.Object["subjects"] = []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}}
	if err := kc(kcp.Config, platform).Update(ctx, crb); err != nil {
		t.Fatal(err)
	}

	// This version's bootstrap over it.
	if err := workspaces.Bootstrap(ctx, kcp.Config, platform); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("rbac.authorization.k8s.io/v1")
		u.SetKind(kind)
		if err := kc(kcp.Config, platform).Get(ctx, client.ObjectKey{Name: "kubeopera:bind"}, u); !apierrors.IsNotFound(err) {
			t.Errorf("%s kubeopera:bind after the bootstrap: %v (want NotFound)", kind, err)
		}
	}

	// The tenant: kcp's "user", who may create workspaces in root:orgs (and so is admin of each).
	if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	applyRBAC(ctx, t, kc(kcp.Config, "root:orgs"), "test:workspace-creator", "user", []any{
		map[string]any{"apiGroups": []any{"tenancy.kcp.io"}, "resources": []any{"workspaces"}, "verbs": []any{"create", "get", "list", "watch"}},
		map[string]any{"nonResourceURLs": []any{"/"}, "verbs": []any{"access"}},
	})
	rogue, err := workspaces.EnsureWorkspace(ctx, userCfg, "root:orgs", "rogue", workspaces.WorkspaceType{})
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := workspaces.EnsureWorkspace(ctx, userCfg, "root:orgs", "tenant", workspaces.TenantWorkspaceTypeIn(platform))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("universal workspace root:orgs:rogue is %s, tenant workspace root:orgs:tenant is %s", rogue, tenant)

	// Its own universal workspace: admin there, and still no binding to the platform's exports.
	rc := kc(userCfg, "root:orgs:rogue")
	if err := rc.Create(ctx, &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "child"}}); err != nil {
		t.Fatalf("the user is not admin of the workspace it created (the test proves nothing): %v", err)
	}
	for _, export := range []string{"kubeopera.io", "platform.edgeconnect.eu"} {
		b := &apisv1alpha2.APIBinding{
			ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(export, ".", "-")},
			Spec: apisv1alpha2.APIBindingSpec{Reference: apisv1alpha2.BindingReference{
				Export: &apisv1alpha2.ExportBindingReference{Path: platform, Name: export},
			}},
		}
		err := rc.Create(ctx, b)
		if err == nil {
			t.Errorf("a tenant bound %s in a workspace of another type", export)
			continue
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no permission to bind") {
			t.Errorf("binding %s: %v, want Forbidden for want of bind", export, err)
		}
	}

	// Its kubeopera-tenant workspace has both exports bound, claims accepted.
	waitForBindings(ctx, t, kc(kcp.Config, "root:orgs:tenant"), "root:orgs:tenant")
}
