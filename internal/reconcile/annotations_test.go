package reconcile_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// TestPatchAnnotations: a step that records in-flight work in an annotation (a job ID) does not
// lose the pass' status to the resourceVersion guard of the status patch, and removing an
// annotation works the same way.
func TestPatchAnnotations(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "annotated", map[string]string{"kubeopera.io/old": "x"})
	record := reconcile.Step[*tenantScope]{Name: "start a job", Condition: "JobStarted", Run: func(ctx context.Context, s *tenantScope) error {
		if err := reconcile.PatchAnnotations(ctx, c, s.obj, map[string]*string{
			"kubeopera.io/job-id": ptr.To("job-1"),
			"kubeopera.io/old":    nil,
		}); err != nil {
			return err
		}
		return reconcile.Waiting("Waiting", "job job-1 is running", time.Minute)
	}}
	obj := get(t, c, "annotated")
	res, err := reconcile.Pass[*tenantScope]{
		Client: c, Object: obj, Scope: &tenantScope{obj: obj}, Finalizer: finalizer,
		Normal: []reconcile.Step[*tenantScope]{record},
	}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != time.Minute {
		t.Errorf("requeue = %v, want 1m (the step's wait; a lost status patch would requeue at once)", res.RequeueAfter)
	}
	got := get(t, c, "annotated")
	if got.Annotations["kubeopera.io/job-id"] != "job-1" {
		t.Errorf("job-id annotation = %q, want job-1", got.Annotations["kubeopera.io/job-id"])
	}
	if _, ok := got.Annotations["kubeopera.io/old"]; ok {
		t.Error("annotation kubeopera.io/old was not removed")
	}
	if got := condition(got, "JobStarted"); got != "False/Waiting" {
		t.Errorf("JobStarted = %s, want False/Waiting: the status written after the annotation was lost", got)
	}
	if got.Status.Message != "job job-1 is running" {
		t.Errorf("message = %q", got.Status.Message)
	}
}

// TestRecordAnnotationsOnAStaleCopy: a pass working from a copy older than the stored object (a
// cache behind by one write) that has just started an external job records its ID all the same
// (RecordAnnotations), where the guarded PatchAnnotations loses it to a conflict, and the next pass
// would start a second job; other annotations stay as stored.
func TestRecordAnnotationsOnAStaleCopy(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "stale", nil)
	stale := get(t, c, "stale")
	current := get(t, c, "stale")
	if err := reconcile.PatchAnnotations(context.Background(), c, current, map[string]*string{"kubeopera.io/other": ptr.To("written meanwhile")}); err != nil {
		t.Fatal(err)
	}
	err := reconcile.PatchAnnotations(context.Background(), c, stale.DeepCopy(), map[string]*string{"kubeopera.io/job-id": ptr.To("job-1")})
	if err == nil || !apierrors.IsConflict(err) {
		t.Fatalf("the guarded patch on a stale copy: %v, want a conflict (else this test proves nothing)", err)
	}
	if err := reconcile.RecordAnnotations(context.Background(), c, stale, map[string]*string{"kubeopera.io/job-id": ptr.To("job-1")}); err != nil {
		t.Fatalf("RecordAnnotations on a stale copy: %v", err)
	}
	got := get(t, c, "stale")
	if got.Annotations["kubeopera.io/job-id"] != "job-1" || got.Annotations["kubeopera.io/other"] != "written meanwhile" {
		t.Errorf("annotations %v, want the job ID recorded and the other write kept", got.Annotations)
	}
}

// tenantScope hands the steps the object of the pass.
type tenantScope struct{ obj *kov1alpha1.Tenant }

// TestCommitKeepsTheStepCondition: a step that finished and ends the pass with Commit (so the
// phase it reached is written before the next pass goes on) keeps its condition True, shows
// Reconciling, and is looked at again after the interval; later steps do not run.
func TestCommitKeepsTheStepCondition(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "committed", nil)
	later := false
	steps := []reconcile.Step[*tenantScope]{
		{Name: "validate", Condition: "Validated", Run: func(_ context.Context, s *tenantScope) error {
			reconcile.MarkTrue(s.obj, "Validated", "Succeeded", "valid")
			return reconcile.Commit("Progressing", "validated; installing next", 100*time.Millisecond)
		}},
		{Name: "install", Condition: "Installed", Run: func(context.Context, *tenantScope) error { later = true; return nil }},
	}
	obj := get(t, c, "committed")
	res, err := reconcile.Pass[*tenantScope]{Client: c, Object: obj, Scope: &tenantScope{obj: obj}, Finalizer: finalizer, Normal: steps}.Run(context.Background())
	if err != nil || res.RequeueAfter != 100*time.Millisecond {
		t.Fatalf("result %+v, err %v; want a requeue after 100ms", res, err)
	}
	got := get(t, c, "committed")
	if later {
		t.Error("the step after the commit ran")
	}
	for typ, want := range map[string]string{"Validated": "True/Succeeded", "Reconciling": "True/Progressing", "Ready": "False/Progressing", "Installed": "absent"} {
		if c := condition(got, typ); c != want {
			t.Errorf("%s = %s, want %s", typ, c, want)
		}
	}
}
