package jobs

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

var (
	t0      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	started = metav1.NewTime(t0.Add(time.Minute))
	ended   = metav1.NewTime(t0.Add(30 * time.Minute))
)

// statusJob is a run's Job as the Job controller leaves it: suspended, or started, with the given
// conditions.
func statusJob(suspend bool, conds ...batchv1.JobCondition) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "provision-abcdefghij", CreationTimestamp: metav1.NewTime(t0),
			Labels:      map[string]string{api.LabelRun: "abcdefghij", api.LabelOperation: "apply"},
			Annotations: map[string]string{AnnotationClusterID: "prod-1-"},
		},
		Spec:   batchv1.JobSpec{Suspend: ptr.To(suspend), ActiveDeadlineSeconds: ptr.To[int64](7200)},
		Status: batchv1.JobStatus{Conditions: conds},
	}
	if !suspend {
		j.Status.StartTime = &started
	}
	for _, c := range conds {
		if c.Type == batchv1.JobComplete {
			j.Status.CompletionTime = &ended
		}
	}
	return j
}

func cond(typ batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: ended}
}

func outputsWith(phase, msg string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{api.AnnotationPhase: phase, api.AnnotationMessage: msg}}}
}

func TestProvisionFrom(t *testing.T) {
	now := t0.Add(time.Hour)
	const tfError = "Error: creating EC2 VPC: UnauthorizedOperation: You are not authorized to perform this operation."
	tests := map[string]struct {
		job        *batchv1.Job
		outputs    *corev1.Secret
		podProblem string
		now        time.Time
		status     api.Status
		message    string // substring
		finished   bool
	}{
		"suspended while Create makes the run's objects": {
			job: statusJob(true), now: t0.Add(time.Second), status: api.StatusQueued, message: "creating the run's objects",
		},
		"suspended far longer than Create takes: abandoned": {
			job: statusJob(true), now: now, status: api.StatusFailed, message: "the provisioner stopped before the run started", finished: true,
		},
		"started, no outputs Secret yet": {
			job: statusJob(false), status: api.StatusQueued, message: "waiting for the runner to start",
		},
		"started, runner has not reported": {
			job: statusJob(false), outputs: &corev1.Secret{}, status: api.StatusQueued, message: "waiting for the runner to start",
		},
		"pod cannot pull its image": {
			job: statusJob(false), outputs: &corev1.Secret{}, podProblem: "pod p: container terraform is waiting: ImagePullBackOff: x",
			status: api.StatusQueued, message: "ImagePullBackOff",
		},
		"runner planning": {
			job: statusJob(false), outputs: outputsWith("planning", "terraform plan"), status: api.StatusPlanning, message: "terraform plan",
		},
		"runner applying": {
			job: statusJob(false), outputs: outputsWith("applying", ""), status: api.StatusApplying, message: "terraform is applying",
		},
		"runner waiting for the kubeconfig": {
			job: statusJob(false), outputs: outputsWith("waiting-for-kubeconfig", "polling SSM"), status: api.StatusApplying, message: "polling SSM",
		},
		"runner done, Job not yet complete": {
			job: statusJob(false), outputs: outputsWith("succeeded", "kubeconfig published"), status: api.StatusApplying, message: "kubeconfig published",
		},
		"Job complete": {
			job:     statusJob(false, cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", ""), cond(batchv1.JobComplete, "CompletionsReached", "")),
			outputs: outputsWith("succeeded", "kubeconfig published"), status: api.StatusSucceeded, message: "kubeconfig published", finished: true,
		},
		"success criteria met, pod still terminating": {
			job: statusJob(false, cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", "")), outputs: outputsWith("succeeded", ""),
			status: api.StatusSucceeded, message: "the run succeeded", finished: true,
		},
		"Job failed with the runner's Terraform error": {
			job:     statusJob(false, cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit"), cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")),
			outputs: outputsWith("failed", tfError), status: api.StatusFailed, message: tfError, finished: true,
		},
		"Job failed, runner said nothing, pod OOMKilled": {
			job:     statusJob(false, cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")),
			outputs: outputsWith("applying", ""), podProblem: "pod p: container terraform exited with code 137 (OOMKilled)",
			status: api.StatusFailed, message: "OOMKilled", finished: true,
		},
		"Job failed, nothing else known: the Job's message": {
			job:    statusJob(false, cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")),
			status: api.StatusFailed, message: "Job has reached the specified backoff limit", finished: true,
		},
		"deadline exceeded while applying": {
			job:     statusJob(false, cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")),
			outputs: outputsWith("waiting-for-kubeconfig", "polling SSM"), status: api.StatusFailed,
			message: "did not finish within 2h0m0s and was stopped (last phase: waiting-for-kubeconfig: polling SSM)", finished: true,
		},
		"failure target before Failed": {
			job:    statusJob(false, cond(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")),
			status: api.StatusFailed, message: "did not finish within 2h0m0s", finished: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := tc.now
			if n.IsZero() {
				n = now
			}
			p := provisionFrom(tc.job, tc.outputs, tc.podProblem, n)
			if p.Status != tc.status || !strings.Contains(p.Message, tc.message) {
				t.Errorf("got %s %q, want %s with %q", p.Status, p.Message, tc.status, tc.message)
			}
			if p.ID != "abcdefghij" || p.ClusterID != "prod-1-" || p.Operation != api.OperationApply {
				t.Errorf("identity: got %+v", p)
			}
			if (p.FinishedAt != nil) != tc.finished {
				t.Errorf("finishedAt = %v, want set: %v", p.FinishedAt, tc.finished)
			}
			if !jobrun.Suspended(tc.job) && (p.StartedAt == nil || !p.StartedAt.Equal(started.Time)) {
				t.Errorf("startedAt = %v, want %v", p.StartedAt, started)
			}
		})
	}
}

func TestCredentialData(t *testing.T) {
	ref := api.SecretRef{Namespace: "kcp-0123456789ab", Name: "hostcluster-a-cloud-credential"}
	tests := map[string]struct {
		data    map[string]string
		keys    []string
		invalid bool
	}{
		"access key":                  {data: map[string]string{"access_key": "AKIAVALUE", "secret_key": "SECRETVALUE"}, keys: []string{"access_key", "secret_key"}},
		"access key with session":     {data: map[string]string{"access_key": "AKIAVALUE", "secret_key": "SECRETVALUE", "session_token": "TOKENVALUE"}, keys: []string{"access_key", "secret_key", "session_token"}},
		"role only":                   {data: map[string]string{"role_arn": "arn:aws:iam::1:role/r", "external_id": "EXTERNALVALUE"}, keys: []string{"external_id", "role_arn"}},
		"unknown keys stay behind":    {data: map[string]string{"access_key": "AKIAVALUE", "secret_key": "SECRETVALUE", "api-key": "APIKEYVALUE", "kubeconfig": "KUBECONFIGVALUE"}, keys: []string{"access_key", "secret_key"}},
		"access key without secret":   {data: map[string]string{"access_key": "AKIAVALUE"}, invalid: true},
		"secret key without access":   {data: map[string]string{"secret_key": "SECRETVALUE", "role_arn": "arn:aws:iam::1:role/r"}, invalid: true},
		"nothing":                     {data: map[string]string{"api-key": "APIKEYVALUE"}, invalid: true},
		"empty values count for none": {data: map[string]string{"access_key": "", "secret_key": "", "role_arn": ""}, invalid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &corev1.Secret{Data: map[string][]byte{}}
			for k, v := range tc.data {
				s.Data[k] = []byte(v)
			}
			got, err := credentialData(ref, s)
			if tc.invalid {
				fe, ok := err.(*api.FieldError)
				if !ok || fe.Field != "credentialSecretRef" {
					t.Fatalf("got %v, want a FieldError on credentialSecretRef", err)
				}
				for _, v := range tc.data {
					if v != "" && strings.Contains(err.Error(), v) {
						t.Errorf("error %q carries a value", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, k := range credentialKeys {
				if _, ok := got[k]; ok {
					keys = append(keys, k)
				}
			}
			if strings.Join(keys, ",") != strings.Join(sortedStrings(tc.keys), ",") {
				t.Errorf("copied keys %v, want %v", keys, tc.keys)
			}
		})
	}
}

// sortedStrings orders keys as credentialKeys does.
func sortedStrings(keys []string) []string {
	var out []string
	for _, k := range credentialKeys {
		for _, w := range keys {
			if w == k {
				out = append(out, k)
			}
		}
	}
	return out
}

func TestCheckModule(t *testing.T) {
	if err := checkModule(map[string]string{"main.tf": "x", "backend.tf": "y"}); err != nil {
		t.Errorf("valid module: %v", err)
	}
	for name, files := range map[string]map[string]string{
		"no files":        {},
		"directory":       {"modules/vpc.tf": "x"},
		"too large":       {"main.tf": strings.Repeat("x", 1<<20)},
		"not a file name": {"..": "x"},
	} {
		if err := checkModule(files); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A plan run reads as planning until it ended, then succeeded with the summary the runner wrote;
// a summary on another run, or one that is not the runner's JSON, is no summary.
func TestProvisionFromAPlanRun(t *testing.T) {
	plan := func(conds ...batchv1.JobCondition) *batchv1.Job {
		j := statusJob(false, conds...)
		j.Labels[api.LabelOperation] = string(api.OperationPlan)
		j.Annotations[api.AnnotationInputsHash] = "0123456789abcdef"
		return j
	}
	summarized := func(raw string) *corev1.Secret {
		s := outputsWith("succeeded", "Planned: 1 to add, 2 to change, 3 to destroy")
		s.Annotations[api.AnnotationPlan] = raw
		return s
	}
	now := t0.Add(time.Hour)
	done := []batchv1.JobCondition{cond(batchv1.JobComplete, "CompletionsReached", "")}
	if p := provisionFrom(plan(), summarized(`{"add":1,"change":2,"destroy":3}`), "", now); p.Status != api.StatusPlanning {
		t.Errorf("a plan run whose runner finished, Job not complete: %s, want planning", p.Status)
	}
	p := provisionFrom(plan(done...), summarized(`{"add":1,"change":2,"destroy":3}`), "", now)
	if p.Status != api.StatusSucceeded || p.Plan == nil || *p.Plan != (api.PlanSummary{Add: 1, Change: 2, Destroy: 3}) || p.InputsHash != "0123456789abcdef" {
		t.Errorf("an ended plan run: %+v (plan %+v)", p, p.Plan)
	}
	for name, raw := range map[string]string{"not JSON": "lots", "negative": `{"add":-1}`} {
		if p := provisionFrom(plan(done...), summarized(raw), "", now); p.Plan != nil {
			t.Errorf("%s summary %q read as %+v", name, raw, p.Plan)
		}
	}
	if p := provisionFrom(statusJob(false, done...), summarized(`{"add":1}`), "", now); p.Plan != nil {
		t.Errorf("an apply run with a plan annotation read as a plan: %+v", p.Plan)
	}
}
