package jobs

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
)

var (
	t0      = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	started = metav1.NewTime(t0.Add(time.Minute))
	ended   = metav1.NewTime(t0.Add(10 * time.Minute))
)

// statusJob is a scaffold's Job as the Job controller leaves it: suspended, or started, with the
// given conditions.
func statusJob(suspend bool, conds ...batchv1.JobCondition) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "scaffold-abcdefghij", CreationTimestamp: metav1.NewTime(t0),
			Labels:      map[string]string{api.LabelRun: "abcdefghij", api.LabelOwnerUID: "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f"},
			Annotations: map[string]string{api.AnnotationClusterID: "prod-1-", api.AnnotationWorkspace: "1bg4baqdjkcw9lz4"},
		},
		Spec: batchv1.JobSpec{Suspend: ptr.To(suspend), ActiveDeadlineSeconds: ptr.To[int64](1800)},
	}
	if !suspend {
		j.Status.StartTime = &started
	}
	j.Status.Conditions = conds
	return j
}

func cond(typ batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: ended}
}

func reported(step, msg, commits string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		api.AnnotationStep: step, api.AnnotationMessage: msg, api.AnnotationCommits: commits,
	}}}
}

func TestScaffoldFrom(t *testing.T) {
	now := t0.Add(time.Hour)
	const pushError = "git push https://git.example.com/acme/fleet.git main: remote: Permission to acme/fleet.git denied to bot (403)"
	failedJob := func() *batchv1.Job {
		return statusJob(false, cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
			cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	}
	complete := statusJob(false, cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", ""), cond(batchv1.JobComplete, "CompletionsReached", ""))
	tests := map[string]struct {
		job        *batchv1.Job
		status     *corev1.Secret
		podProblem string
		now        time.Time
		want       api.Status
		message    string // substring of Message
		err        string // substring of Error; "" wants none
		commits    []string
		finished   bool
	}{
		"suspended while Create makes the objects": {
			job: statusJob(true), now: t0.Add(time.Second), want: api.StatusQueued, message: "creating the scaffold's objects",
		},
		"suspended far longer than Create takes: abandoned": {
			job: statusJob(true), want: api.StatusFailed, message: "the scaffold failed", err: "the gitops-scaffolder stopped before the run started", finished: true,
		},
		"started, no status Secret": {
			job: statusJob(false), want: api.StatusQueued, message: "waiting for the runner to start",
		},
		"started, the runner said nothing yet": {
			job: statusJob(false), status: &corev1.Secret{}, want: api.StatusQueued, message: "waiting for the runner to start",
		},
		"the image does not pull": {
			job: statusJob(false), status: &corev1.Secret{}, podProblem: "pod p: container scaffold is waiting: ImagePullBackOff: x",
			want: api.StatusQueued, message: "ImagePullBackOff",
		},
		"cloning": {
			job: statusJob(false), status: reported(api.StepCloning, "", ""), want: api.StatusRunning, message: "cloning the repository",
		},
		"pushing the infrastructure, in the runner's words": {
			job: statusJob(false), status: reported(api.StepInfrastructure, "pushed 41 files to fluxcd/clusters/prod-1", "0123456789abcdef0123456789abcdef01234567"),
			want: api.StatusRunning, message: "pushed 41 files", commits: []string{"0123456789abcdef0123456789abcdef01234567"},
		},
		"waiting for sealed-secrets": {
			job: statusJob(false), status: reported(api.StepSealedSecrets, "", ""), want: api.StatusRunning, message: "sealed-secrets controller",
		},
		"pushing the sealed secrets": {
			job: statusJob(false), status: reported(api.StepSealing, "", ""), want: api.StatusRunning, message: "pushing the sealed secrets",
		},
		"the runner is done, the Job not yet": {
			job: statusJob(false), status: reported(api.StepSucceeded, "tree pushed", ""), want: api.StatusRunning, message: "tree pushed",
		},
		"an unknown step is running": {
			job: statusJob(false), status: reported("rebasing", "", ""), want: api.StatusRunning, message: "rebasing",
		},
		"succeeded, two commits, junk left out": {
			job: complete, status: reported(api.StepSucceeded, "tree pushed at fluxcd/clusters/prod-1", "aaaaaaa bbbbbbbb not-a-sha"),
			want: api.StatusSucceeded, message: "tree pushed at fluxcd/clusters/prod-1", commits: []string{"aaaaaaa", "bbbbbbbb"}, finished: true,
		},
		"success criteria met, the runner's word missing": {
			job: statusJob(false, cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", "")), want: api.StatusSucceeded, message: "the tree is pushed", finished: true,
		},
		"failed with the runner's real error": {
			job: failedJob(), status: reported(api.StepFailed, pushError, ""), want: api.StatusFailed, message: "the scaffold failed", err: pushError, finished: true,
		},
		"failed, the runner said nothing, OOMKilled": {
			job: failedJob(), status: reported(api.StepSealing, "", ""), podProblem: "pod p: container scaffold exited with code 137 (OOMKilled)",
			want: api.StatusFailed, message: "while pushing the sealed secrets", err: "OOMKilled", finished: true,
		},
		"failed, nothing else known: the Job's message": {
			job: failedJob(), want: api.StatusFailed, err: "Job has reached the specified backoff limit", finished: true,
		},
		"deadline exceeded while waiting for sealed-secrets": {
			job:    statusJob(false, cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")),
			status: reported(api.StepSealedSecrets, "deployment sealed-secrets-controller has 0/1 available", ""), want: api.StatusFailed,
			err: "did not finish within 30m0s and was stopped (last step: waiting-for-sealed-secrets: deployment sealed-secrets-controller has 0/1 available)", finished: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := tc.now
			if n.IsZero() {
				n = now
			}
			s := scaffoldFrom(tc.job, tc.status, tc.podProblem, n)
			if s.Status != tc.want || !strings.Contains(s.Message, tc.message) {
				t.Errorf("got %s %q, want %s with %q", s.Status, s.Message, tc.want, tc.message)
			}
			if (tc.err == "") != (s.Error == "") || !strings.Contains(s.Error, tc.err) {
				t.Errorf("error %q, want %q", s.Error, tc.err)
			}
			if !slices.Equal(s.Commits, tc.commits) {
				t.Errorf("commits %v, want %v", s.Commits, tc.commits)
			}
			if s.ID != "abcdefghij" || s.ClusterID != "prod-1-" || !s.BelongsTo("1bg4baqdjkcw9lz4", "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f") {
				t.Errorf("whose: got %+v", s)
			}
			if (s.FinishedAt != nil) != tc.finished {
				t.Errorf("finishedAt = %v, want set: %v", s.FinishedAt, tc.finished)
			}
			if (s.StartedAt != nil) != !*tc.job.Spec.Suspend {
				t.Errorf("startedAt = %v", s.StartedAt)
			}
		})
	}
}

func TestCommitsOf(t *testing.T) {
	many := strings.Repeat("abcdef1 ", 40)
	if got := commitsOf(many); len(got) != maxCommits {
		t.Errorf("commitsOf keeps %d of 40, want %d", len(got), maxCommits)
	}
	if got := commitsOf("  \n"); got != nil {
		t.Errorf("commitsOf(blank) = %v", got)
	}
	if got := commitsOf("ABCDEF1 abc $(rm) 0123456"); !slices.Equal(got, []string{"0123456"}) {
		t.Errorf("commitsOf keeps %v, want only the lowercase hex name of 7+ characters", got)
	}
}
