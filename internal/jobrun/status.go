package jobrun

import (
	"fmt"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// End is how a run's Job ended.
type End string

// A Job's ends: Running until it has one.
const (
	Running   End = ""
	Succeeded End = "succeeded"
	Failed    End = "failed"
)

// ReasonAbandoned is the Outcome reason of a run whose Job stayed suspended for AbandonAfter.
const ReasonAbandoned = "Abandoned"

// AbandonAfter: a Job still suspended this long after its creation was never started because its
// service stopped in the middle of Launch (creating a run's objects takes milliseconds). Such a
// run is failed, and the sweep deletes it like any other finished run.
const AbandonAfter = 10 * time.Minute

// MaxMessageLength bounds a message taken from a runner or a pod.
const MaxMessageLength = 4096

// Outcome is how a run's Job ended, if it did.
type Outcome struct {
	End    End       // Running while the run has not ended
	Reason string    // the Job condition's reason, or ReasonAbandoned
	Detail string    // the Job condition's message
	At     time.Time // when it ended
}

// JobOutcome reads the Job's terminal conditions, which are the run's final word: Complete (or
// SuccessCriteriaMet, its herald while the pod terminates) is success; Failed (or FailureTarget)
// is failure, e.g. reason DeadlineExceeded or BackoffLimitExceeded. A Job suspended since more
// than AbandonAfter before now is failed (ReasonAbandoned).
func JobOutcome(job *batchv1.Job, now time.Time) Outcome {
	var o Outcome
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			if o.End == Running || c.Type == batchv1.JobComplete {
				o = Outcome{End: Succeeded, Reason: c.Reason, Detail: c.Message, At: c.LastTransitionTime.Time}
			}
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			if o.End == Running || c.Type == batchv1.JobFailed {
				o = Outcome{End: Failed, Reason: c.Reason, Detail: c.Message, At: c.LastTransitionTime.Time}
			}
		}
	}
	if o.End == Succeeded && job.Status.CompletionTime != nil {
		o.At = job.Status.CompletionTime.Time
	}
	if o.End == Running && Suspended(job) && job.Status.StartTime == nil && now.Sub(job.CreationTimestamp.Time) > AbandonAfter {
		o = Outcome{End: Failed, Reason: ReasonAbandoned, At: job.CreationTimestamp.Add(AbandonAfter)}
	}
	return o
}

// Suspended reports whether the Job is suspended (Launch has not started it yet).
func Suspended(job *batchv1.Job) bool { return job.Spec.Suspend != nil && *job.Spec.Suspend }

// Deadline says how long the Job could run (activeDeadlineSeconds), e.g. "2h0m0s", or "its
// deadline" when it has none.
func Deadline(job *batchv1.Job) string {
	if d := job.Spec.ActiveDeadlineSeconds; d != nil {
		return (time.Duration(*d) * time.Second).String()
	}
	return "its deadline"
}

// PodProblem says why pod is not running as it should, or how its container named container
// ended; "" when nothing is wrong: an image that does not pull (or any other waiting reason
// past creation), a non-zero exit (OOMKilled), a pod that cannot be scheduled, an evicted pod.
func PodProblem(pod *corev1.Pod, container string) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return Truncate(fmt.Sprintf("pod %s: container %s is waiting: %s: %s", pod.Name, cs.Name, w.Reason, w.Message))
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			m := fmt.Sprintf("pod %s: container %s exited with code %d", pod.Name, cs.Name, t.ExitCode)
			if t.Reason != "" {
				m += " (" + t.Reason + ")"
			}
			if t.Message != "" {
				m += ": " + t.Message
			}
			return Truncate(m)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return Truncate(fmt.Sprintf("pod %s cannot be scheduled: %s", pod.Name, c.Message))
		}
	}
	if pod.Status.Phase == corev1.PodFailed && pod.Status.Reason != "" {
		return Truncate(fmt.Sprintf("pod %s failed: %s: %s", pod.Name, pod.Status.Reason, pod.Status.Message))
	}
	return ""
}

// TimeOf is t's time, nil for nil.
func TimeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// Truncate bounds a message taken from a pod or a runner to MaxMessageLength bytes (on a rune
// boundary, with an ellipsis).
func Truncate(s string) string {
	if len(s) <= MaxMessageLength {
		return s
	}
	cut := MaxMessageLength
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Report is what a run's runner said on the Secret it reports on, and what else is known of a
// failed run, for FailureMessage.
type Report struct {
	// Service names the service in messages, e.g. "provisioner".
	Service string
	// Stage is what the service calls the runner's progress ("phase", "step"); Last is the last
	// one the runner reported and Message the sentence with it.
	Stage, Last, Message string
	// RunnerFailed is true when the runner reported its own failure (Message is its error).
	RunnerFailed bool
	// PodProblem is what the pod's status says (PodProblem), if anything.
	PodProblem string
}

// FailureMessage is the real error of a failed run: the runner's own account, then that the
// service stopped before the run started (abandoned), that the deadline stopped it (with the last
// stage), what the pod's status says (e.g. OOMKilled), and last the Job's condition.
func FailureMessage(job *batchv1.Job, o Outcome, r Report) string {
	switch {
	case r.RunnerFailed && r.Message != "":
		return r.Message
	case o.Reason == ReasonAbandoned:
		return "the " + r.Service + " stopped before the run started; start a new run"
	case o.Reason == batchv1.JobReasonDeadlineExceeded:
		m := fmt.Sprintf("the run did not finish within %s and was stopped", Deadline(job))
		if r.Last != "" {
			m += fmt.Sprintf(" (last %s: %s", r.Stage, r.Last)
			if r.Message != "" {
				m += ": " + r.Message
			}
			m += ")"
		}
		return m
	case r.PodProblem != "":
		return r.PodProblem
	case o.Detail != "":
		return o.Detail
	case o.Reason != "":
		return "the run's Job failed: " + o.Reason
	}
	return "the run's Job failed"
}
