package reconcile_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// TestPublishPhases: with PublishPhases, a pass that goes through several phases of the kind's
// state machine (Pass.Phase) writes each before the next step moves it on, in the same pass (no
// extra pass, no requeue of its own), so a watcher sees every phase; without it, the pass writes
// the phase it ends in only. The steps' conditions are as they left them.
func TestPublishPhases(t *testing.T) {
	for name, publish := range map[string]bool{"published": true, "lastonly": false} {
		t.Run(name, func(t *testing.T) {
			base := newClient(t)
			var written []string
			c := interceptor.NewClient(base, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					written = append(written, string(obj.(*kov1alpha1.Tenant).Status.Phase))
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
			newTenant(t, c, name, nil)
			steps := []reconcile.Step[*tenantScope]{
				{Name: "admit", Condition: "Admitted", Run: func(_ context.Context, s *tenantScope) error {
					reconcile.MarkTrue(s.obj, "Admitted", "Succeeded", "admitted")
					return nil
				}},
				{Name: "install", Condition: "Installed", Run: func(context.Context, *tenantScope) error {
					return reconcile.Waiting("Waiting", "installing", time.Minute)
				}},
			}
			phase := func(_ reconcile.Object, at string) string {
				if at == "Installed" {
					return string(kov1alpha1.TenantPhaseProvisioning)
				}
				return string(kov1alpha1.TenantPhasePending)
			}
			obj := get(t, c, name)
			res, err := reconcile.Pass[*tenantScope]{
				Client: c, Object: obj, Scope: &tenantScope{obj: obj}, Finalizer: finalizer, Normal: steps,
				Phase: phase, PublishPhases: publish,
			}.Run(context.Background())
			if err != nil || res.RequeueAfter != time.Minute {
				t.Fatalf("result %+v, err %v; want the install's wait (1m)", res, err)
			}
			want := []string{"Provisioning"}
			if publish {
				want = []string{"Pending", "Provisioning"}
			}
			if !slices.Equal(written, want) {
				t.Errorf("phases written %v, want %v", written, want)
			}
			got := get(t, c, name)
			for typ, want := range map[string]string{"Admitted": "True/Succeeded", "Installed": "False/Waiting", "Reconciling": "True/Waiting", "Ready": "False/Waiting"} {
				if c := condition(got, typ); c != want {
					t.Errorf("%s = %s, want %s", typ, c, want)
				}
			}
		})
	}
}
