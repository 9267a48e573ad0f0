package jobs_test

import (
	"errors"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
)

// create creates a run of req's cluster (a fresh credential each time) and returns the outcome.
func (e *env) create(mutate ...func(*api.CreateRequest)) (api.Provision, error) {
	e.t.Helper()
	return e.runs.Create(e.ctx, func() api.CreateRequest {
		req := request(e.credential(e.ns, "cred-"+rand.String(6), map[string]string{"access_key": accessKey, "secret_key": secretKey}))
		for _, m := range mutate {
			m(&req)
		}
		return req
	}())
}

// clusterJobs are the Jobs of cluster clusterID of the test's workspace.
func (e *env) clusterJobs(clusterID string) []batchv1.Job {
	e.t.Helper()
	list, err := e.admin.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: api.LabelCluster + "=" + clusterID + "," + api.LabelWorkspaceFingerprint + "=" + testFingerprint})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

func TestOneRunAtATimePerCluster(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	want := request(api.SecretRef{})
	if want := want.InputsHash(); first.InputsHash != want {
		t.Errorf("the run's inputsHash %q, want the request's %q", first.InputsHash, want)
	}

	// A second run of the same cluster (same fingerprint and clusterID: the same state) is
	// refused while the first has not ended, naming it, and leaves nothing behind.
	_, err := e.create(func(r *api.CreateRequest) { r.NodeCount = 5 })
	var active *jobs.ActiveRunError
	if !errors.As(err, &active) || active.RunID != first.ID || active.Operation != api.OperationApply {
		t.Fatalf("a second run while %s is queued: %v, want an ActiveRunError naming it", first.ID, err)
	}
	_, err = e.create(func(r *api.CreateRequest) { r.Operation = api.OperationDestroy })
	if !errors.As(err, &active) || active.RunID != first.ID {
		t.Fatalf("a destroy while %s is queued: %v, want an ActiveRunError naming it", first.ID, err)
	}
	if got := e.clusterJobs("prod-1"); len(got) != 1 || got[0].Labels[api.LabelRun] != first.ID {
		t.Fatalf("Jobs of prod-1 after the refusals: %d, want only %s", len(got), first.ID)
	}
	// Runs of other clusters are not held up: another clusterID, the same clusterID of another
	// workspace.
	if _, err := e.create(cluster("prod-2")); err != nil {
		t.Fatalf("a run of another cluster: %v", err)
	}
	if _, err := e.create(func(r *api.CreateRequest) { r.WorkspaceFingerprint = "0123456789ab" }); err != nil {
		t.Fatalf("a run of prod-1 of another workspace: %v", err)
	}

	// Running, then ended: the next run may start.
	must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, first.ID))
	if err := e.runner.Report(e.ctx, first.ID, "applying", "terraform apply", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.create(); !errors.As(err, &active) || active.RunID != first.ID {
		t.Fatalf("a second run while %s applies: %v", first.ID, err)
	}
	must[*batchv1.Job](t)(e.jobCtl.Complete(e.ctx, first.ID))

	// Many at once once it ended: exactly one wins, every other is told which.
	const racers = 6
	var wg sync.WaitGroup
	results := make([]error, racers)
	ids := make([]string, racers)
	reqs := make([]api.CreateRequest, racers)
	for i := range reqs {
		reqs[i] = request(e.credential(e.ns, "race-"+rand.String(6), map[string]string{"access_key": accessKey, "secret_key": secretKey}))
	}
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := e.runs.Create(e.ctx, reqs[i])
			ids[i], results[i] = p.ID, err
		}()
	}
	wg.Wait()
	winner := ""
	for i, err := range results {
		if err == nil {
			if winner != "" {
				t.Fatalf("two runs of one cluster started at once: %s and %s", winner, ids[i])
			}
			winner = ids[i]
		}
	}
	if winner == "" {
		t.Fatalf("no run won: %v", results)
	}
	for _, err := range results {
		if err != nil && (!errors.As(err, &active) || active.RunID != winner) {
			t.Errorf("a losing create: %v, want an ActiveRunError naming %s", err, winner)
		}
	}
	if got := e.clusterJobs("prod-1"); len(got) != 2 {
		t.Errorf("Jobs of prod-1: %d, want the first run and the winner only", len(got))
	}
	lease := must[*coordinationv1.Lease](t)(e.admin.CoordinationV1().Leases(e.ns).Get(e.ctx, jobs.LockName(testFingerprint, "prod-1"), metav1.GetOptions{}))
	if ptr.Deref(lease.Spec.HolderIdentity, "") != winner || len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].Name != api.JobName(winner) {
		t.Errorf("Lease holder %v owners %+v, want run %s and its Job", lease.Spec.HolderIdentity, lease.OwnerReferences, winner)
	}

	// A failed run ends too.
	must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, winner))
	must[*batchv1.Job](t)(e.jobCtl.Fail(e.ctx, winner, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	if _, err := e.create(); err != nil {
		t.Fatalf("a run after the active one failed: %v", err)
	}
}
