package apiexport

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces"
)

// blocking is a reconciler whose passes run until released, recording which run.
type blocking struct {
	mu      sync.Mutex
	running map[string]bool
	release chan struct{}
	// deadline records, per object, whether its pass had a deadline and how far off it was.
	deadline map[string]time.Duration
}

func (b *blocking) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	b.mu.Lock()
	b.running[req.Name] = true
	if d, ok := ctx.Deadline(); ok {
		b.deadline[req.Name] = time.Until(d)
	}
	b.mu.Unlock()
	<-b.release
	return ctrl.Result{}, nil
}

func (b *blocking) isRunning(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running[name]
}

func request(lc, name string) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: workspaces.ClusterName("kubeopera.io", lc), Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}}}
}

// One workspace holds at most its share of a controller's workers: past it, its requests are
// requeued shortly without running (no error), while other workspaces' requests run.
func TestWorkspaceShareOfTheWorkers(t *testing.T) {
	type pass struct{ lc, name string }
	for _, tc := range []struct {
		name  string
		share int
		// busy are the passes already running (they hold their workers); then next is asked.
		busy    []pass
		next    pass
		wantRun bool
	}{
		{"share 2: a third of workspace A is requeued", 2, []pass{{"a", "a1"}, {"a", "a2"}}, pass{"a", "a3"}, false},
		{"share 2: B's runs while A holds its share", 2, []pass{{"a", "a1"}, {"a", "a2"}}, pass{"b", "b1"}, true},
		{"share 2: A's second runs", 2, []pass{{"a", "a1"}, {"b", "b1"}}, pass{"a", "a2"}, true},
		{"share 1: B's second waits for B", 1, []pass{{"a", "a1"}, {"b", "b1"}}, pass{"b", "b2"}, false},
		{"no share: a third of A runs", 0, []pass{{"a", "a1"}, {"a", "a2"}}, pass{"a", "a3"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &blocking{running: map[string]bool{}, deadline: map[string]time.Duration{}, release: make(chan struct{})}
			g := &shareGuard{next: inner, shares: newShares(tc.share)}
			var wg sync.WaitGroup
			for _, p := range tc.busy {
				wg.Add(1)
				go func() { defer wg.Done(); _, _ = g.Reconcile(context.Background(), request(p.lc, p.name)) }()
			}
			for _, p := range tc.busy {
				for deadline := time.Now().Add(5 * time.Second); !inner.isRunning(p.name); {
					if time.Now().After(deadline) {
						t.Fatalf("%s did not start", p.name)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			type outcome struct {
				res ctrl.Result
				err error
			}
			out := make(chan outcome, 1)
			go func() {
				res, err := g.Reconcile(context.Background(), request(tc.next.lc, tc.next.name))
				out <- outcome{res, err}
			}()
			if tc.wantRun {
				for deadline := time.Now().Add(5 * time.Second); !inner.isRunning(tc.next.name); {
					if time.Now().After(deadline) {
						t.Fatalf("%s did not run", tc.next.name)
					}
					time.Sleep(5 * time.Millisecond)
				}
				close(inner.release)
				<-out
			} else {
				var o outcome
				select {
				case o = <-out:
				case <-time.After(5 * time.Second):
					close(inner.release)
					t.Fatalf("%s was not requeued: it ran past its workspace's share", tc.next.name)
				}
				if o.err != nil || o.res.RequeueAfter < ShareRequeue || o.res.RequeueAfter > ShareRequeue*3/2 {
					t.Errorf("got %+v, %v; want RequeueAfter within [%s, %s] and no error", o.res, o.err, ShareRequeue, ShareRequeue*3/2)
				}
				if inner.isRunning(tc.next.name) {
					t.Errorf("%s ran past its workspace's share", tc.next.name)
				}
				close(inner.release)
			}
			wg.Wait()
			if len(g.shares.held) != 0 {
				t.Errorf("shares still held after every pass ended: %v", g.shares.held)
			}
		})
	}
}

// Every pass gets the provider's PassTimeout as its deadline.
func TestPassDeadline(t *testing.T) {
	inner := &blocking{running: map[string]bool{}, deadline: map[string]time.Duration{}, release: make(chan struct{})}
	close(inner.release)
	g := &shareGuard{next: inner, timeout: time.Minute, shares: newShares(0)}
	if _, err := g.Reconcile(context.Background(), request("a", "a1")); err != nil {
		t.Fatal(err)
	}
	if d, ok := inner.deadline["a1"]; !ok || d <= 0 || d > time.Minute {
		t.Errorf("the pass had deadline %v (set %v), want at most a minute away", d, ok)
	}
}
