package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
)

const finalizer = "kubeopera.io/test"

func newClient(t *testing.T) client.WithWatch {
	t.Helper()
	cluster := framework.StartCluster(t, framework.ClusterOptions{
		CRDDirectoryPaths: []string{filepath.Join(framework.RepoRoot(), "config", "crd", "bases")},
	})
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kov1alpha1.AddToScheme(s))
	c, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newTenant(t *testing.T, c client.Client, name string, annotations map[string]string) *kov1alpha1.Tenant {
	t.Helper()
	tn := &kov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec: kov1alpha1.TenantSpec{
			UserID: "u", TenantName: name, CloudSpaceID: name,
			Quota: kov1alpha1.TenantQuota{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
		},
	}
	if err := c.Create(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	return get(t, c, name)
}

func get(t *testing.T, c client.Client, name string) *kov1alpha1.Tenant {
	t.Helper()
	tn := &kov1alpha1.Tenant{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, tn); err != nil {
		t.Fatal(err)
	}
	return tn
}

// run runs one pass of the named object with the given normal steps and returns its outcome and
// the object as stored afterwards.
func run(t *testing.T, c client.Client, name string, steps ...reconcile.Step[*kov1alpha1.Tenant]) (ctrl.Result, error, *kov1alpha1.Tenant) {
	t.Helper()
	obj := get(t, c, name)
	res, err := reconcile.Pass[*kov1alpha1.Tenant]{
		Client: c, Object: obj, Scope: obj, Finalizer: finalizer, Normal: steps,
		ReadyMessage: func(s *kov1alpha1.Tenant) string { return s.Name + " is ready" },
		ReadyRequeue: func() time.Duration { return time.Hour },
	}.Run(context.Background())
	return res, err, get(t, c, name)
}

func step(cond string, fn func() error) reconcile.Step[*kov1alpha1.Tenant] {
	return reconcile.Step[*kov1alpha1.Tenant]{Name: "do " + cond, Condition: cond, Run: func(_ context.Context, obj *kov1alpha1.Tenant) error {
		if err := fn(); err != nil {
			return err
		}
		// A finished step sets its own condition.
		reconcile.MarkTrue(obj, cond, "Succeeded", "done")
		return nil
	}}
}

func condition(obj reconcile.Object, typ string) string {
	c := reconcile.GetCondition(obj, typ)
	if c == nil {
		return "absent"
	}
	return string(c.Status) + "/" + c.Reason
}

// TestOutcomes is the skeleton's contract: every step outcome maps to exactly one set of
// conditions, phase, observedGeneration and result.
func TestOutcomes(t *testing.T) {
	c := newClient(t)
	// A dial to a backend address the tenant must not read: the status says what kind of failure
	// it was, never the address.
	transient := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 96, 0, 1), Port: 443}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := map[string]struct {
		outcome                              error
		wantPhase                            string
		wantReady, wantReconciling, wantStal string
		wantStep                             string
		wantRequeue                          time.Duration
		wantErr                              func(error) bool
		wantObserved                         bool
		wantMessage                          string
	}{
		"done": {
			outcome: nil, wantPhase: "Ready", wantReady: "True/Succeeded", wantReconciling: "absent", wantStal: "absent",
			wantStep: "True/Succeeded", wantRequeue: time.Hour, wantErr: func(err error) bool { return err == nil }, wantObserved: true,
			wantMessage: "is ready",
		},
		"waiting": {
			outcome: reconcile.Waiting("Waiting", "waiting for the Pod", 7*time.Second), wantPhase: "Pending",
			wantReady: "False/Waiting", wantReconciling: "True/Waiting", wantStal: "absent", wantStep: "False/Waiting",
			wantRequeue: 7 * time.Second, wantErr: func(err error) bool { return err == nil }, wantObserved: true,
			wantMessage: "waiting for the Pod",
		},
		"stalled": {
			outcome: reconcile.Stalled("InstallFailed", "chart not found"), wantPhase: "Failed",
			wantReady: "False/InstallFailed", wantReconciling: "absent", wantStal: "True/InstallFailed", wantStep: "False/InstallFailed",
			wantErr: func(err error) bool { return errors.Is(err, ctrlreconcile.TerminalError(nil)) }, wantObserved: true,
			wantMessage: "chart not found",
		},
		"a read limit error stalls, however it is wrapped": {
			outcome: fmt.Errorf("failed to list nodes: %w", &readlimit.Error{Subject: "node list", Limit: "3 pages"}), wantPhase: "Failed",
			wantReady: "False/ReadLimitExceeded", wantReconciling: "absent", wantStal: "True/ReadLimitExceeded", wantStep: "False/ReadLimitExceeded",
			wantErr: func(err error) bool { return errors.Is(err, ctrlreconcile.TerminalError(nil)) }, wantObserved: true,
			wantMessage: "the cluster's node list exceeded 3 pages",
		},
		"transient error reaches the conditions": {
			outcome: transient, wantPhase: "Pending",
			wantReady: "False/TransientError", wantReconciling: "True/TransientError", wantStal: "absent", wantStep: "False/TransientError",
			wantErr: func(err error) bool { return errors.Is(err, transient) }, wantObserved: false,
			wantMessage: "Failed to do StepDone: a connection was refused (retrying",
		},
	}
	i := 0
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			i++
			objName := fmt.Sprintf("outcome-%d", i)
			newTenant(t, c, objName, nil)
			res, err, after := run(t, c, objName,
				step("StepDone", func() error { return tc.outcome }),
				step("Second", func() error { return nil }))
			if !tc.wantErr(err) {
				t.Fatalf("error = %v", err)
			}
			if res.RequeueAfter != tc.wantRequeue {
				t.Errorf("RequeueAfter = %s, want %s", res.RequeueAfter, tc.wantRequeue)
			}
			if err != nil && res.RequeueAfter != 0 {
				t.Error("an error together with RequeueAfter")
			}
			// A Ready object's drift check waits behind every object that changed or waits on
			// something; nothing else changes the request's priority.
			if drift := tc.wantPhase == "Ready"; drift != (res.Priority != nil && *res.Priority == handler.LowPriority) || (!drift && res.Priority != nil) {
				t.Errorf("Priority = %v for phase %s, want low for a drift check only", res.Priority, tc.wantPhase)
			}
			if string(after.Status.Phase) != tc.wantPhase {
				t.Errorf("phase = %q, want %q", after.Status.Phase, tc.wantPhase)
			}
			for typ, want := range map[string]string{"Ready": tc.wantReady, "Reconciling": tc.wantReconciling, "Stalled": tc.wantStal, "StepDone": tc.wantStep} {
				if got := condition(after, typ); got != want {
					t.Errorf("%s = %s, want %s", typ, got, want)
				}
			}
			if got := after.Status.ObservedGeneration == after.Generation; got != tc.wantObserved {
				t.Errorf("observedGeneration bumped = %v, want %v", got, tc.wantObserved)
			}
			if !strings.Contains(after.Status.Message, tc.wantMessage) {
				t.Errorf("message %q lacks %q", after.Status.Message, tc.wantMessage)
			}
			if strings.Contains(after.Status.Message, "10.96.0.1") {
				t.Errorf("message %q names the backend address", after.Status.Message)
			}
			if !strings.Contains(strings.Join(after.Finalizers, ","), finalizer) {
				t.Errorf("finalizer not added: %v", after.Finalizers)
			}
		})
	}
}

