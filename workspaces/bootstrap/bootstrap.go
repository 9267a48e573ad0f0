package bootstrap

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/kubeopera/kubeopera/workspaces"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/apiexports"
	"github.com/kubeopera/kubeopera/internal/manifests"
)

const (
	// PlatformWorkspaceName is the default platform workspace's name under root.
	PlatformWorkspaceName = "kubeopera"
	// PlatformWorkspace is the default platform workspace's path (the manager's
	// --platform-workspace default). Every helper takes the platform workspace it works in; this
	// constant is only what callers pass when they have no other.
	PlatformWorkspace = "root:" + PlatformWorkspaceName
	// fieldOwner is the server-side apply field manager of the bootstrap.
	fieldOwner = "kubeopera-bootstrap"
)

// Bootstrap makes the platform workspace platformWorkspace (e.g. root:kubeopera) hold what the
// platform publishes: the APIResourceSchemas, both APIExports, their endpoint slices, the
// maximal-permission-policy RBAC and the WorkspaceType kubeopera-tenant, whose default bindings
// and endpoint slices point at platformWorkspace. Missing workspaces on the path are created with
// kcp's default type. It is idempotent: it server-side-applies every object, so a second run
// changes nothing. cfg is a kcp admin config (any /clusters/ path is ignored).
func Bootstrap(ctx context.Context, cfg *rest.Config, platformWorkspace string) error {
	if err := ensureWorkspacePath(ctx, cfg, platformWorkspace); err != nil {
		return err
	}
	objs, err := platformObjects(platformWorkspace)
	if err != nil {
		return err
	}
	pcfg := workspaces.ClusterConfig(cfg, platformWorkspace)
	// Schemas and exports first; RBAC, slices and the type after. kcp may need a moment to serve
	// newly registered kinds, so each object is retried briefly.
	c, err := client.New(pcfg, client.Options{})
	if err != nil {
		return fmt.Errorf("failed to create client for %s: %w", platformWorkspace, err)
	}
	for _, obj := range objs {
		var lastErr error
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := applyObject(ctx, c, obj); err != nil {
				lastErr = err
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("failed to apply %s %s in %s: %w (last error: %v)", obj.GetKind(), obj.GetName(), platformWorkspace, err, lastErr)
		}
	}
	for _, obj := range obsoleteObjects() {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete the obsolete %s %s in %s: %w", obj.GetKind(), obj.GetName(), platformWorkspace, err)
		}
	}
	return nil
}

// TenantWorkspaceCreators is the group whose members may create tenant workspaces (use the
// WorkspaceType kubeopera-tenant) and so bind the exports, which kcp checks for a workspace's
// creator when it creates the default bindings (apiexports/bootstrap/rbac.yaml).
const TenantWorkspaceCreators = "kubeopera:tenant-workspace-creators"

// obsoleteObjects are what earlier versions of the bootstrap applied and this one removes: the
// grants of bind on both exports and of use of the WorkspaceType to every authenticated user
// (ClusterRoles and ClusterRoleBindings kubeopera:bind and kubeopera:use-workspacetype), which let
// a tenant bind the exports in a workspace of any type, outside the terminator and the limits.
func obsoleteObjects() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, name := range []string{"kubeopera:bind", "kubeopera:use-workspacetype"} {
		for _, kind := range []string{"ClusterRoleBinding", "ClusterRole"} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("rbac.authorization.k8s.io/v1")
			u.SetKind(kind)
			u.SetName(name)
			out = append(out, u)
		}
	}
	return out
}

// ensureWorkspacePath creates every workspace of path below root (e.g. root:platform:kubeopera)
// that does not exist yet.
func ensureWorkspacePath(ctx context.Context, cfg *rest.Config, path string) error {
	parts := strings.Split(path, ":")
	if len(parts) < 2 || parts[0] != "root" {
		return fmt.Errorf("platform workspace %q is not a workspace path below root", path)
	}
	for i := 1; i < len(parts); i++ {
		if _, err := workspaces.EnsureWorkspace(ctx, cfg, strings.Join(parts[:i], ":"), parts[i], workspaces.WorkspaceType{}); err != nil {
			return err
		}
	}
	return nil
}

func applyObject(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	obj = obj.DeepCopy()
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// platformObjects reads the embedded manifests in apply order, pointing every reference to the
// platform workspace (endpoint slices' exports, the WorkspaceType's default bindings) at
// platformWorkspace.
func platformObjects(platformWorkspace string) ([]*unstructured.Unstructured, error) {
	order := func(u *unstructured.Unstructured) int {
		switch u.GetKind() {
		case "APIResourceSchema":
			return 0
		case "APIExport":
			return 1
		case "APIExportEndpointSlice":
			return 2
		case "ClusterRole":
			return 3
		case "ClusterRoleBinding":
			return 4
		default:
			return 5
		}
	}
	var objs []*unstructured.Unstructured
	err := fs.WalkDir(apiexports.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".yaml" {
			return err
		}
		raw, err := apiexports.FS.ReadFile(p)
		if err != nil {
			return err
		}
		decoded, err := manifests.Decode(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, u := range decoded {
			unstructured.RemoveNestedField(u.Object, "status")
			unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
			if err := pointAtPlatformWorkspace(u, platformWorkspace); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			objs = append(objs, u)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(objs, func(i, j int) bool { return order(objs[i]) < order(objs[j]) })
	return objs, nil
}

// pointAtPlatformWorkspace rewrites the manifests' references to the platform workspace: an
// endpoint slice's spec.export.path and a WorkspaceType's spec.defaultAPIBindings[].path.
func pointAtPlatformWorkspace(u *unstructured.Unstructured, platformWorkspace string) error {
	switch u.GetKind() {
	case "APIExportEndpointSlice":
		return unstructured.SetNestedField(u.Object, platformWorkspace, "spec", "export", "path")
	case "WorkspaceType":
		bindings, found, err := unstructured.NestedSlice(u.Object, "spec", "defaultAPIBindings")
		if err != nil || !found {
			return err
		}
		for _, b := range bindings {
			if m, ok := b.(map[string]any); ok {
				m["path"] = platformWorkspace
			}
		}
		return unstructured.SetNestedSlice(u.Object, bindings, "spec", "defaultAPIBindings")
	}
	return nil
}

// ManagerRole is the ClusterRole in the platform workspace that the manager's kcp identity needs
// (apiexports/bootstrap/manager-rbac.yaml).
const ManagerRole = "kubeopera:manager"

// BindManagerRole binds ManagerRole in platformWorkspace to user, idempotently.
func BindManagerRole(ctx context.Context, cfg *rest.Config, platformWorkspace, user string) error {
	c, err := client.New(workspaces.ClusterConfig(cfg, platformWorkspace), client.Options{})
	if err != nil {
		return err
	}
	crb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRoleBinding",
		"metadata":   map[string]any{"name": ManagerRole + ":" + user},
		"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ManagerRole},
		"subjects":   []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	}}
	if err := applyObject(ctx, c, crb); err != nil {
		return fmt.Errorf("failed to bind %s to %s in %s: %w", ManagerRole, user, platformWorkspace, err)
	}
	return nil
}
