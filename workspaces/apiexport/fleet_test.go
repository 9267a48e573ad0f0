package apiexport_test

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	imanager "github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

// These tests run the provider on a real kcp with the platform's exports and WorkspaceType:
// workspaces are engaged by their real APIBindings, events come from the real wildcard watches.

// recorder is a reconciler that remembers, per cluster name, how many requests it got, and checks
// that each request's object lives in the request's workspace: it reads it through the workspace's
// cached client, writes an annotation naming the workspace through its writer and records an
// event through the sink.
type recorder struct {
	p *apiexport.Provider

	mu        sync.Mutex
	requests  map[string]int
	misrouted []string
}

func (r *recorder) count(lc string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[lc]
}

func (r *recorder) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	ws, ok := r.p.Workspace(req.ClusterName)
	if !ok {
		return ctrl.Result{}, nil
	}
	r.mu.Lock()
	r.requests[ws.LogicalCluster]++
	r.mu.Unlock()
	tn := &kov1alpha1.Tenant{}
	if err := ws.Client().Get(ctx, req.NamespacedName, tn); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if got := tn.Annotations["kcp.io/cluster"]; got != ws.LogicalCluster {
		r.mu.Lock()
		r.misrouted = append(r.misrouted, fmt.Sprintf("request for %s got the object of %s", ws.LogicalCluster, got))
		r.mu.Unlock()
	}
	if tn.Annotations["test.kubeopera.io/seen-in"] == "" {
		patch := client.MergeFrom(tn.DeepCopy())
		metav1.SetMetaDataAnnotation(&tn.ObjectMeta, "test.kubeopera.io/seen-in", ws.LogicalCluster)
		if err := ws.Client().Patch(ctx, tn, patch); err != nil {
			return ctrl.Result{}, err
		}
		ws.Recorder("fleet-test").Eventf(tn, nil, corev1.EventTypeNormal, "Seen", "Test", "seen in %s", ws.LogicalCluster)
	}
	return ctrl.Result{}, nil
}

type env struct {
	kcp *rest.Config
	rec *recorder
	p   *apiexport.Provider
	seq int
}

func start(t *testing.T) *env {
	t.Helper()
	framework.SkipWithoutServers(t)
	ctx := t.Context()
	k := framework.StartKCP(t)
	if err := bootstrap.Bootstrap(ctx, k.Config, bootstrap.PlatformWorkspace); err != nil {
		t.Fatal(err)
	}
	if _, err := workspaces.EnsureWorkspace(ctx, k.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	platform := workspaces.ClusterConfig(k.Config, bootstrap.PlatformWorkspace)
	scheme := imanager.Scheme()
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 0})
	sink := &apiexport.EventSink{Scheme: scheme, Log: log}
	p, err := apiexport.New(apiexport.Options{Name: "kubeopera.io", Config: platform, EndpointSlice: "kubeopera.io", Scheme: scheme, Events: sink, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	// The local cluster is the platform workspace here: these tests need no backend.
	mgr, err := mcmanager.New(platform, p, manager.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetLocalManager().Add(sink); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{p: p, requests: map[string]int{}}
	// As reconcile.Kind's watch does: an update that changes only what the recorder writes itself
	// (its annotation) is not queued.
	updates := func(o, n client.Object) bool {
		return o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetLabels(), n.GetLabels())
	}
	if err := apiexport.NewController(mgr, "fleet-test", p, &kov1alpha1.Tenant{}, mccontroller.Options{Reconciler: rec, MaxConcurrentReconciles: 4, SkipNameValidation: ptrTo(true)},
		apiexport.Watch{Object: &kov1alpha1.Tenant{}, Updates: updates}); err != nil {
		t.Fatal(err)
	}
	framework.RunUntilCleanup(t, mgr)
	return &env{kcp: k.Config, rec: rec, p: p}
}

func ptrTo[T any](v T) *T { return &v }

// workspace makes a tenant workspace (it binds both exports) with a Tenant "t" and returns its
// logical cluster and a client of it.
func (e *env) workspace(t *testing.T, name string) (string, client.Client) {
	t.Helper()
	ctx := t.Context()
	lc, err := workspaces.EnsureWorkspace(ctx, e.kcp, "root:orgs", name, workspaces.TenantWorkspaceTypeIn(bootstrap.PlatformWorkspace))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(workspaces.ClusterConfig(e.kcp, "root:orgs:"+name), client.Options{Scheme: imanager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	tn := &kov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "t"},
		Spec:       kov1alpha1.TenantSpec{UserID: "u", TenantName: "t-" + name, CloudSpaceID: name},
	}
	tn.Spec.Quota.CPU.Set(1)
	tn.Spec.Quota.Memory.Set(1 << 30)
	// The binding's resources are served shortly after the workspace is Ready.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, tn)
		return err == nil || apierrors.IsAlreadyExists(err), nil
	}); err != nil {
		t.Fatalf("Tenant not created in %s: %v", name, err)
	}
	return lc, c
}

