package jobs

import (
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
)

// stepMessages say what the runner does at each step when it says nothing more.
var stepMessages = map[string]string{
	api.StepCloning:        "cloning the repository",
	api.StepInfrastructure: "pushing the infrastructure tree",
	api.StepSealedSecrets:  "waiting for the target's sealed-secrets controller",
	api.StepSealing:        "pushing the sealed secrets",
}

// maxCommits bounds the commits an answer lists.
const maxCommits = 16

// commitRe is a git object name, abbreviated or full (SHA-1 or SHA-256).
var commitRe = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// scaffoldFrom is the scaffold as its Job and status Secret (nil when absent) say. podProblem,
// when not empty, says why the Job's pod does not run or why it ended (from the pod's status).
func scaffoldFrom(job *batchv1.Job, status *corev1.Secret, podProblem string, now time.Time) api.Scaffold {
	s := api.Scaffold{
		ID:        job.Labels[api.LabelRun],
		ClusterID: job.Annotations[api.AnnotationClusterID],
		Workspace: job.Annotations[api.AnnotationWorkspace],
		OwnerUID:  job.Labels[api.LabelOwnerUID],
		StartedAt: jobrun.TimeOf(job.Status.StartTime),
	}
	var step, message string
	if status != nil {
		step, message = status.Annotations[api.AnnotationStep], jobrun.Truncate(status.Annotations[api.AnnotationMessage])
		s.Commits = commitsOf(status.Annotations[api.AnnotationCommits])
	}
	o := jobrun.JobOutcome(job, now)
	switch o.End {
	case jobrun.Succeeded:
		s.Status, s.Message = api.StatusSucceeded, "the tree is pushed"
		if step == api.StepSucceeded && message != "" {
			s.Message = message
		}
		s.FinishedAt = &o.At
	case jobrun.Failed:
		s.Status, s.Error = api.StatusFailed, jobrun.FailureMessage(job, o, jobrun.Report{
			Service: "gitops-scaffolder", Stage: "step", Last: step, Message: message,
			RunnerFailed: step == api.StepFailed, PodProblem: podProblem,
		})
		s.Message = "the scaffold failed"
		if stepMessages[step] != "" {
			s.Message += " while " + stepMessages[step]
		}
		s.FinishedAt = &o.At
	default:
		s.Status, s.Message = runningStatus(job, step, message, podProblem)
		if s.Status == api.StatusRunning && stepMessages[step] != "" {
			s.Step = step
		}
	}
	return s
}

// commitsOf reads AnnotationCommits: space-separated commit names, oldest first; anything that is
// not a commit name is left out.
func commitsOf(v string) []string {
	var out []string
	for _, c := range strings.Fields(v) {
		if commitRe.MatchString(c) && len(out) < maxCommits {
			out = append(out, c)
		}
	}
	return out
}

// runningStatus maps a scaffold that has not ended: running at the runner's step once it reports
// one, queued before.
func runningStatus(job *batchv1.Job, step, message, podProblem string) (api.Status, string) {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	switch step {
	case "":
	case api.StepSucceeded, api.StepFailed:
		// The runner has finished; the Job's condition follows when its pod has exited.
		return api.StatusRunning, or(message, "the runner is finishing")
	default:
		return api.StatusRunning, or(message, or(stepMessages[step], step))
	}
	switch {
	case jobrun.Suspended(job):
		return api.StatusQueued, "creating the scaffold's objects"
	case podProblem != "":
		return api.StatusQueued, podProblem
	}
	return api.StatusQueued, "waiting for the runner to start"
}
