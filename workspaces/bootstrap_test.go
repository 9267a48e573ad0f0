package workspaces_test

import (
	"context"
	"testing"
	"time"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestBootstrapOnRealKCP bootstraps root:kubeopera twice on a real kcp server and checks that a
// workspace of type kubeopera-tenant comes with both exports bound and every claim accepted.
func TestBootstrapOnRealKCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kcp := framework.StartKCP(t)

	for i := range 2 {
		if err := workspaces.Bootstrap(ctx, kcp.Config); err != nil {
			t.Fatalf("bootstrap run %d: %v", i+1, err)
		}
	}
	if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	cluster, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root:orgs", "acme", workspaces.TenantWorkspaceType)
	if err != nil {
		t.Fatal(err)
	}
	if cluster == "" {
		t.Fatal("workspace has no logical cluster name")
	}

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apisv1alpha2.AddToScheme(scheme)
	c, err := client.New(workspaces.ClusterConfig(kcp.Config, "root:orgs:acme"), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, export := range []string{"kubeopera.io", "platform.edgeconnect.eu"} {
		var binding *apisv1alpha2.APIBinding
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			list := &apisv1alpha2.APIBindingList{}
			if err := c.List(ctx, list); err != nil {
				return false, nil
			}
			for i := range list.Items {
				b := &list.Items[i]
				if b.Spec.Reference.Export != nil && b.Spec.Reference.Export.Name == export && b.Status.Phase == apisv1alpha2.APIBindingPhaseBound {
					binding = b
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("no bound APIBinding for export %s in root:orgs:acme", export)
		}
		claims := map[string]bool{}
		for _, pc := range binding.Spec.PermissionClaims {
			if pc.State == apisv1alpha2.ClaimAccepted {
				claims[pc.Group+"/"+pc.Resource] = true
			}
		}
		for _, want := range []string{"/secrets", "/events", "/namespaces"} {
			if !claims[want] {
				t.Errorf("export %s: claim %s not accepted in the default binding (claims: %v)", export, want, binding.Spec.PermissionClaims)
			}
		}
	}

	// The orphan sweep: a backend namespace whose workspace is gone is reported and deleted; the
	// live workspace's namespace is kept.
	backend := framework.StartBackend(t)
	bc, err := client.New(backend.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := workspaces.Backend{Client: bc, Reader: bc}
	const gone = "3nonexistent0000"
	for _, lc := range []string{cluster, gone} {
		if err := b.EnsureNamespace(ctx, lc, workspaces.Namespace(lc), ""); err != nil {
			t.Fatal(err)
		}
	}
	// With an identity that may not read other workspaces' LogicalClusters, nothing is deleted.
	kept, err := (&workspaces.OrphanSweep{KCPConfig: kcp.Config, Backend: b}).Sweep(ctx)
	if err != nil || len(kept) != 0 {
		t.Fatalf("a sweep that cannot look workspaces up must keep everything: %v, %v", kept, err)
	}
	shardAdmin, err := kcp.ContextConfig("system:admin")
	if err != nil {
		t.Fatal(err)
	}
	sweep := &workspaces.OrphanSweep{KCPConfig: shardAdmin, Backend: b, MinAge: time.Hour}
	orphans, err := sweep.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending := &corev1.Namespace{}
	if err := bc.Get(ctx, client.ObjectKey{Name: workspaces.Namespace(gone)}, pending); err != nil || pending.DeletionTimestamp != nil {
		t.Fatalf("an orphan seen once must not be deleted before MinAge: %v", err)
	}
	sweep.MinAge = 0 // the orphan has now been confirmed
	orphans, err = sweep.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0] != workspaces.Namespace(gone) {
		t.Fatalf("orphans = %v, want only %s", orphans, workspaces.Namespace(gone))
	}
	live := &corev1.Namespace{}
	if err := bc.Get(ctx, client.ObjectKey{Name: workspaces.Namespace(cluster)}, live); err != nil || live.DeletionTimestamp != nil {
		t.Fatalf("the live workspace's namespace was deleted: %v", err)
	}
	orphan := &corev1.Namespace{}
	if err := bc.Get(ctx, client.ObjectKey{Name: workspaces.Namespace(gone)}, orphan); err == nil && orphan.DeletionTimestamp == nil {
		t.Fatal("the orphan was reported but not deleted")
	}
}
