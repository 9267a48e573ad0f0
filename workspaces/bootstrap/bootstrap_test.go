package bootstrap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces/bootstrap"
	"github.com/kubeopera/kubeopera/workspaces/sweep"
	"github.com/kubeopera/kubeopera/workspaces/terminator"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// platform is deliberately not the default platform workspace: every helper must use the
// workspace it is given.
const platform = "root:kubeopera-alt"

// TestPlatformWorkspaceOnRealKCP runs on a real kcp server and a real backend:
//   - the bootstrap into a non-default platform workspace (twice): exports, endpoint slices and the
//     WorkspaceType live there and a workspace of that type gets both exports bound;
//   - the terminator of that WorkspaceType with the manager's least-privilege identity: while the
//     identity cannot read the workspace's CRs it keeps its terminator and the backend namespaces;
//     with the shipped role it deletes the CRs, waits for their finalizers, deletes the backend
//     namespaces and lets kcp finish;
//   - how kcp answers a LogicalCluster request for live, deleted and never-existing logical
//     clusters per identity (logged), and the orphan sweep's lookup built on those answers;
//   - the orphan sweep: report-only first, deletion on the second sighting, ownerless namespaces
//     of a live workspace reported, and a shard that cannot be asked turning "gone" into
//     "cannot tell".
func TestPlatformWorkspaceOnRealKCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	kcp := framework.StartKCP(t)
	be := framework.StartBackend(t)
	bc, err := client.New(be.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backend := syncer.Backend{Client: bc, Reader: bc}
	scheme := manager.Scheme()
	shardAdmin, err := kcp.ContextConfig("system:admin")
	if err != nil {
		t.Fatal(err)
	}
	userCfg, err := kcp.ContextConfig("user")
	if err != nil {
		t.Fatal(err)
	}
	kc := func(cfg *rest.Config, path string) client.Client {
		t.Helper()
		c, err := client.New(workspaces.ClusterConfig(cfg, path), client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	for i := range 2 {
		if err := bootstrap.Bootstrap(ctx, kcp.Config, platform); err != nil {
			t.Fatalf("bootstrap run %d: %v", i+1, err)
		}
	}
	if err := kc(kcp.Config, "root").Get(ctx, client.ObjectKey{Name: bootstrap.PlatformWorkspaceName}, &tenancyv1alpha1.Workspace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the bootstrap touched the default platform workspace %s: %v", bootstrap.PlatformWorkspace, err)
	}
	for _, slice := range []string{"kubeopera.io", "platform.edgeconnect.eu"} {
		es := &apisv1alpha1.APIExportEndpointSlice{}
		if err := kc(kcp.Config, platform).Get(ctx, client.ObjectKey{Name: slice}, es); err != nil {
			t.Fatal(err)
		}
		if es.Spec.APIExport.Path != platform {
			t.Errorf("endpoint slice %s points at %q, want %q", slice, es.Spec.APIExport.Path, platform)
		}
	}
	if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	tenantType := workspaces.TenantWorkspaceTypeIn(platform)
	acme, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root:orgs", "acme", tenantType)
	if err != nil {
		t.Fatal(err)
	}
	beta, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root:orgs", "beta", tenantType)
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{"root:orgs:acme", "root:orgs:beta"} {
		waitForBindings(ctx, t, kc(kcp.Config, ws), ws)
	}

	// The manager's identity is kcp's unprivileged "user". First it may act as the terminator but
	// not read the exports' content.
	terminateOnly := []any{
		map[string]any{"nonResourceURLs": []any{"/"}, "verbs": []any{"access"}},
		map[string]any{"apiGroups": []any{"apis.kcp.io"}, "resources": []any{"apiexportendpointslices", "apiexports"}, "verbs": []any{"get", "list", "watch"}},
		map[string]any{"apiGroups": []any{"tenancy.kcp.io"}, "resources": []any{"workspacetypes"}, "verbs": []any{"get", "list", "watch"}},
		map[string]any{"apiGroups": []any{"tenancy.kcp.io"}, "resources": []any{"workspacetypes"}, "resourceNames": []any{workspaces.TenantWorkspaceTypeName}, "verbs": []any{"terminate"}},
	}
	applyRBAC(ctx, t, kc(kcp.Config, platform), "test:terminate-only", "user", terminateOnly)

	// A Tenant whose controller holds a finalizer, and its backend namespaces.
	tenant := readSample(t, "tenant.yaml")
	tenant.SetFinalizers([]string{"test.kubeopera.io/held"})
	if err := kc(kcp.Config, "root:orgs:acme").Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	owner := "Tenant default/" + tenant.GetName()
	acmeNamespaces := []string{workspaces.Namespace(acme), workspaces.VClusterNamespace(acme, "alice-default")}
	if err := backend.EnsureNamespace(ctx, acme, acmeNamespaces[0], ""); err != nil {
		t.Fatal(err)
	}
	if err := backend.EnsureNamespace(ctx, acme, acmeNamespaces[1], owner); err != nil {
		t.Fatal(err)
	}

	managerKCP := workspaces.ClusterConfig(userCfg, platform)
	term := &terminator.Terminator{
		KCPConfig:     managerKCP,
		WorkspaceType: workspaces.TenantWorkspaceTypeName,
		Backend:       backend,
		Workspace: (&workspaces.WorkspaceCRs{KCPConfig: managerKCP, Scheme: scheme, Exports: []workspaces.ExportKinds{
			{EndpointSlice: "kubeopera.io", Lists: []client.ObjectList{&kov1alpha1.TenantList{}, &kov1alpha1.HostClusterList{}}},
			{EndpointSlice: "platform.edgeconnect.eu", Lists: []client.ObjectList{&platformv1alpha1.KubernetesClusterList{}}},
		}}).Remaining,
	}

	if err := workspaces.DeleteWorkspace(ctx, kcp.Config, "root:orgs", "acme"); err != nil {
		t.Fatal(err)
	}
	logicalCluster := func(lc string) (*corev1alpha1.LogicalCluster, error) {
		obj := &corev1alpha1.LogicalCluster{}
		return obj, kc(shardAdmin, lc).Get(ctx, client.ObjectKey{Name: corev1alpha1.LogicalClusterName}, obj)
	}

	t.Run("a terminator that cannot read the workspace's CRs keeps its terminator and the backend namespaces", func(t *testing.T) {
		// Run the terminator until it has seen the terminating workspace: it fails to clean it up
		// (or, wrongly, cleans it up).
		cleaned := func() bool {
			ns := &corev1.Namespace{}
			err := bc.Get(ctx, client.ObjectKey{Name: acmeNamespaces[0]}, ns)
			return err != nil || ns.DeletionTimestamp != nil
		}
		// framework.Poll, not Eventually, here and in the next subtest: every check is a terminator
		// pass, run once a second as before.
		var lastErr error
		err := framework.Poll(ctx, time.Second, time.Minute, func(ctx context.Context) (bool, error) {
			lastErr = term.Once(ctx)
			return (lastErr != nil && strings.Contains(lastErr.Error(), acme)) || cleaned(), nil
		})
		if err != nil {
			t.Fatalf("the terminator never saw the terminating workspace (%v); last pass: %v", err, lastErr)
		}
		if cleaned() {
			t.Fatal("the terminator deleted the backend namespaces of a workspace whose CRs it could not read")
		}
		t.Logf("terminator error without access: %v", lastErr)
		for range 3 {
			if err := term.Once(ctx); err == nil {
				t.Fatal("a terminator pass that cannot read the workspace's CRs reported success")
			}
		}
		lc, err := logicalCluster(acme)
		if err != nil {
			t.Fatalf("the workspace went away although its CRs were never read: %v", err)
		}
		if len(lc.Status.Terminators) == 0 || lc.DeletionTimestamp == nil {
			t.Fatalf("terminator removed: %v", lc.Status.Terminators)
		}
		for _, name := range acmeNamespaces {
			ns := &corev1.Namespace{}
			if err := bc.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil || ns.DeletionTimestamp != nil {
				t.Fatalf("backend namespace %s was deleted although the workspace's CRs were never read: %v", name, err)
			}
		}
	})

	t.Run("with the shipped role the terminator finalizes the CRs, cleans the backend and lets kcp finish", func(t *testing.T) {
		if err := bootstrap.BindManagerRole(ctx, kcp.Config, platform, "user"); err != nil {
			t.Fatal(err)
		}
		// The Tenant is deleted through the virtual workspace and waits for its finalizer; the
		// backend namespaces stay meanwhile.
		held := &unstructured.Unstructured{}
		held.SetGroupVersionKind(tenant.GroupVersionKind())
		var lastSeen string
		err := framework.Poll(ctx, time.Second, time.Minute, func(ctx context.Context) (bool, error) {
			passErr := term.Once(ctx)
			if err := kc(shardAdmin, acme).Get(ctx, client.ObjectKeyFromObject(tenant), held); err != nil {
				lastSeen = fmt.Sprintf("get Tenant: %v; terminator pass: %v", err, passErr)
				return false, nil
			}
			lastSeen = fmt.Sprintf("Tenant without deletionTimestamp, finalizers %v; terminator pass: %v", held.GetFinalizers(), passErr)
			return held.GetDeletionTimestamp() != nil, nil
		})
		if err != nil {
			t.Fatalf("the Tenant was never deleted (%v); last seen: %s", err, lastSeen)
		}
		for range 2 {
			_ = term.Once(ctx)
		}
		for _, name := range acmeNamespaces {
			ns := &corev1.Namespace{}
			if err := bc.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil || ns.DeletionTimestamp != nil {
				t.Fatalf("backend namespace %s deleted before the Tenant's finalizer ran: %v", name, err)
			}
		}
		// The Tenant controller's finalizer finishes (played here).
		held.SetFinalizers(nil)
		if err := kc(shardAdmin, acme).Update(ctx, held); err != nil {
			t.Fatal(err)
		}
		var lastErr error
		var lastLC string
		err = framework.Poll(ctx, time.Second, 2*time.Minute, func(ctx context.Context) (bool, error) {
			lastErr = term.Once(ctx)
			lc, err := logicalCluster(acme)
			if err != nil {
				lastLC = err.Error()
			} else {
				lastLC = fmt.Sprintf("still there, terminators %v", lc.Status.Terminators)
			}
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("the workspace never finished terminating (%v); last terminator pass: %v; LogicalCluster: %s", err, lastErr, lastLC)
		}
		for _, name := range acmeNamespaces {
			ns := &corev1.Namespace{}
			if err := bc.Get(ctx, client.ObjectKey{Name: name}, ns); err == nil && ns.DeletionTimestamp == nil {
				t.Fatalf("backend namespace %s survived the workspace", name)
			}
			// The backend's namespace controller finishes the deletion.
			framework.Eventually(t, time.Minute, "backend namespace "+name+" to go away", func() (bool, string) {
				err := bc.Get(ctx, client.ObjectKey{Name: name}, ns)
				if err != nil {
					return apierrors.IsNotFound(err), err.Error()
				}
				return false, fmt.Sprintf("phase %s, deletionTimestamp %v, finalizers %v", ns.Status.Phase, ns.DeletionTimestamp, ns.Spec.Finalizers)
			})
		}
	})

	const never = "3nonexistent0000"
	t.Run("kcp's answers for live, deleted and unknown logical clusters", func(t *testing.T) {
		for _, id := range []struct {
			name string
			cfg  *rest.Config
		}{{"kcp-admin", kcp.Config}, {"shard-admin", shardAdmin}, {"user", userCfg}} {
			for _, lc := range []struct{ what, name string }{{"live", beta}, {"deleted", acme}, {"never existed", never}} {
				t.Logf("GET /clusters/%s/.../logicalclusters/cluster as %s (%s): %s", lc.name, id.name, lc.what, probe(ctx, id.cfg, lc.name))
			}
		}
		shards := &corev1alpha1.ShardList{}
		if err := kc(shardAdmin, "root").List(ctx, shards); err != nil {
			t.Fatal(err)
		}
		for _, s := range shards.Items {
			t.Logf("shard %s: baseURL %s, externalURL %s, virtualWorkspaceURL %s", s.Name, s.Spec.BaseURL, s.Spec.ExternalURL, s.Spec.VirtualWorkspaceURL)
		}

		lookup := &sweep.ShardLookup{Config: shardAdmin}
		for lc, want := range map[string]sweep.WorkspaceState{beta: sweep.WorkspaceLive, acme: sweep.WorkspaceGone, never: sweep.WorkspaceGone} {
			if got, err := lookup.State(ctx, lc); err != nil || got != want {
				t.Errorf("shard-admin lookup of %s = %v, %v; want %v", lc, got, err, want)
			}
		}
		// Identities subject to kcp's authorizers cannot tell a gone workspace from one they may
		// not read: never "gone".
		for name, cfg := range map[string]*rest.Config{"kcp-admin": kcp.Config, "user": userCfg} {
			for _, lc := range []string{acme, never} {
				if got, err := (&sweep.ShardLookup{Config: cfg}).State(ctx, lc); err == nil {
					t.Errorf("%s lookup of %s = %v, want cannot tell", name, lc, got)
				}
			}
		}
	})

	t.Run("the orphan sweep reports, deletes only confirmed orphans and reports ownerless namespaces", func(t *testing.T) {
		// beta lives: a Tenant exists for one vCluster namespace, not for the other.
		alice := readSample(t, "tenant.yaml")
		if err := kc(kcp.Config, "root:orgs:beta").Create(ctx, alice); err != nil {
			t.Fatal(err)
		}
		for name, owner := range map[string]string{
			workspaces.Namespace(beta):                          "",
			workspaces.VClusterNamespace(beta, "alice-default"): "Tenant default/" + alice.GetName(),
			workspaces.VClusterNamespace(beta, "ghost"):         "Tenant default/ghost",
		} {
			if err := backend.EnsureNamespace(ctx, beta, name, owner); err != nil {
				t.Fatal(err)
			}
		}
		if err := backend.EnsureNamespace(ctx, never, workspaces.Namespace(never), ""); err != nil {
			t.Fatal(err)
		}
		owners := (&workspaces.OwnerLookup{KCPConfig: managerKCP, Kinds: map[string]workspaces.OwnerKind{
			"Tenant": {EndpointSlice: "kubeopera.io", Resource: kov1alpha1.GroupVersion.WithResource("tenants"), Namespaced: true},
		}}).Exists

		// An identity that cannot tell: everything unverified, nothing deleted.
		blind := &sweep.OrphanSweep{Backend: backend, Workspaces: (&sweep.ShardLookup{Config: userCfg}).State, Delete: true, MaxDeletions: 5}
		for range 2 {
			r, err := blind.Sweep(ctx)
			if err != nil || len(r.Orphans) != 0 || len(r.Deleted) != 0 || len(r.Unverified) != 4 {
				t.Fatalf("blind sweep = %+v, %v", r, err)
			}
		}

		sw := &sweep.OrphanSweep{Backend: backend, Workspaces: (&sweep.ShardLookup{Config: shardAdmin}).State, OwnerExists: owners}
		r, err := sw.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(r.Orphans) != fmt.Sprint([]string{workspaces.Namespace(never)}) || len(r.Deleted) != 0 {
			t.Fatalf("report-only sweep: orphans %v, deleted %v", r.Orphans, r.Deleted)
		}
		if fmt.Sprint(r.Ownerless) != fmt.Sprint([]string{workspaces.VClusterNamespace(beta, "ghost")}) {
			t.Fatalf("ownerless = %v, want only the ghost's namespace", r.Ownerless)
		}
		sw.Delete, sw.MaxDeletions = true, 5
		if r, err = sw.Sweep(ctx); err != nil || fmt.Sprint(r.Deleted) != fmt.Sprint([]string{workspaces.Namespace(never)}) {
			t.Fatalf("second sighting: deleted %v, %v", r, err)
		}
		for _, name := range []string{workspaces.Namespace(beta), workspaces.VClusterNamespace(beta, "alice-default"), workspaces.VClusterNamespace(beta, "ghost")} {
			ns := &corev1.Namespace{}
			if err := bc.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil || ns.DeletionTimestamp != nil {
				t.Fatalf("the live workspace's namespace %s was deleted: %v", name, err)
			}
		}

		// A second shard the sweep cannot ask (listed in root, unreachable): "gone" becomes
		// "cannot tell", as a live workspace there would otherwise look gone.
		phantom := &corev1alpha1.Shard{ObjectMeta: metav1.ObjectMeta{Name: "phantom"}, Spec: corev1alpha1.ShardSpec{BaseURL: "https://127.0.0.1:1", ExternalURL: "https://127.0.0.1:1"}}
		if err := kc(shardAdmin, "root").Create(ctx, phantom); err != nil {
			t.Fatal(err)
		}
		if got, err := (&sweep.ShardLookup{Config: shardAdmin}).State(ctx, never); err == nil {
			t.Fatalf("lookup with an unreachable shard = %v, want cannot tell", got)
		} else {
			t.Logf("lookup with an unreachable shard: %v", err)
		}
	})
}

func waitForBindings(ctx context.Context, t *testing.T, c client.Client, ws string) {
	t.Helper()
	for _, export := range []string{"kubeopera.io", "platform.edgeconnect.eu"} {
		var binding *apisv1alpha2.APIBinding
		framework.Eventually(t, time.Minute, "a bound APIBinding for export "+export+" in "+ws, func() (bool, string) {
			list := &apisv1alpha2.APIBindingList{}
			if err := c.List(ctx, list); err != nil {
				return false, "list APIBindings: " + err.Error()
			}
			var seen []string
			for i := range list.Items {
				b := &list.Items[i]
				if b.Spec.Reference.Export != nil && b.Spec.Reference.Export.Name == export && b.Status.Phase == apisv1alpha2.APIBindingPhaseBound {
					binding = b
					return true, ""
				}
				ref := "<no export>"
				if b.Spec.Reference.Export != nil {
					ref = b.Spec.Reference.Export.Path + ":" + b.Spec.Reference.Export.Name
				}
				seen = append(seen, fmt.Sprintf("%s (export %s, phase %q)", b.Name, ref, b.Status.Phase))
			}
			return false, fmt.Sprintf("APIBindings: %v", seen)
		})
		if binding.Spec.Reference.Export.Path != platform {
			t.Errorf("%s binds %s from %q, want %q", ws, export, binding.Spec.Reference.Export.Path, platform)
		}
		claims := map[string]bool{}
		for _, pc := range binding.Spec.PermissionClaims {
			if pc.State == apisv1alpha2.ClaimAccepted {
				claims[pc.Group+"/"+pc.Resource] = true
			}
		}
		for _, want := range []string{"/secrets", "/events", "/namespaces"} {
			if !claims[want] {
				t.Errorf("export %s: claim %s not accepted in the default binding of %s (claims: %v)", export, want, ws, binding.Spec.PermissionClaims)
			}
		}
	}
}

// applyRBAC creates a ClusterRole with rules and binds it to user.
func applyRBAC(ctx context.Context, t *testing.T, c client.Client, name, user string, rules []any) {
	t.Helper()
	for _, obj := range []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": name}, "rules": rules}},
		{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": name},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
		}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

func readSample(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096).Decode(&u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// probe GETs a logical cluster's LogicalCluster object with a plain REST client and describes
// kcp's answer: status code, message and details.
func probe(ctx context.Context, cfg *rest.Config, lc string) string {
	base := rest.CopyConfig(cfg)
	base.Host = workspaces.ServerBase(cfg.Host)
	dc, err := discovery.NewDiscoveryClientForConfig(base)
	if err != nil {
		return err.Error()
	}
	code := 0
	err = dc.RESTClient().Get().AbsPath("/clusters/" + lc + "/apis/core.kcp.io/v1alpha1/logicalclusters/cluster").Do(ctx).StatusCode(&code).Error()
	if err == nil {
		return fmt.Sprintf("%d", code)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		return fmt.Sprintf("%d %s %q details=%+v", code, s.Reason, s.Message, s.Details)
	}
	return fmt.Sprintf("%d %v", code, err)
}