// TestStepsRunInOrderAndStopAtTheFirstOutcome: later steps do not run after a step that did not
// finish.
func TestStepsRunInOrderAndStopAtTheFirstOutcome(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "order", nil)
	var ran []string
	rec := func(n string, err error) reconcile.Step[*kov1alpha1.Tenant] {
		return reconcile.Step[*kov1alpha1.Tenant]{Name: n, Run: func(context.Context, *kov1alpha1.Tenant) error { ran = append(ran, n); return err }}
	}
	_, _, _ = run(t, c, "order", rec("a", nil), rec("b", reconcile.Waiting("Waiting", "b waits", time.Second)), rec("c", nil))
	if strings.Join(ran, ",") != "a,b" {
		t.Fatalf("steps ran %v, want a,b", ran)
	}
}

// TestFailedIsLeftAloneUntilRetry: a Failed object is not reconciled again until the retry
// annotation changes; the retry is recorded bounded, however long the annotation.
func TestFailedIsLeftAloneUntilRetry(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "retry", nil)
	calls := 0
	stall := step("S", func() error { calls++; return reconcile.Stalled("Broken", "broken") })
	if _, err, after := run(t, c, "retry", stall); err == nil || after.Status.Phase != "Failed" {
		t.Fatalf("want Failed, got %v %s", err, after.Status.Phase)
	}
	if _, err, _ := run(t, c, "retry", stall); err != nil || calls != 1 {
		t.Fatalf("a Failed object was reconciled again without a retry request (calls %d, err %v)", calls, err)
	}

	long := strings.Repeat("x", 5000)
	tn := get(t, c, "retry")
	tn.Annotations = map[string]string{commonv1alpha1.RetryAnnotation: long}
	if err := c.Update(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	_, err, after := run(t, c, "retry", step("S", func() error { calls++; return nil }))
	if err != nil || calls != 2 || after.Status.Phase != "Ready" {
		t.Fatalf("retry did not run the steps: calls %d, err %v, phase %s", calls, err, after.Status.Phase)
	}
	if got := after.Status.LastHandledRetry; got != commonv1alpha1.RetryToken(long) || len(got) > 64 {
		t.Errorf("lastHandledRetry = %q, want the bounded token", got)
	}
	if reconcile.RetryRequested(after) {
		t.Error("the handled retry is still reported as requested")
	}

	// A short value is kept as the user wrote it.
	if commonv1alpha1.RetryToken("1") != "1" {
		t.Error("short retry values must be kept as they are")
	}
}

