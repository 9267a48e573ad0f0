package jobs_test

import (
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/terraform/runner"
)

// envOf is the value of the runner container's variable name in run id's Job ("" when unset).
func (e *env) envOf(id, name string) string {
	e.t.Helper()
	job, err := e.admin.BatchV1().Jobs(e.ns).Get(e.ctx, api.JobName(id), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range job.Spec.Template.Spec.Containers[0].Env {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}

// A plan run saves its plan next to the state and reports its summary (the runner's own
// ReportPlan, as the run's identity); an apply run applies exactly that plan only when it is a
// succeeded plan of the same cluster and caller for the same inputs.
func TestApplyOfAnApprovedPlan(t *testing.T) {
	e := newEnv(t)
	plan := e.start(func(r *api.CreateRequest) { r.Operation = api.OperationPlan })
	if got, want := e.envOf(plan.ID, api.EnvPlanKey), api.PlanKey(testFingerprint, "prod-1", plan.ID); got != want {
		t.Errorf("the plan run's %s = %q, want %q", api.EnvPlanKey, got, want)
	}
	apply := func(mutate ...func(*api.CreateRequest)) (api.Provision, error) {
		return e.create(append([]func(*api.CreateRequest){func(r *api.CreateRequest) { r.PlanRun = plan.ID }}, mutate...)...)
	}
	var fe *api.FieldError
	if _, err := apply(); !errors.As(err, &fe) || fe.Field != "planRun" || !strings.Contains(fe.Message, "has not succeeded") {
		t.Fatalf("an apply of a plan whose run is still queued: %v, want planRun refused as not succeeded", err)
	}

	must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, plan.ID))
	cs := must[kubernetes.Interface](t)(jobruntest.ServiceAccountClient(backend, e.ns, api.ServiceAccountName(plan.ID)))
	out := &runner.OutputsSecret{Client: cs, Namespace: e.ns, Name: api.OutputsSecretName(plan.ID)}
	if err := out.ReportPlan(e.ctx, api.PlanSummary{Add: 3}, "Planned: 3 to add, 0 to change, 0 to destroy"); err != nil {
		t.Fatal(err)
	}
	must[*batchv1.Job](t)(e.jobCtl.Complete(e.ctx, plan.ID))
	got := e.get(plan.ID)
	if got.Status != api.StatusSucceeded || got.Operation != api.OperationPlan || got.Plan == nil || *got.Plan != (api.PlanSummary{Add: 3}) {
		t.Fatalf("the ended plan run: %+v, want succeeded with its summary", got)
	}

	for name, tc := range map[string]struct {
		mutate func(*api.CreateRequest)
		says   string
	}{
		"another owner":        {func(r *api.CreateRequest) { r.OwnerUID = "0f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f" }, "is not a plan of this cluster for this caller"},
		"another workspace":    {func(r *api.CreateRequest) { r.WorkspaceFingerprint = "0123456789ab" }, "is not a plan of this cluster for this caller"},
		"another cluster":      {cluster("prod-2"), "is not a plan of this cluster for this caller"},
		"inputs changed since": {func(r *api.CreateRequest) { r.NodeCount = 5 }, "planned other module inputs"},
		"a destroy of a plan":  {func(r *api.CreateRequest) { r.Operation = api.OperationDestroy }, "applies to apply runs only"},
	} {
		if _, err := apply(tc.mutate); !errors.As(err, &fe) || fe.Field != "planRun" || !strings.Contains(fe.Message, tc.says) {
			t.Errorf("%s: %v, want planRun refused saying %q", name, err, tc.says)
		}
	}
	if got := e.clusterJobs("prod-1"); len(got) != 1 {
		t.Errorf("%d Jobs after the refusals, want the plan run only", len(got))
	}

	applied, err := apply()
	if err != nil {
		t.Fatalf("the apply of the approved plan: %v", err)
	}
	if applied.PlanRun != plan.ID || applied.InputsHash != plan.InputsHash || e.envOf(applied.ID, api.EnvPlanKey) != api.PlanKey(testFingerprint, "prod-1", plan.ID) {
		t.Errorf("the apply run %+v (plan key %q), want it to load plan %s", applied, e.envOf(applied.ID, api.EnvPlanKey), plan.ID)
	}
	// An apply run is no plan to apply.
	must[*batchv1.Job](t)(e.jobCtl.Complete(e.ctx, applied.ID))
	if _, err := e.create(func(r *api.CreateRequest) { r.PlanRun = applied.ID }); !errors.As(err, &fe) || !strings.Contains(fe.Message, "is not a plan run") {
		t.Errorf("an apply of an apply run: %v", err)
	}
}
