package syncer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

func TestBackendNamespaces(t *testing.T) {
	ctx := context.Background()
	b := framework.StartBackend(t)
	c, err := client.New(b.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backend := syncer.Backend{Client: c, Reader: c}
	const lc, other = "1bg4baqdjkcw9lz4", "2xyzother0000000"
	name := workspaces.VClusterNamespace(lc, "alice")

	t.Run("creates a labelled and annotated namespace, idempotently", func(t *testing.T) {
		for range 2 {
			if err := backend.EnsureNamespace(ctx, lc, name, "Tenant default/alice"); err != nil {
				t.Fatal(err)
			}
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			t.Fatal(err)
		}
		if ns.Labels[workspaces.FingerprintLabel] != workspaces.Fingerprint(lc) || ns.Annotations[workspaces.LogicalClusterAnnotation] != lc {
			t.Errorf("namespace metadata = %v %v", ns.Labels, ns.Annotations)
		}
		if got := ns.Labels[syncer.PodSecurityEnforceLabel]; got != syncer.PodSecurityBaseline {
			t.Errorf("vCluster host namespace enforces Pod Security %q, want baseline: %v", got, ns.Labels)
		}
		got, err := backend.WorkspaceNamespaces(ctx, lc)
		if err != nil || len(got) != 1 || got[0].Name != name {
			t.Errorf("WorkspaceNamespaces = %v, %v", got, err)
		}
	})

	t.Run("labels namespaces made before they carried Pod Security labels", func(t *testing.T) {
		// As the manager made them before: fingerprint label and annotations only.
		old := func(name, owner string) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      map[string]string{workspaces.FingerprintLabel: workspaces.Fingerprint(lc)},
				Annotations: map[string]string{workspaces.LogicalClusterAnnotation: lc},
			}}
			if owner != "" {
				ns.Annotations[syncer.OwnerAnnotation] = owner
			}
			if err := c.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
		store, host, host2 := workspaces.Namespace(lc), workspaces.VClusterNamespace(lc, "bob"), workspaces.VClusterNamespace(lc, "carol")
		old(store, "")
		old(host, "Tenant default/bob")
		old(host2, "Tenant default/carol")
		if err := backend.EnsureNamespaces(ctx, lc,
			syncer.NamespaceClaim{Name: store}, syncer.NamespaceClaim{Name: host, Owner: "Tenant default/bob"}); err != nil {
			t.Fatal(err)
		}
		if err := backend.EnsureNamespace(ctx, lc, host2, "Tenant default/carol"); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{store, host, host2} {
			ns := &corev1.Namespace{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
				t.Fatal(err)
			}
			for k, v := range syncer.PodSecurityLabels(lc, name) {
				if ns.Labels[k] != v {
					t.Errorf("namespace %s label %s = %q, want %q", name, k, ns.Labels[k], v)
				}
			}
			if ns.Labels[workspaces.FingerprintLabel] != workspaces.Fingerprint(lc) || ns.Annotations[workspaces.LogicalClusterAnnotation] != lc {
				t.Errorf("namespace %s lost its metadata: %v %v", name, ns.Labels, ns.Annotations)
			}
			if _, err := backend.DeleteNamespace(ctx, lc, name, ns.Annotations[syncer.OwnerAnnotation]); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("refuses a namespace of another logical cluster and writes nothing", func(t *testing.T) {
		err := backend.EnsureNamespace(ctx, other, name, "Tenant default/alice")
		if !syncer.IsCollision(err) {
			t.Fatalf("want a collision, got %v", err)
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			t.Fatal(err)
		}
		if ns.Annotations[workspaces.LogicalClusterAnnotation] != lc {
			t.Errorf("the namespace was modified: %v %v", ns.Labels, ns.Annotations)
		}
		// The other workspace cannot delete it either.
		if gone, err := backend.DeleteNamespace(ctx, other, name, ""); err != nil || !gone {
			t.Fatalf("DeleteNamespace(other) = %v, %v", gone, err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil || ns.DeletionTimestamp != nil {
			t.Fatalf("another workspace deleted the namespace: %v", err)
		}
	})

	t.Run("refuses a namespace another object of the same workspace claimed", func(t *testing.T) {
		err := backend.EnsureNamespace(ctx, lc, name, "Tenant other/alice")
		if !syncer.IsClaimed(err) {
			t.Fatalf("want a claim conflict, got %v", err)
		}
		if owns, err := backend.Owns(ctx, lc, name, "Tenant other/alice"); err != nil || owns {
			t.Fatalf("Owns(other tenant) = %v, %v", owns, err)
		}
		if gone, err := backend.DeleteNamespace(ctx, lc, name, "Tenant other/alice"); err != nil || !gone {
			t.Fatalf("DeleteNamespace(other tenant) = %v, %v", gone, err)
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil || ns.DeletionTimestamp != nil {
			t.Fatalf("another Tenant deleted the namespace: %v", err)
		}
	})

	t.Run("refuses an unmanaged namespace", func(t *testing.T) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcp-" + workspaces.Fingerprint(lc) + "-taken"}}); err != nil {
			t.Fatal(err)
		}
		err := backend.EnsureNamespace(ctx, lc, "kcp-"+workspaces.Fingerprint(lc)+"-taken", "")
		if !syncer.IsCollision(err) {
			t.Fatalf("want a collision for an unmanaged namespace, got %v", err)
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: "kcp-" + workspaces.Fingerprint(lc) + "-taken"}, ns); err != nil {
			t.Fatal(err)
		}
		if _, labelled := ns.Labels[syncer.PodSecurityEnforceLabel]; labelled {
			t.Errorf("an unmanaged namespace was labelled: %v", ns.Labels)
		}
	})

	// The manager reads the metadata of its own namespaces from a watch (Backend.Namespaces).
	t.Run("reads its own namespaces from the cache, and still refuses one the cache does not hold", func(t *testing.T) {
		fingerprinted, err := labels.NewRequirement(workspaces.FingerprintLabel, selection.Exists, nil)
		if err != nil {
			t.Fatal(err)
		}
		nsCache, err := cache.New(b.Config, cache.Options{ByObject: map[client.Object]cache.ByObject{
			syncer.NamespaceMetadata(): {Label: labels.NewSelector().Add(*fingerprinted)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = nsCache.Start(cctx) }()
		if !nsCache.WaitForCacheSync(cctx) {
			t.Fatal("the namespace cache did not start")
		}
		uncached := &countingReader{Reader: c}
		cached := syncer.Backend{Client: c, Reader: uncached, Namespaces: nsCache}
		const cl = "3cachedws0000000"
		store, host := workspaces.Namespace(cl), workspaces.VClusterNamespace(cl, "dora")
		claims := []syncer.NamespaceClaim{{Name: store}, {Name: host, Owner: "Tenant default/dora"}}
		if err := cached.EnsureNamespaces(ctx, cl, claims...); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, "both namespaces in the cache", func() (bool, string) {
			for _, n := range []string{store, host} {
				if err := nsCache.Get(ctx, client.ObjectKey{Name: n}, syncer.NamespaceMetadata()); err != nil {
					return false, err.Error()
				}
			}
			return true, ""
		})
		before := uncached.namespaceGets.Load()
		if err := cached.EnsureNamespaces(ctx, cl, claims...); err != nil {
			t.Fatal(err)
		}
		if n := uncached.namespaceGets.Load() - before; n != 0 {
			t.Errorf("%d uncached namespace reads for namespaces the cache holds, want 0", n)
		}
		// Not labelled, so not in the cache: the create finds it, the uncached read refuses it.
		taken := "kcp-" + workspaces.Fingerprint(cl) + "-vc-taken"
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: taken}}); err != nil {
			t.Fatal(err)
		}
		if err := cached.EnsureNamespaces(ctx, cl, syncer.NamespaceClaim{Name: taken, Owner: "Tenant default/taken"}); !syncer.IsCollision(err) {
			t.Fatalf("want a collision for an unmanaged namespace the cache does not hold, got %v", err)
		}
	})

	t.Run("deletes its own namespace and reports when it is gone", func(t *testing.T) {
		// kube-controller-manager's namespace controller finishes the deletion.
		err := framework.Poll(ctx, 100*time.Millisecond, 10*time.Second, func(ctx context.Context) (bool, error) {
			return backend.DeleteNamespace(ctx, lc, name, "Tenant default/alice")
		})
		if err != nil {
			t.Fatalf("namespace never went away: %v", err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Fatalf("namespace still there: %v", err)
		}
	})

	// The reconcilers do not hold a worker while Kubernetes' RBAC authorizer catches up with a
	// RoleBinding just made: they requeue the object (reconcile.AccessRecheck).
	t.Run("with DeferAccess a binding not in effect yet is AccessPending, and the object waits", func(t *testing.T) {
		deferred := syncer.Backend{Client: c, Reader: bindingsNotInEffect{c}, DeferAccess: true}
		ns := workspaces.VClusterNamespace(lc, "deferred")
		err := deferred.EnsureNamespace(ctx, lc, ns, "Tenant default/deferred")
		if !syncer.IsAccessPending(err) {
			t.Fatalf("EnsureNamespace = %v, want an AccessPendingError", err)
		}
		s := &reconcile.Scope{Backend: deferred, LogicalCluster: lc}
		if w, ok := reconcile.AsWaiting(s.EnsureNamespaces(ctx, syncer.NamespaceClaim{Name: ns, Owner: "Tenant default/deferred"})); !ok || w.After != reconcile.AccessRecheck {
			t.Errorf("the Scope's outcome = %v, want Waiting for %s", w, reconcile.AccessRecheck)
		}
		// Once the binding is in effect, the next pass goes on.
		if err := (syncer.Backend{Client: c, Reader: c, DeferAccess: true}).EnsureNamespace(ctx, lc, ns, "Tenant default/deferred"); err != nil {
			t.Fatal(err)
		}
	})
}

// bindingsNotInEffect reads as an identity whose RoleBinding the RBAC authorizer has not seen yet:
// the binding it just made is forbidden to it.
type bindingsNotInEffect struct{ client.Reader }

func (r bindingsNotInEffect) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*rbacv1.RoleBinding); ok {
		return apierrors.NewForbidden(rbacv1.Resource("rolebindings"), key.Name, errors.New("not bound yet"))
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// countingReader counts the namespace reads that reach the API server.
type countingReader struct {
	client.Reader
	namespaceGets atomic.Int64
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Namespace); ok {
		r.namespaceGets.Add(1)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}