// TestAdminPhaseResetRetries: an admin patching status.phase to Pending starts a new attempt.
func TestAdminPhaseResetRetries(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "admin", nil)
	calls := 0
	_, _, after := run(t, c, "admin", step("S", func() error { calls++; return reconcile.Stalled("Broken", "broken") }))
	after.Status.Phase = kov1alpha1.TenantPhasePending
	if err := c.Status().Update(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	if _, err, after := run(t, c, "admin", step("S", func() error { calls++; return nil })); err != nil || calls != 2 || after.Status.Phase != "Ready" {
		t.Fatalf("admin reset did not retry: calls %d err %v phase %s", calls, err, after.Status.Phase)
	}
}

// TestStaleCopyConflictRequeues: a pass that worked from a stale copy does not overwrite a newer
// status; it asks to run again soon.
func TestStaleCopyConflictRequeues(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "stale", nil)
	obj := get(t, c, "stale")
	pass := reconcile.Pass[*kov1alpha1.Tenant]{Client: c, Object: obj, Finalizer: finalizer, Normal: []reconcile.Step[*kov1alpha1.Tenant]{{
		Name: "race", Run: func(ctx context.Context, _ *kov1alpha1.Tenant) error {
			// Someone else writes the object meanwhile.
			other := get(t, c, "stale")
			other.Status.Message = "written by someone else"
			return c.Status().Update(ctx, other)
		},
	}}}
	res, err := pass.Run(context.Background())
	if err != nil || res.RequeueAfter != reconcile.ConflictRequeue {
		t.Fatalf("want a quick requeue on conflict, got %v %v", res, err)
	}
	if got := get(t, c, "stale").Status.Message; got != "written by someone else" {
		t.Errorf("the newer status was overwritten: %q", got)
	}
}

// TestDeleteRunsStepsThenDropsFinalizer: delete steps run in order, waiting keeps the finalizer,
// and the finalizer goes only when every step is done.
func TestDeleteRunsStepsThenDropsFinalizer(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "gone", nil)
	_, _, _ = run(t, c, "gone", step("S", func() error { return nil }))
	if err := c.Delete(context.Background(), get(t, c, "gone")); err != nil {
		t.Fatal(err)
	}
	deleteRun := func(err error) (ctrl.Result, error) {
		return reconcile.Pass[*kov1alpha1.Tenant]{Client: c, Object: get(t, c, "gone"), Finalizer: finalizer,
			Delete: []reconcile.Step[*kov1alpha1.Tenant]{{Name: "clean", Run: func(context.Context, *kov1alpha1.Tenant) error { return err }}},
		}.Run(context.Background())
	}
	res, err := deleteRun(reconcile.Waiting("Deleting", "waiting for the namespace", 3*time.Second))
	if err != nil || res.RequeueAfter != 3*time.Second {
		t.Fatalf("want a requeue while deleting, got %v %v", res, err)
	}
	tn := get(t, c, "gone")
	if tn.Status.Phase != "Deleting" || condition(tn, "Ready") != "False/Deleting" || len(tn.Finalizers) == 0 {
		t.Fatalf("while deleting: phase %s Ready %s finalizers %v", tn.Status.Phase, condition(tn, "Ready"), tn.Finalizers)
	}
	if _, err := deleteRun(nil); err != nil {
		t.Fatal(err)
	}
	err = c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "gone"}, &kov1alpha1.Tenant{})
	if err == nil {
		t.Fatal("the object is still there after its delete steps finished")
	}
}

