package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim/provisioning"
	"github.com/kubeopera/kubeopera/workspaces"
)

// Day-2 changes to provisioned clusters (docs/hostcluster.md#day-2-changes), driven as a tenant
// through the manager binary on the suite's provisioning side (provisioning_test.go): a changed
// nodeCount is applied by a second run on the same state, a destroy never overlaps an apply, and
// approvePlan manual stops at the plan until the tenant approves exactly it.

// runsOf returns the provisioner's Jobs of a cluster by run ID.
func (e *env) runsOf(t *testing.T, clusterID string) map[string]batchv1.Job {
	t.Helper()
	out := map[string]batchv1.Job{}
	for _, j := range e.provisionRuns(t, clusterID) {
		out[j.Labels[api.LabelRun]] = j
	}
	return out
}

// moduleOf is run id's rendered root module (main.tf of its ConfigMap), as an admin reads it.
func (e *env) moduleOf(t *testing.T, id string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.backendC.Get(context.Background(), client.ObjectKey{Namespace: api.DefaultJobsNamespace, Name: api.ModuleConfigMapName(id)}, cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["main.tf"]
}

var nodeCountRe = regexp.MustCompile(`node_count\s*=\s*(\d+)`)

// backendBlock is the terraform { backend "s3" {...} } block of a module: bucket, key, region.
func backendBlock(module string) string {
	if i := strings.Index(module, "locals"); i > 0 {
		return module[:i]
	}
	return module
}

// endedBefore reports whether run a's Job completed no later than run b's Job was created and
// started (Job times have a resolution of a second).
func endedBefore(a, b batchv1.Job) bool {
	return a.Status.CompletionTime != nil && b.Status.StartTime != nil &&
		!b.CreationTimestamp.Before(a.Status.CompletionTime) && !b.Status.StartTime.Before(a.Status.CompletionTime)
}

func TestProvisionDay2NodeCountRunsAgainOnTheSameState(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	target := e.hostTarget(t)
	pe := e.provisioning(t)
	c, lc, _ := e.tenantWorkspace(t, "prov-day2")
	const clusterID = "prov-day2"
	param := provisioning.AdminKubeconfigParameter(workspaces.Fingerprint(lc), clusterID)
	pe.AWS.SSM.Put(param, "SecureString", "PENDING")
	pe.AWS.SSM.PublishAdminKubeconfig(param, target.Kubeconfig, 2*time.Second)
	e.requestCluster(t, c, pe, "grown", clusterID)
	hc := waitHostClusterPhase(t, c, "grown", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	first := hc.Status.Provisioning
	if first == nil || first.AppliedRun == "" || first.AppliedInputsHash == "" {
		t.Fatalf("status.provisioning %+v once Ready, want the run and inputs it applied", first)
	}

	// The tenant grows the cluster: nodeCount 2 -> 5.
	hc.Spec.Provisioning.NodeCount = 5
	if err := c.Update(context.Background(), hc); err != nil {
		t.Fatal(err)
	}
	gen := hc.Generation
	framework.Eventually(t, 5*time.Minute, "grown Ready again at generation "+fmt.Sprint(gen)+" after a second run", func() (bool, string) {
		hc = getHostCluster(t, c, "grown")
		ready := reconcile.GetCondition(hc, kov1alpha1.ReadyCondition)
		return hc.Status.Phase == kov1alpha1.HostClusterPhaseReady && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == gen &&
			hc.Status.Provisioning != nil && hc.Status.Provisioning.AppliedRun != first.AppliedRun, describeHC(hc)
	})
	second := hc.Status.Provisioning
	if second.AppliedInputsHash == first.AppliedInputsHash {
		t.Errorf("appliedInputsHash unchanged (%s) after nodeCount 5", second.AppliedInputsHash)
	}
	if cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition); cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != gen ||
		!strings.Contains(cond.Message, second.AppliedRun) || !strings.Contains(cond.Message, "5 nodes") {
		t.Errorf("Provisioned = %+v, want True at generation %d naming run %s and 5 nodes", cond, gen, second.AppliedRun)
	}
	runs := e.runsOf(t, clusterID)
	if len(runs) != 2 {
		t.Fatalf("%d runs of %s, want the build and the day-2 run", len(runs), clusterID)
	}
	one, two := runs[first.AppliedRun], runs[second.AppliedRun]
	for _, j := range []batchv1.Job{one, two} {
		if j.Labels[api.LabelOperation] != string(api.OperationApply) {
			t.Errorf("run %s is %q, want apply", j.Labels[api.LabelRun], j.Labels[api.LabelOperation])
		}
	}
	if !endedBefore(one, two) {
		t.Errorf("the build ended %v, the day-2 run was created %v and started %v: want it after", one.Status.CompletionTime, two.CreationTimestamp, two.Status.StartTime)
	}
	// The same state; the new count rendered into the module.
	m1, m2 := e.moduleOf(t, first.AppliedRun), e.moduleOf(t, second.AppliedRun)
	stateKey := api.StateKey(workspaces.Fingerprint(lc), clusterID)
	if backendBlock(m1) != backendBlock(m2) || !strings.Contains(m2, fmt.Sprintf("%q", stateKey)) {
		t.Errorf("the runs' state differs:\n%s\nvs\n%s", backendBlock(m1), backendBlock(m2))
	}
	if n1, n2 := nodeCountRe.FindStringSubmatch(m1), nodeCountRe.FindStringSubmatch(m2); len(n1) != 2 || n1[1] != "2" || len(n2) != 2 || n2[1] != "5" {
		t.Errorf("node_count rendered %v then %v, want 2 then 5", n1, n2)
	}
	// Terraform changed the workers in place on the state the first run left (one state object).
	if out, _ := pe.Runner.Output(api.JobName(second.AppliedRun)); !strings.Contains(out, "0 added, 1 changed, 0 destroyed") {
		t.Errorf("the day-2 run's log does not show the workers changed in place:\n%s", out)
	}
	bucket := api.StateBucketName(workspaces.Fingerprint(lc), clusterID)
	keys, err := pe.AWS.S3.Keys(bucket)
	if err != nil {
		t.Fatal(err)
	}
	if states := strings.Count(strings.Join(keys, "\n"), "terraform.tfstate"); states != 1 {
		t.Errorf("state objects in %s: %v, want exactly one state", bucket, keys)
	}
}

func TestProvisionDestroyNeverOverlapsAnApply(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	target := e.hostTarget(t)
	pe := e.provisioning(t)
	c, lc, _ := e.tenantWorkspace(t, "prov-overlap")
	const clusterID = "prov-overlap"
	param := provisioning.AdminKubeconfigParameter(workspaces.Fingerprint(lc), clusterID)
	pe.AWS.SSM.Put(param, "SecureString", "PENDING")
	e.requestCluster(t, c, pe, "short-lived", clusterID)
	apply := waitRunWaitingForKubeconfig(t, c, "short-lived")

	// While the apply waits for the node, the tenant asks for the infrastructure to go.
	hc := getHostCluster(t, c, "short-lived")
	hc.Spec.Provisioning.DeletionPolicy = kov1alpha1.DeletionPolicyDestroy
	if err := c.Update(context.Background(), hc); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), hc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the deletion waiting for apply run "+apply, func() (bool, string) {
		hc := getHostCluster(t, c, "short-lived")
		cond := reconcile.GetCondition(hc, kov1alpha1.InfrastructureDestroyedCondition)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == kov1alpha1.RunInProgressReason && strings.Contains(cond.Message, apply), describeHC(hc)
	})
	pe.AWS.SSM.PublishAdminKubeconfig(param, target.Kubeconfig, 3*time.Second)
	framework.Eventually(t, 3*time.Minute, "short-lived gone", func() (bool, string) {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: hcNamespace, Name: "short-lived"}, &kov1alpha1.HostCluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	var applyJob, destroyJob *batchv1.Job
	for id, j := range e.runsOf(t, clusterID) {
		switch op := j.Labels[api.LabelOperation]; {
		case id == apply && op == string(api.OperationApply):
			applyJob = ptr.To(j)
		case op == string(api.OperationDestroy) && destroyJob == nil:
			destroyJob = ptr.To(j)
		default:
			t.Errorf("unexpected run %s (%s)", id, op)
		}
	}
	if applyJob == nil || destroyJob == nil {
		t.Fatalf("runs of %s: apply %v, destroy %v; want both", clusterID, applyJob != nil, destroyJob != nil)
	}
	if !jobSucceeded(*applyJob) || !jobSucceeded(*destroyJob) {
		t.Errorf("apply %+v, destroy %+v: want both Complete", applyJob.Status.Conditions, destroyJob.Status.Conditions)
	}
	if !endedBefore(*applyJob, *destroyJob) {
		t.Errorf("the apply ended %v; the destroy was created %v and started %v: a destroy must never overlap an apply",
			applyJob.Status.CompletionTime, destroyJob.CreationTimestamp, destroyJob.Status.StartTime)
	}
	// The destroy ran on what the apply built (nothing orphaned).
	if out, _ := pe.Runner.Output(destroyJob.Name); !strings.Contains(out, "Resources: 0 added, 0 changed, 3 destroyed") {
		t.Errorf("the destroy run did not destroy the three resources the apply built:\n%s", out)
	}
}