func TestProvider(t *testing.T) {
	e := start(t)
	ctx := t.Context()

	// multicluster-provider once delivered every workspace's events to every workspace.
	t.Run("an event in workspace A never reconciles workspace B", func(t *testing.T) {
		lcA, a := e.workspace(t, "fleet-a")
		lcB, b := e.workspace(t, "fleet-b")
		framework.Eventually(t, time.Minute, "both workspaces reconciled and annotated", func() (bool, string) {
			ta, tb := &kov1alpha1.Tenant{}, &kov1alpha1.Tenant{}
			ea, eb := a.Get(ctx, client.ObjectKey{Namespace: "default", Name: "t"}, ta), b.Get(ctx, client.ObjectKey{Namespace: "default", Name: "t"}, tb)
			return ea == nil && eb == nil && ta.Annotations["test.kubeopera.io/seen-in"] == lcA && tb.Annotations["test.kubeopera.io/seen-in"] == lcB,
				fmt.Sprintf("A: %v %v, B: %v %v", ea, ta.Annotations, eb, tb.Annotations)
		})
		// Let B's own events (its annotation write) settle before counting.
		framework.Eventually(t, 30*time.Second, "B's requests to settle", func() (bool, string) {
			before := e.rec.count(lcB)
			time.Sleep(2 * time.Second)
			return e.rec.count(lcB) == before, fmt.Sprintf("B had %d then %d requests", before, e.rec.count(lcB))
		})
		baseA, baseB := e.rec.count(lcA), e.rec.count(lcB)
		for i := range 20 {
			tn := &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "t"}}
			patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{"touch":"%d"}}}`, i))
			if err := a.Patch(ctx, tn, patch); err != nil {
				t.Fatal(err)
			}
		}
		framework.Eventually(t, 30*time.Second, "A's updates reconciled", func() (bool, string) {
			return e.rec.count(lcA) > baseA, fmt.Sprintf("A: %d requests, %d before", e.rec.count(lcA), baseA)
		})
		framework.Consistently(t, 3*time.Second, "B not reconciled for A's events", func() (bool, string) {
			return e.rec.count(lcB) == baseB, fmt.Sprintf("B: %d requests, %d before", e.rec.count(lcB), baseB)
		})
		e.rec.mu.Lock()
		misrouted := e.rec.misrouted
		e.rec.mu.Unlock()
		if len(misrouted) > 0 {
			t.Errorf("requests routed to the wrong workspace: %v", misrouted)
		}
		// The event went into A through the shared sink and writer, about A's Tenant.
		framework.Eventually(t, 30*time.Second, "A's event", func() (bool, string) {
			list := &corev1.EventList{}
			if err := a.List(ctx, list, client.InNamespace("default")); err != nil {
				return false, err.Error()
			}
			for _, ev := range list.Items {
				if ev.Reason == "Seen" && ev.InvolvedObject.Name == "t" && ev.Message == "seen in "+lcA {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d events, none from the test controller", len(list.Items))
		})
	})

	// The recorder annotates each Tenant once (its own write), which its watch's Updates drops; a
	// tenant's label change it keeps. Events of one kind reach the queue in the order they happened, so
	// once a second Tenant created after the first one's write has been reconciled, a pass the
	// write had caused would already have been counted.
	t.Run("updates a watch's Updates drops do not wake the controller; the others do", func(t *testing.T) {
		lc, c := e.workspace(t, "fleet-own")
		annotated := func(name string) {
			t.Helper()
			framework.Eventually(t, time.Minute, "Tenant "+name+" annotated by its pass", func() (bool, string) {
				tn := &kov1alpha1.Tenant{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, tn); err != nil {
					return false, err.Error()
				}
				return tn.Annotations["test.kubeopera.io/seen-in"] == lc, fmt.Sprint(tn.Annotations)
			})
		}
		annotated("t")
		barrier := &kov1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "barrier"},
			Spec:       kov1alpha1.TenantSpec{UserID: "u", TenantName: "barrier-own", CloudSpaceID: "barrier-own"},
		}
		barrier.Spec.Quota.CPU.Set(1)
		barrier.Spec.Quota.Memory.Set(1 << 30)
		if err := c.Create(ctx, barrier); err != nil {
			t.Fatal(err)
		}
		annotated("barrier")
		if got := e.rec.count(lc); got != 2 {
			t.Fatalf("%d passes for two created Tenants, each annotated once by its own pass: want 2 (the annotation writes woke the controller)", got)
		}
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched-by":"tenant"}}}`))
		if err := c.Patch(ctx, &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "t"}}, patch); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, "a pass for the tenant's write", func() (bool, string) {
			return e.rec.count(lc) == 3, fmt.Sprintf("%d passes, want 3", e.rec.count(lc))
		})
	})

	t.Run("engaging and disengaging 100 workspaces returns the goroutine count to its baseline", func(t *testing.T) {
		engagedBefore := e.p.Engaged()
		baseline := settledGoroutines(t)
		const n = 100
		clients := make([]client.Client, n)
		lcs := make([]string, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 10)
		for i := range n {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				lcs[i], clients[i] = e.workspace(t, fmt.Sprintf("fleet-many-%d", i))
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		framework.Eventually(t, 2*time.Minute, "100 more workspaces engaged and reconciled", func() (bool, string) {
			done := 0
			for _, lc := range lcs {
				if e.rec.count(lc) > 0 {
					done++
				}
			}
			return e.p.Engaged() == engagedBefore+n && done == n, fmt.Sprintf("engaged %d, reconciled %d of %d", e.p.Engaged(), done, n)
		})
		engaged := settledGoroutines(t)
		t.Logf("goroutines: %d before, %d with %d more workspaces engaged", baseline, engaged, n)

		// Unbind: delete each workspace's binding to the kubeopera.io export.
		for i, c := range clients {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				list := &apisv1alpha2.APIBindingList{}
				if err := c.List(ctx, list); err != nil {
					t.Errorf("workspace %d: %v", i, err)
					return
				}
				for _, b := range list.Items {
					if b.Spec.Reference.Export != nil && b.Spec.Reference.Export.Name == "kubeopera.io" {
						if err := c.Delete(ctx, &b); err != nil && !apierrors.IsNotFound(err) {
							t.Errorf("workspace %d: %v", i, err)
						}
					}
				}
			})
		}
		wg.Wait()
		framework.Eventually(t, 3*time.Minute, "100 workspaces disengaged", func() (bool, string) {
			return e.p.Engaged() == engagedBefore, fmt.Sprintf("engaged %d, want %d", e.p.Engaged(), engagedBefore)
		})
		// Idle HTTP/2 streams and the watch machinery may move by a few; per-workspace
		// goroutines would be hundreds.
		const slack = 10
		framework.Eventually(t, time.Minute, "the goroutine count back at its baseline", func() (bool, string) {
			got := settledGoroutines(t)
			return got <= baseline+slack, fmt.Sprintf("%d goroutines, baseline %d", got, baseline)
		})
	})
}

// settledGoroutines returns the goroutine count once two readings a second apart agree.
func settledGoroutines(t *testing.T) int {
	t.Helper()
	var prev, cur int
	framework.Eventually(t, time.Minute, "the goroutine count to settle", func() (bool, string) {
		prev, cur = cur, runtime.NumGoroutine()
		time.Sleep(time.Second)
		return prev == cur, fmt.Sprintf("%d then %d", prev, cur)
	})
	return cur
}