// TestPassPastItsDeadlineWritesItsStatus: a step still running at the pass' deadline (the fleet's
// controller wrapper sets one) ends the pass, and the status still says why.
func TestPassPastItsDeadlineWritesItsStatus(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "deadline", nil)
	obj := get(t, c, "deadline")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := reconcile.Pass[*kov1alpha1.Tenant]{
		Client: c, Object: obj, Scope: obj, Finalizer: finalizer,
		Normal: []reconcile.Step[*kov1alpha1.Tenant]{{Name: "list the nodes", Condition: "Listed", Run: func(ctx context.Context, _ *kov1alpha1.Tenant) error {
			<-ctx.Done() // a target that never answers
			return fmt.Errorf("failed to list nodes: %w", ctx.Err())
		}}},
	}.Run(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want the deadline", err)
	}
	after := get(t, c, "deadline")
	if got := condition(after, "Listed"); got != "False/TransientError" {
		t.Errorf("Listed = %s, want False/TransientError", got)
	}
	if !strings.Contains(after.Status.Message, "Failed to list the nodes: the reconcile pass ran past its deadline") {
		t.Errorf("message %q does not say the pass ran out of time", after.Status.Message)
	}
}

// TestOnceSteps: a finished Once step is not redone by the passes that follow the object's
// progress toward Ready, and is redone after a transient error and in every pass of a Ready
// object (the drift check).
func TestOnceSteps(t *testing.T) {
	c := newClient(t)
	newTenant(t, c, "once", nil)
	onceRuns, releaseRuns := 0, 0
	var next error
	once := step("Claimed", func() error { onceRuns++; return nil })
	once.Once = true
	release := step("Released", func() error { releaseRuns++; return nil })
	release.Once = true
	later := step("Installed", func() error { return next })
	pass := func() {
		t.Helper()
		obj := get(t, c, "once")
		_, _ = reconcile.Pass[*kov1alpha1.Tenant]{
			Client: c, Object: obj, Scope: obj, Finalizer: finalizer, Normal: []reconcile.Step[*kov1alpha1.Tenant]{once, release, later},
			Phase:        func(reconcile.Object, string) string { return "Provisioning" },
			ReadyRequeue: func() time.Duration { return time.Hour },
		}.Run(context.Background())
	}
	for i, tc := range []struct {
		what string
		next error
		want int
	}{
		{"a new object runs every step", reconcile.Waiting("Waiting", "installing", time.Minute), 1},
		{"a pass following the install does not claim again", reconcile.Waiting("Waiting", "installing", time.Minute), 1},
		{"nor does one whose install then fails transiently", errors.New("connection refused"), 1},
		{"the pass after a transient error runs every step", nil, 2},
		{"a Ready object's pass (the drift check) runs every step", nil, 3},
	} {
		next = tc.next
		pass()
		if onceRuns != tc.want {
			t.Fatalf("pass %d (%s): the Once step ran %d times in all, want %d", i+1, tc.what, onceRuns, tc.want)
		}
	}
	if got := get(t, c, "once"); got.Status.Phase != "Ready" {
		t.Errorf("phase %q after the last passes, want Ready", got.Status.Phase)
	}
	// A drift check found the first step undone (its condition False, the object waiting): the
	// next pass runs it, and every Once step after it too, although those say they are done.
	obj := get(t, c, "once")
	reconcile.MarkFalse(obj, "Claimed", "Waiting", "the namespace is being made again")
	reconcile.MarkFalse(obj, "Ready", "Waiting", "the namespace is being made again")
	reconcile.SetCondition(obj, "Reconciling", metav1.ConditionTrue, "Waiting", "the namespace is being made again")
	if err := c.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	claims, releases := onceRuns, releaseRuns
	next = reconcile.Waiting("Waiting", "installing", time.Minute)
	pass()
	if onceRuns != claims+1 || releaseRuns != releases+1 {
		t.Errorf("after a step before it had work to do, the Once steps ran %d and %d more times, want 1 and 1", onceRuns-claims, releaseRuns-releases)
	}
}
