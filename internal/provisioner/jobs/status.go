package jobs

import (
	"encoding/json"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// The runner's phases (api.AnnotationPhase on the outputs Secret): the statuses' names, and
// waiting-for-kubeconfig, for which api has no constant.
const (
	runnerPlanning  = string(api.StatusPlanning)
	runnerApplying  = string(api.StatusApplying)
	runnerWaitingKC = "waiting-for-kubeconfig"
	runnerSucceeded = string(api.StatusSucceeded)
	runnerFailed    = string(api.StatusFailed)
)

// provisionFrom is the run as its Job and outputs Secret (nil when absent) say. podProblem, when
// not empty, says why the Job's pod does not run or why it ended (from the pod's status).
func provisionFrom(job *batchv1.Job, outputs *corev1.Secret, podProblem string, now time.Time) api.Provision {
	p := api.Provision{
		ID:                   job.Labels[api.LabelRun],
		ClusterID:            job.Annotations[AnnotationClusterID],
		Operation:            api.Operation(job.Labels[api.LabelOperation]),
		Workspace:            job.Annotations[api.AnnotationWorkspace],
		WorkspaceFingerprint: job.Labels[api.LabelWorkspaceFingerprint],
		OwnerUID:             job.Labels[api.LabelOwnerUID],
		StartedAt:            jobrun.TimeOf(job.Status.StartTime),
		InputsHash:           job.Annotations[api.AnnotationInputsHash],
		PlanRun:              job.Annotations[api.AnnotationPlanRun],
	}
	var phase, message string
	if outputs != nil {
		phase, message = outputs.Annotations[api.AnnotationPhase], jobrun.Truncate(outputs.Annotations[api.AnnotationMessage])
		if raw := outputs.Annotations[api.AnnotationPlan]; raw != "" && p.Operation == api.OperationPlan {
			var ps api.PlanSummary
			// The runner writes it; anything else is no summary.
			if json.Unmarshal([]byte(raw), &ps) == nil && ps.Add >= 0 && ps.Change >= 0 && ps.Destroy >= 0 {
				p.Plan = &ps
			}
		}
	}
	o := jobrun.JobOutcome(job, now)
	switch o.End {
	case jobrun.Succeeded:
		p.Status, p.Message = api.StatusSucceeded, "the run succeeded"
		if phase == runnerSucceeded && message != "" {
			p.Message = message
		}
		p.FinishedAt = &o.At
	case jobrun.Failed:
		p.Status, p.Message = api.StatusFailed, jobrun.FailureMessage(job, o, jobrun.Report{
			Service: "provisioner", Stage: "phase", Last: phase, Message: message,
			RunnerFailed: phase == runnerFailed, PodProblem: podProblem,
		})
		p.FinishedAt = &o.At
	default:
		p.Status, p.Message = runningStatus(job, phase, message, podProblem)
	}
	return p
}

// runningStatus maps a run that has not ended: the runner's phase once it reports one, queued
// before.
func runningStatus(job *batchv1.Job, phase, message, podProblem string) (api.Status, string) {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	switch phase {
	case runnerPlanning:
		return api.StatusPlanning, or(message, "terraform is planning")
	case runnerApplying:
		return api.StatusApplying, or(message, "terraform is applying")
	case runnerWaitingKC:
		return api.StatusApplying, or(message, "waiting for the cluster's kubeconfig")
	case runnerSucceeded, runnerFailed:
		// The runner has finished; the Job's condition follows when its pod has exited. A plan
		// run never applies.
		if job.Labels[api.LabelOperation] == string(api.OperationPlan) {
			return api.StatusPlanning, or(message, "the runner is finishing")
		}
		return api.StatusApplying, or(message, "the runner is finishing")
	case "":
	default:
		return api.StatusApplying, or(message, phase)
	}
	switch {
	case jobrun.Suspended(job):
		return api.StatusQueued, "creating the run's objects"
	case podProblem != "":
		return api.StatusQueued, podProblem
	}
	return api.StatusQueued, "waiting for the runner to start"
}
