package apiexport

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces"
)

// ShareRequeue is how soon a request is tried again when its workspace held its share of the
// controller's workers (jittered by up to half).
const ShareRequeue = time.Second

// shareGuard is the reconciler NewController registers in front of every controller's own: it
// gives each pass a deadline, and lets one workspace hold at most its share of the workers. A
// request whose workspace already holds its share is not run but requeued shortly (RequeueAfter,
// no error: nothing failed), so its worker goes to the next request, another workspace's when
// there is one; the workqueue keeps one entry per object, so a deferred request costs nothing
// while it waits.
type shareGuard struct {
	next reconcile.TypedReconciler[mcreconcile.Request]
	// log is the controller's logger without the request's workspace and object, which the
	// reconcilers add themselves (reconcile.RequestLogger); unset, the context's is kept.
	log     logr.Logger
	timeout time.Duration
	shares  *shares
}

func (g *shareGuard) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	if g.log.GetSink() != nil {
		ctx = ctrl.LoggerInto(ctx, g.log.WithValues("reconcileID", controller.ReconcileIDFromContext(ctx)))
	}
	lc := workspaces.LogicalCluster(req.ClusterName)
	if !g.shares.acquire(lc) {
		ctrl.LoggerFrom(ctx).V(2).Info("Workspace holds its share of the workers; requeued", "cluster", lc)
		return ctrl.Result{RequeueAfter: wait.Jitter(ShareRequeue, 0.5)}, nil
	}
	defer g.shares.release(lc)
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	return g.next.Reconcile(ctx, req)
}

// shares counts the passes each workspace has running, and bounds them to max (0: no bound).
type shares struct {
	max  int
	mu   sync.Mutex
	held map[string]int
}

func newShares(max int) *shares { return &shares{max: max, held: map[string]int{}} }

// acquire takes one of workspace's shares, if it has one left.
func (s *shares) acquire(workspace string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.held[workspace] >= s.max {
		return false
	}
	s.held[workspace]++
	return true
}

// release gives back one of workspace's shares.
func (s *shares) release(workspace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[workspace]--; s.held[workspace] <= 0 {
		delete(s.held, workspace)
	}
}
