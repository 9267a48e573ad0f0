package bootstrap_test

import (
	"context"
	"fmt"
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
	"github.com/kubeopera/kubeopera/workspaces/bootstrap"
)

// TestExportsAreBoundOnlyThroughTheTenantWorkspaceType plays a tenant who wants the platform's
// APIs in a workspace the platform does not know as a tenant's: a workspace of kcp's universal
// type (no terminator, so deleting it would leave the backend behind; and a way around the
// per-workspace limits, one workspace after another). On a real kcp, with the platform
// bootstrapped over an older one that granted bind and use to every authenticated user:
//   - the bootstrap removes those grants;
//   - kcp's unprivileged "user", admin of a universal workspace it created, is refused an
//     APIBinding to either export, and refused a workspace of type kubeopera-tenant;
//   - once the platform admin grants it the shipped role kubeopera:tenant-workspace-creator (as
//     the group bootstrap.TenantWorkspaceCreators has it; kcp scopes impersonated identities to
//     one workspace, so the test cannot play a group member), it creates a kubeopera-tenant
//     workspace, which gets both exports bound (kcp's apibinder initializer binds as the
//     workspace's creator).
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
	grantAuthenticated := func(name string, rules []any) {
		t.Helper()
		for _, obj := range []*unstructured.Unstructured{
			{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": name}, "rules": rules}},
			{Object: map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": name},
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
				"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}},
			}},
		} {
			if err := kc(kcp.Config, platform).Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}

	// An older platform: bind and use granted to system:authenticated (what
	// apiexports/bootstrap/rbac.yaml applied before).
	if err := bootstrap.Bootstrap(ctx, kcp.Config, platform); err != nil {
		t.Fatal(err)
	}
	grantAuthenticated("kubeopera:bind", []any{map[string]any{
		"apiGroups": []any{"apis.kcp.io"}, "resources": []any{"apiexports"},
		"resourceNames": []any{"kubeopera.io", "platform.edgeconnect.eu"}, "verbs": []any{"bind"},
	}})
	grantAuthenticated("kubeopera:use-workspacetype", []any{map[string]any{
		"apiGroups": []any{"tenancy.kcp.io"}, "resources": []any{"workspacetypes"},
		"resourceNames": []any{"kubeopera-tenant"}, "verbs": []any{"use"},
	}})

	// This version's bootstrap over it.
	if err := bootstrap.Bootstrap(ctx, kcp.Config, platform); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubeopera:bind", "kubeopera:use-workspacetype"} {
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("rbac.authorization.k8s.io/v1")
			u.SetKind(kind)
			if err := kc(kcp.Config, platform).Get(ctx, client.ObjectKey{Name: name}, u); !apierrors.IsNotFound(err) {
				t.Errorf("%s %s after the bootstrap: %v (want NotFound)", kind, name, err)
			}
		}
	}

	// The tenant ("user") may create workspaces in root:orgs (and is admin of each it creates).
	if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	applyRBAC(ctx, t, kc(kcp.Config, "root:orgs"), "test:workspace-creator", "user", []any{
		map[string]any{"apiGroups": []any{"tenancy.kcp.io"}, "resources": []any{"workspaces"}, "verbs": []any{"create", "get", "list", "watch"}},
		map[string]any{"nonResourceURLs": []any{"/"}, "verbs": []any{"access"}},
	})
	// The role just applied takes effect a moment later (until then kcp refuses the user's
	// discovery, "failed to get server groups: unknown").
	framework.Eventually(t, time.Minute, "the user's own workspace root:orgs:rogue", func() (bool, string) {
		_, err := workspaces.EnsureWorkspace(ctx, userCfg, "root:orgs", "rogue", workspaces.WorkspaceType{})
		return err == nil, fmt.Sprint(err)
	})

	// Its own universal workspace: admin there, and still no binding to the platform's exports.
	rc := kc(userCfg, "root:orgs:rogue")
	if err := rc.Create(ctx, &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "child"}}); err != nil {
		t.Fatalf("the user is not admin of the workspace it created (the test would prove nothing): %v", err)
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
	// Nor may it make a tenant workspace of its own.
	tenantType := workspaces.TenantWorkspaceTypeIn(platform)
	ws := &tenancyv1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "self-made"}, Spec: tenancyv1alpha1.WorkspaceSpec{
		Type: &tenancyv1alpha1.WorkspaceTypeReference{Name: tenancyv1alpha1.WorkspaceTypeName(tenantType.Name), Path: tenantType.Path}}}
	if err := kc(userCfg, "root:orgs").Create(ctx, ws); !apierrors.IsForbidden(err) {
		t.Errorf("creating a kubeopera-tenant workspace as a tenant: %v, want Forbidden", err)
	}

	// The platform admin makes it a tenant-workspace creator: its tenant workspace has both
	// exports bound, claims accepted.
	crb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "test:onboarding"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubeopera:tenant-workspace-creator"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "user"}},
	}}
	if err := kc(kcp.Config, platform).Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	// kcp's authorizers see a new binding a moment later.
	framework.Eventually(t, time.Minute, "the tenant workspace created by a tenant-workspace creator", func() (bool, string) {
		_, err := workspaces.EnsureWorkspace(ctx, userCfg, "root:orgs", "tenant", tenantType)
		return err == nil, fmt.Sprint(err)
	})
	waitForBindings(ctx, t, kc(kcp.Config, "root:orgs:tenant"), "root:orgs:tenant")
}
