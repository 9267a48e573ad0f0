package reconcile_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestChanged: which updates of its own objects wake a controller. Every write the passes make
// (status, the finalizer, their own annotations) does not; every change a tenant or an admin
// makes that a pass acts on does.
func TestChanged(t *testing.T) {
	k := &reconcile.Kind[*kov1alpha1.Tenant, any]{Finalizer: finalizer, OwnAnnotations: []string{"kubeopera.io/job-id"}}
	base := func() *kov1alpha1.Tenant {
		return &kov1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Generation: 2, Finalizers: []string{finalizer}, Labels: map[string]string{"team": "a"},
				Annotations: map[string]string{"kubeopera.io/job-id": "j1", "kcp.io/cluster": "x"}},
			Status: kov1alpha1.TenantStatus{Phase: kov1alpha1.TenantPhaseProvisioning},
		}
	}
	tests := map[string]struct {
		change func(*kov1alpha1.Tenant)
		want   bool
	}{
		"the manager's status write": {func(t *kov1alpha1.Tenant) {
			t.Status.Phase = kov1alpha1.TenantPhaseReady
			t.Status.ObservedGeneration = 2
			reconcile.MarkTrue(t, "Ready", "Succeeded", "ready")
		}, false},
		"the manager's own annotation":               {func(t *kov1alpha1.Tenant) { t.Annotations["kubeopera.io/job-id"] = "j2" }, false},
		"the manager's own annotation removed":       {func(t *kov1alpha1.Tenant) { delete(t.Annotations, "kubeopera.io/job-id") }, false},
		"the manager's finalizer added":              {func(t *kov1alpha1.Tenant) { t.Finalizers = append(t.Finalizers, "other") }, false},
		"a new spec":                                 {func(t *kov1alpha1.Tenant) { t.Generation = 3 }, true},
		"a deletion":                                 {func(t *kov1alpha1.Tenant) { now := metav1.Now(); t.DeletionTimestamp = &now }, true},
		"the finalizer taken away":                   {func(t *kov1alpha1.Tenant) { t.Finalizers = nil }, true},
		"the retry annotation":                       {func(t *kov1alpha1.Tenant) { t.Annotations[kov1alpha1.RetryAnnotation] = "1" }, true},
		"a label":                                    {func(t *kov1alpha1.Tenant) { t.Labels["team"] = "b" }, true},
		"an admin sets status.phase back to Pending": {func(t *kov1alpha1.Tenant) { t.Status.Phase = kov1alpha1.TenantPhasePending }, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old, updated := base(), base()
			tc.change(updated)
			if got := k.Changed(old, updated); got != tc.want {
				t.Errorf("Changed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSettled: which objects found at a cold start wait for their drift check instead of being
// reconciled at once: only those Ready at their generation, with the finalizer, not deleted.
func TestSettled(t *testing.T) {
	present := namespaces{workspaces.Namespace("lc1"): true, workspaces.Namespace("lc1") + "-vc-t": true}
	k := &reconcile.Kind[*kov1alpha1.Tenant, any]{Finalizer: finalizer, ReadyRequeue: func(*kov1alpha1.Tenant) time.Duration { return time.Minute },
		Backend: syncer.Backend{Namespaces: present},
		Namespaces: func(t *kov1alpha1.Tenant, lc string) []string {
			return []string{workspaces.Namespace(lc) + "-vc-" + t.Spec.TenantName}
		}}
	ready := func() *kov1alpha1.Tenant {
		t := &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Generation: 2, Finalizers: []string{finalizer}, Annotations: map[string]string{"kcp.io/cluster": "lc1"}},
			Spec:   kov1alpha1.TenantSpec{TenantName: "t"},
			Status: kov1alpha1.TenantStatus{Phase: kov1alpha1.TenantPhaseReady}}
		reconcile.MarkTrue(t, "Ready", "Succeeded", "ready")
		return t
	}
	tests := map[string]struct {
		change  func(*kov1alpha1.Tenant)
		settled bool
	}{
		"Ready at its generation":                   {func(*kov1alpha1.Tenant) {}, true},
		"a spec changed while the manager was down": {func(t *kov1alpha1.Tenant) { t.Generation = 3 }, false},
		"deleted while the manager was down":        {func(t *kov1alpha1.Tenant) { now := metav1.Now(); t.DeletionTimestamp = &now }, false},
		"its finalizer taken away":                  {func(t *kov1alpha1.Tenant) { t.Finalizers = nil }, false},
		"still provisioning": {func(t *kov1alpha1.Tenant) {
			t.Status.Phase = kov1alpha1.TenantPhaseProvisioning
			reconcile.MarkFalse(t, "Ready", "Waiting", "installing")
		}, false},
		"set back to Pending by an admin": {func(t *kov1alpha1.Tenant) { t.Status.Phase = kov1alpha1.TenantPhasePending }, false},
		// A new or restored backend: its namespaces are rebuilt at once.
		"its host namespace missing":        {func(t *kov1alpha1.Tenant) { t.Spec.TenantName = "gone" }, false},
		"its workspace's namespace missing": {func(t *kov1alpha1.Tenant) { t.Annotations["kcp.io/cluster"] = "lc2" }, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := ready()
			tc.change(obj)
			d := k.Settled(obj)
			if tc.settled != (d > 0) {
				t.Errorf("Settled = %v, want settled %v", d, tc.settled)
			}
			if d > time.Minute+1 {
				t.Errorf("Settled = %v, beyond the drift interval", d)
			}
		})
	}
	if d := (&reconcile.Kind[*kov1alpha1.Tenant, any]{Finalizer: finalizer}).Settled(ready()); d != 0 {
		t.Errorf("a kind without drift checks deferred a pass by %v", d)
	}
	// A cache that cannot answer (the backend unreachable at the start): reconciled at once, and
	// the cache is not asked again for every object meanwhile.
	broken := &unanswered{}
	k.Backend = syncer.Backend{Namespaces: broken}
	for range 3 {
		if d := k.Settled(ready()); d != 0 {
			t.Errorf("deferred by %v though the cache could not say whether the namespaces are there", d)
		}
	}
	if broken.calls != 1 {
		t.Errorf("the cache was asked %d times, want once", broken.calls)
	}
}

// unanswered is a cache that fails every read.
type unanswered struct{ calls int }

func (u *unanswered) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	u.calls++
	return apierrors.NewServiceUnavailable("backend unreachable")
}

func (u *unanswered) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// namespaces is the manager's cache of its backend namespaces, holding those set true.
type namespaces map[string]bool

func (n namespaces) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if !n[key.Name] {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
	}
	obj.SetName(key.Name)
	return nil
}

func (n namespaces) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }
