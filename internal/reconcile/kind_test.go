package reconcile_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
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
