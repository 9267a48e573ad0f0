package apiexport

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

func tenantIn(lc, name string) *kov1alpha1.Tenant {
	return &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{"kcp.io/cluster": lc}}}
}

// routeFixture is a provider with one Tenant route on a plain queue, and a shard.
func routeFixture(t *testing.T) (*Provider, workqueue.TypedRateLimitingInterface[mcreconcile.Request], *route, *shard) {
	t.Helper()
	p, err := New(Options{Name: "kubeopera.io", Config: &rest.Config{}, EndpointSlice: "kubeopera.io", Scheme: runtime.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
	t.Cleanup(q.ShutDown)
	return p, q, &route{obj: &kov1alpha1.Tenant{}, queue: q}, &shard{url: "https://kcp/services/apiexport/x/kubeopera.io"}
}

// An object seen before its workspace's binding is ready waits for the engagement instead of
// being dropped; requests of a workspace unbound before it was engaged are dropped with it; an
// engaged workspace's objects go straight to the queue under its own cluster name.
func TestRequestsWaitForTheirWorkspace(t *testing.T) {
	p, q, r, s := routeFixture(t)
	binding := tenantIn("a", "binding")

	p.route(r, "a", tenantIn("a", "t1"), addOpts{})
	p.route(r, "b", tenantIn("b", "t2"), addOpts{})
	if q.Len() != 0 {
		t.Fatalf("%d requests queued for workspaces not engaged", q.Len())
	}
	p.engage("a", s, binding)
	if q.Len() != 1 {
		t.Fatalf("after engaging a: %d requests queued, want 1", q.Len())
	}
	got, _ := q.Get()
	want := mcreconcile.Request{ClusterName: "kubeopera.io#a", Request: requestFor(types.NamespacedName{Namespace: "default", Name: "t1"})}
	if got != want {
		t.Errorf("queued %v, want %v", got, want)
	}
	q.Done(got)

	// Engaging again (every binding update does) queues nothing new.
	p.engage("a", s, binding)
	p.disengage("b", s, binding) // b unbound before it was ever engaged
	p.engage("b", s, binding)
	if q.Len() != 0 {
		t.Errorf("%d requests queued by repeated engagement or a dropped workspace", q.Len())
	}
	p.route(r, "a", tenantIn("a", "t3"), addOpts{})
	if got, _ := q.Get(); got.ClusterName != "kubeopera.io#a" || got.Name != "t3" {
		t.Errorf("engaged workspace's request %v", got)
	}
	if ws, ok := p.Workspace("kubeopera.io#a"); !ok || ws.LogicalCluster != "a" {
		t.Errorf("Workspace(kubeopera.io#a) = %v, %v", ws, ok)
	}
	p.disengage("a", s, binding)
	if _, ok := p.Workspace("kubeopera.io#a"); ok {
		t.Error("a still engaged after its binding went")
	}
}

// A settled object found at a cold start waits for its drift check (Watch.Settled), parked or
// not; one that changed meanwhile goes at once, even when it was parked as settled first.
func TestSettledObjectsWaitForTheirDriftCheck(t *testing.T) {
	p, q, r, s := routeFixture(t)

	settled := addOpts{after: time.Hour}
	p.route(r, "a", tenantIn("a", "settled"), settled)
	p.route(r, "a", tenantIn("a", "changed"), settled)
	p.route(r, "a", tenantIn("a", "changed"), addOpts{})
	p.engage("a", s, tenantIn("a", "binding"))
	if q.Len() != 1 {
		t.Fatalf("after engaging: %d requests due, want 1 (the changed object's)", q.Len())
	}
	if got, _ := q.Get(); got.Name != "changed" {
		t.Errorf("due: %v, want the changed object", got)
	}
	p.route(r, "a", tenantIn("a", "settled-too"), settled)
	if q.Len() != 0 {
		t.Errorf("a settled object of an engaged workspace is due at once: %d requests", q.Len())
	}
}