func jobSucceeded(j batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestProvisionManualPlanApproval(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	target := e.hostTarget(t)
	pe := e.provisioning(t)
	c, lc, _ := e.tenantWorkspace(t, "prov-approve")
	const clusterID = "prov-approve"
	param := provisioning.AdminKubeconfigParameter(workspaces.Fingerprint(lc), clusterID)
	pe.AWS.SSM.Put(param, "SecureString", "PENDING")
	pe.AWS.SSM.PublishAdminKubeconfig(param, target.Kubeconfig, 2*time.Second)
	e.requestClusterWith(t, c, pe, "reviewed", clusterID, "    approvePlan: manual\n")

	var hc *kov1alpha1.HostCluster
	framework.Eventually(t, 3*time.Minute, "reviewed's plan awaiting approval", func() (bool, string) {
		hc = getHostCluster(t, c, "reviewed")
		cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		return cond != nil && cond.Reason == kov1alpha1.PlanAwaitingApprovalReason && hc.Status.Provisioning != nil && hc.Status.Provisioning.Plan != nil, describeHC(hc)
	})
	plan := *hc.Status.Provisioning.Plan
	if plan.Add != 3 || plan.Change != 0 || plan.Destroy != 0 || plan.Approved {
		t.Errorf("status.provisioning.plan %+v, want 3 to add and not approved", plan)
	}
	if hc.Status.Phase != kov1alpha1.HostClusterPhaseProvisioning || reconcile.IsTrue(hc, kov1alpha1.ReadyCondition) {
		t.Errorf("phase %s, Ready %v while the plan awaits approval", hc.Status.Phase, reconcile.IsTrue(hc, kov1alpha1.ReadyCondition))
	}
	if runs := e.runsOf(t, clusterID); len(runs) != 1 || runs[plan.ID].Labels[api.LabelOperation] != string(api.OperationPlan) {
		t.Fatalf("%d runs while the plan awaits approval, want the plan run %s only", len(runs), plan.ID)
	}

	if err := reconcile.PatchAnnotations(context.Background(), c, hc, map[string]*string{kov1alpha1.ApprovePlanAnnotation: ptr.To(plan.ID)}); err != nil {
		t.Fatal(err)
	}
	hc = waitHostClusterPhase(t, c, "reviewed", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	st := hc.Status.Provisioning
	if st.Plan == nil || st.Plan.ID != plan.ID || !st.Plan.Approved {
		t.Errorf("status.provisioning.plan %+v once Ready, want %s approved", st.Plan, plan.ID)
	}
	runs := e.runsOf(t, clusterID)
	applied, ok := runs[st.AppliedRun]
	if len(runs) != 2 || !ok || applied.Labels[api.LabelOperation] != string(api.OperationApply) || applied.Annotations[api.AnnotationPlanRun] != plan.ID {
		t.Fatalf("runs %d, applied run %s: want the plan and one apply of plan %s", len(runs), st.AppliedRun, plan.ID)
	}
	if !endedBefore(runs[plan.ID], applied) {
		t.Errorf("the apply of the plan started before the plan run ended")
	}
	if out, _ := pe.Runner.Output(applied.Name); !strings.Contains(out, "Loading the approved plan") || !strings.Contains(out, "Resources: 3 added, 0 changed, 0 destroyed") {
		t.Errorf("the apply run did not apply the approved plan:\n%s", out)
	}
}
