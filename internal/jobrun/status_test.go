package jobrun

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// container is the runner's container in these tests.
const container = "runner"

func TestPodProblem(t *testing.T) {
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: container, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}
	}
	other := corev1.ContainerStatus{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	tests := map[string]struct {
		status corev1.PodStatus
		want   string
	}{
		"creating":       {corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ContainerCreating")}}, ""},
		"image pull":     {corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("ImagePullBackOff")}}, "is waiting: ImagePullBackOff: m"},
		"config error":   {corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{waiting("CreateContainerConfigError")}}, "CreateContainerConfigError"},
		"unschedulable":  {corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes"}}}, "cannot be scheduled: 0/3 nodes"},
		"exit 0 is fine": {corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}}, ""},
		"oom": {corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}},
			"exited with code 137 (OOMKilled)"},
		"another container's exit is not the runner's": {corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{other}}, ""},
		"evicted": {corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on ephemeral-storage"}, "failed: Evicted: low on ephemeral-storage"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := PodProblem(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: tc.status}, container)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id, err := NewID()
		if err != nil {
			t.Fatal(err)
		}
		if !ValidID(id) || seen[id] {
			t.Fatalf("id %q: valid %v, repeated %v", id, ValidID(id), seen[id])
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "ABCDEFGHIJ", "abc", "abcdefghij0", "../../etc1"} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q)", bad)
		}
	}
}

func TestJobOutcome(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ended := metav1.NewTime(t0.Add(30 * time.Minute))
	completed := metav1.NewTime(t0.Add(31 * time.Minute))
	cond := func(typ batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: "m", LastTransitionTime: ended}
	}
	job := func(suspend bool, started bool, conds ...batchv1.JobCondition) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}, Spec: batchv1.JobSpec{Suspend: ptr.To(suspend)}}
		j.Status.Conditions = conds
		if started {
			j.Status.StartTime = &metav1.Time{Time: t0.Add(time.Second)}
		}
		return j
	}
	complete := job(false, true, cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached"), cond(batchv1.JobComplete, "CompletionsReached"))
	complete.Status.CompletionTime = &completed
	tests := map[string]struct {
		job  *batchv1.Job
		now  time.Time
		want Outcome
	}{
		"running":                       {job(false, true), t0.Add(time.Hour), Outcome{}},
		"suspended, just created":       {job(true, false), t0.Add(time.Minute), Outcome{}},
		"suspended too long":            {job(true, false), t0.Add(time.Hour), Outcome{End: Failed, Reason: ReasonAbandoned, At: t0.Add(AbandonAfter)}},
		"success criteria met":          {job(false, true, cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached")), t0.Add(time.Hour), Outcome{End: Succeeded, Reason: "CompletionsReached", Detail: "m", At: ended.Time}},
		"complete: the completion time": {complete, t0.Add(time.Hour), Outcome{End: Succeeded, Reason: "CompletionsReached", Detail: "m", At: completed.Time}},
		"failure target":                {job(false, true, cond(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded)), t0.Add(time.Hour), Outcome{End: Failed, Reason: batchv1.JobReasonDeadlineExceeded, Detail: "m", At: ended.Time}},
		"condition not true":            {job(false, true, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionFalse}), t0.Add(time.Hour), Outcome{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := JobOutcome(tc.job, tc.now); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("short"); got != "short" {
		t.Errorf("Truncate(short) = %q", got)
	}
	long := strings.Repeat("é", MaxMessageLength)
	got := Truncate(long)
	if len(got) > MaxMessageLength+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("Truncate of %d bytes gave %d bytes, not a prefix on a rune boundary", len(long), len(got))
	}
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{"prod-1": "prod-1", "prod-1-": "prod-1", "A": "A", strings.Repeat("a", 63): strings.Repeat("a", 63), "---": ""} {
		if got := LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}
