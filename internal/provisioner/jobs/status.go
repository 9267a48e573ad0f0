package jobs

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// maxMessageLength bounds a message taken from the runner or a pod.
const maxMessageLength = 4096

// abandonAfter: a Job still suspended this long after its creation was never started because the
// provisioner stopped in the middle of Create (creating the run's objects takes milliseconds).
// Such a run is failed, and Sweep deletes it like any other finished run.
const abandonAfter = 10 * time.Minute

// outcome is how a run's Job ended, if it did.
type outcome struct {
	status api.Status // succeeded or failed; empty while the run has not ended
	reason string     // the Job condition's reason, or "Abandoned"
	detail string     // the Job condition's message
	at     time.Time  // when it ended
}

// jobOutcome reads the Job's terminal conditions, which are the run's final word: Complete (or
// SuccessCriteriaMet, its herald while the pod terminates) is success; Failed (or FailureTarget)
// is failure, e.g. reason DeadlineExceeded or BackoffLimitExceeded.
func jobOutcome(job *batchv1.Job, now time.Time) outcome {
	var o outcome
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			if o.status == "" || c.Type == batchv1.JobComplete {
				o = outcome{status: api.StatusSucceeded, reason: c.Reason, detail: c.Message, at: c.LastTransitionTime.Time}
			}
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			if o.status == "" || c.Type == batchv1.JobFailed {
				o = outcome{status: api.StatusFailed, reason: c.Reason, detail: c.Message, at: c.LastTransitionTime.Time}
			}
		}
	}
	if o.status == api.StatusSucceeded && job.Status.CompletionTime != nil {
		o.at = job.Status.CompletionTime.Time
	}
	if o.status == "" && suspended(job) && job.Status.StartTime == nil && now.Sub(job.CreationTimestamp.Time) > abandonAfter {
		o = outcome{status: api.StatusFailed, reason: "Abandoned", at: job.CreationTimestamp.Add(abandonAfter)}
	}
	return o
}

func suspended(job *batchv1.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

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
		StartedAt:            timeOf(job.Status.StartTime),
		InputsHash:           job.Annotations[api.AnnotationInputsHash],
		PlanRun:              job.Annotations[api.AnnotationPlanRun],
	}
	var phase, message string
	if outputs != nil {
		phase, message = outputs.Annotations[api.AnnotationPhase], truncate(outputs.Annotations[api.AnnotationMessage])
		if raw := outputs.Annotations[api.AnnotationPlan]; raw != "" && p.Operation == api.OperationPlan {
			var ps api.PlanSummary
			// The runner writes it; anything else is no summary.
			if json.Unmarshal([]byte(raw), &ps) == nil && ps.Add >= 0 && ps.Change >= 0 && ps.Destroy >= 0 {
				p.Plan = &ps
			}
		}
	}
	o := jobOutcome(job, now)
	switch o.status {
	case api.StatusSucceeded:
		p.Status, p.Message = api.StatusSucceeded, "the run succeeded"
		if phase == runnerSucceeded && message != "" {
			p.Message = message
		}
		p.FinishedAt = &o.at
	case api.StatusFailed:
		p.Status, p.Message = api.StatusFailed, failureMessage(job, o, phase, message, podProblem)
		p.FinishedAt = &o.at
	default:
		p.Status, p.Message = runningStatus(job, phase, message, podProblem)
	}
	return p
}

// failureMessage prefers the runner's own account (Terraform's error text), then what the pod's
// status says (e.g. OOMKilled), then the Job's condition.
func failureMessage(job *batchv1.Job, o outcome, phase, message, podProblem string) string {
	switch {
	case phase == runnerFailed && message != "":
		return message
	case o.reason == "Abandoned":
		return "the provisioner stopped before the run started; start a new run"
	case o.reason == batchv1.JobReasonDeadlineExceeded:
		limit := "its deadline"
		if d := job.Spec.ActiveDeadlineSeconds; d != nil {
			limit = (time.Duration(*d) * time.Second).String()
		}
		m := fmt.Sprintf("the run did not finish within %s and was stopped", limit)
		if phase != "" {
			m += fmt.Sprintf(" (last phase: %s", phase)
			if message != "" {
				m += ": " + message
			}
			m += ")"
		}
		return m
	case podProblem != "":
		return podProblem
	case o.detail != "":
		return o.detail
	case o.reason != "":
		return "the run's Job failed: " + o.reason
	}
	return "the run's Job failed"
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
	case suspended(job):
		return api.StatusQueued, "creating the run's objects"
	case podProblem != "":
		return api.StatusQueued, podProblem
	}
	return api.StatusQueued, "waiting for the runner to start"
}

// podProblemOf says why pod is not running as it should, or how its runner container ended; ""
// when nothing is wrong.
func podProblemOf(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != ContainerName {
			continue
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return truncate(fmt.Sprintf("pod %s: container %s is waiting: %s: %s", pod.Name, cs.Name, w.Reason, w.Message))
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			m := fmt.Sprintf("pod %s: container %s exited with code %d", pod.Name, cs.Name, t.ExitCode)
			if t.Reason != "" {
				m += " (" + t.Reason + ")"
			}
			if t.Message != "" {
				m += ": " + t.Message
			}
			return truncate(m)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return truncate(fmt.Sprintf("pod %s cannot be scheduled: %s", pod.Name, c.Message))
		}
	}
	if pod.Status.Phase == corev1.PodFailed && pod.Status.Reason != "" {
		return truncate(fmt.Sprintf("pod %s failed: %s: %s", pod.Name, pod.Status.Reason, pod.Status.Message))
	}
	return ""
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// truncate bounds a message taken from a pod or the runner.
func truncate(s string) string {
	if len(s) <= maxMessageLength {
		return s
	}
	cut := maxMessageLength
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
