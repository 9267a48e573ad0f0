package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

// stubRunner stands in for cmd/scaffold-runner, which does not build in this tree yet: it checks
// what the Job gives it (its environment, the mounted inputs, writable emptyDirs) and exits, 0
// when everything is there.
const stubRunner = `#!/bin/sh
set -e
test "$SCAFFOLD_SLUG" = prod-1
test "$SCAFFOLD_BRANCH" = main
test -n "$POD_NAMESPACE"
test "$(cat "$SCAFFOLD_INPUTS_DIR/kubeconfig")" = "$(printf '%s' "$EXPECTED_KUBECONFIG")"
touch "$TMPDIR/x" "$HOME/x"
echo "scaffold $SCAFFOLD_ID of $SCAFFOLD_SLUG ran"
`

// A scaffold's Job, exactly as Create makes it, runs in sim.RunnerJobs' played Pod: the actor
// picks the binary by the image's name (scaffold-runner), and the scaffold succeeds when it
// exits 0. A Job whose image the actor has no binary for gets no Pod.
func TestScaffoldJobRunsInThePlayedPod(t *testing.T) {
	e := newEnv(t)
	stub := filepath.Join(t.TempDir(), "scaffold-runner")
	if err := os.WriteFile(stub, []byte(stubRunner), 0o755); err != nil {
		t.Fatal(err)
	}
	actor := &sim.RunnerJobs{Backend: backend, Namespace: e.ns, Binaries: map[string]string{"scaffold-runner": stub},
		Env: map[string]string{"EXPECTED_KUBECONFIG": kubeconfigValue}, Log: &testLog{t}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- actor.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("RunnerJobs.Run: %v", err)
		}
	})

	id := e.start().ID // the image is example.test/scaffold-runner:test
	framework.Eventually(t, 60*time.Second, "the scaffold to end", func() (bool, string) {
		s := e.get(id)
		return s.Done(), string(s.Status) + ": " + s.Message + s.Error
	})
	if s := e.get(id); !s.Succeeded() {
		out, _ := actor.Output(api.JobName(id))
		t.Fatalf("the scaffold: %+v; the runner said:\n%s", s, out)
	}
	if out, _ := actor.Output(api.JobName(id)); !strings.Contains(out, "scaffold "+id+" of prod-1 ran") {
		t.Errorf("the runner's output: %q", out)
	}

	other := newEnv(t, func(c *jobs.Config) { c.RunnerImage = "example.test/unknown-runner:test" })
	otherActor := &sim.RunnerJobs{Backend: backend, Namespace: other.ns, Binaries: map[string]string{"scaffold-runner": stub}, Log: &testLog{t}}
	octx, ostop := context.WithCancel(context.Background())
	odone := make(chan error, 1)
	go func() { odone <- otherActor.Run(octx) }()
	defer func() { ostop(); <-odone }()
	id = other.start().ID
	framework.Consistently(t, 2*time.Second, "a Job of an image without a binary to get no Pod", func() (bool, string) {
		job, err := other.admin.BatchV1().Jobs(other.ns).Get(other.ctx, api.JobName(id), metav1.GetOptions{})
		return err == nil && job.Status.StartTime == nil && job.Status.Active == 0, statusOf(job)
	})
}

func statusOf(job *batchv1.Job) string {
	if job == nil {
		return "no Job"
	}
	return job.Status.String()
}

// testLog is the actor's diagnostics in the test's log.
type testLog struct{ t *testing.T }

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
