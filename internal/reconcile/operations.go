package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

// DefaultOperationTimeout bounds one operation when Operations.Timeout is zero: a Flux or vCluster
// install (Helm, Wait=false) takes seconds against a healthy API server.
const DefaultOperationTimeout = 10 * time.Minute

// Operations runs a controller's long operations (a Helm install, a bootstrap) outside its
// reconcile workers, so a slow operation never holds a worker that other objects' quick passes
// need. At most one operation runs per key, at most Limit at once, at most PerWorkspace of one
// workspace at once (so one tenant's slow targets never hold every slot), each for at most
// Timeout; when one ends, Done is told the key's request so the object is reconciled again at
// once, and the next pass takes the result. A step uses it as:
//
//	switch res, state := ops.Poll(key); state {
//	case OperationEnded:   // use res.Value, res.Err
//	case OperationRunning: return Waiting(...)
//	case OperationIdle:    // observe; when due: ops.Run(key, req, fn); return Waiting(...)
//	}
//
// and a delete step waits with Quiet(key) so no operation writes after it.
//
// Results live in memory: after a restart the step observes the external system again, which it
// must do anyway. On shutdown, operations that have started run to their end (an install cut in
// half leaves a release its next pass must repair) within the manager's graceful shutdown
// timeout; those still waiting for a slot are dropped.
type Operations[R comparable, T any] struct {
	// Limit bounds the operations running at once (default 4).
	Limit int
	// PerWorkspace bounds the operations of one workspace (as Workspace names it) that run at
	// once; the workspace's others wait for one of its own slots, never for a slot another
	// workspace needs. 0: only Limit.
	PerWorkspace int
	// Workspace names the workspace of an operation's request (RequestWorkspace); required with
	// PerWorkspace.
	Workspace func(R) string
	// Timeout bounds each operation from when it got its slot (DefaultOperationTimeout when
	// zero): its context ends then, and its result is what it returns.
	Timeout time.Duration
	// Done is told the request of each operation that ended (e.g. apiexport.Trigger.Enqueue).
	Done func(R)

	once    sync.Once
	sem     chan struct{}
	ctx     context.Context
	mu      sync.Mutex
	running map[string]struct{}
	results map[string]Result[T]
	// perWorkspace holds the slots of the workspaces with operations running or waiting.
	perWorkspace map[string]*workspaceSlots
	wg           sync.WaitGroup
}

// workspaceSlots are one workspace's PerWorkspace slots; users counts the operations holding or
// waiting for one, so the entry goes when the last one ends.
type workspaceSlots struct {
	name  string
	sem   chan struct{}
	users int
}

// Result is what an operation returned.
type Result[T any] struct {
	Value T
	Err   error
}

// NewOperations returns the long operations of a controller registered with workspaces/apiexport:
// at most limit at once and perWorkspace of one workspace (0: no such bound), each bounded by
// timeout, added to mgr so they end with it. The end of each reconciles its object again through
// the returned Watch, which the controller passes to apiexport.NewController.
func NewOperations[T any](mgr mcmanager.Manager, limit, perWorkspace int, timeout time.Duration) (*Operations[mcreconcile.Request, T], apiexport.Watch, error) {
	trigger := &apiexport.Trigger{}
	ops := &Operations[mcreconcile.Request, T]{
		Limit: limit, PerWorkspace: perWorkspace, Workspace: RequestWorkspace, Timeout: timeout, Done: trigger.Enqueue,
	}
	if err := mgr.GetLocalManager().Add(ops); err != nil {
		return nil, apiexport.Watch{}, err
	}
	return ops, apiexport.Watch{Trigger: trigger}, nil
}

// RequestWorkspace is the logical cluster of a multicluster request: Operations.Workspace for
// controllers registered with workspaces/apiexport.
func RequestWorkspace(req mcreconcile.Request) string {
	return workspaces.LogicalCluster(req.ClusterName)
}

func (o *Operations[R, T]) init() {
	o.once.Do(func() {
		if o.Limit <= 0 {
			o.Limit = 4
		}
		if o.Timeout <= 0 {
			o.Timeout = DefaultOperationTimeout
		}
		o.sem = make(chan struct{}, o.Limit)
		o.running = map[string]struct{}{}
		o.results = map[string]Result[T]{}
		o.perWorkspace = map[string]*workspaceSlots{}
	})
}

// Start serves operations until ctx ends, then waits for those that have started
// (manager.Runnable).
func (o *Operations[R, T]) Start(ctx context.Context) error {
	o.init()
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
	<-ctx.Done()
	o.wg.Wait()
	return nil
}

// Run runs fn for key unless an operation for key is running or its result is waiting to be
// taken; it reports whether it started one.
func (o *Operations[R, T]) Run(key string, req R, fn func(context.Context) (T, error)) bool {
	o.init()
	o.mu.Lock()
	if _, ok := o.running[key]; ok {
		o.mu.Unlock()
		return false
	}
	if _, ok := o.results[key]; ok {
		o.mu.Unlock()
		return false
	}
	o.running[key] = struct{}{}
	ctx := o.ctx
	ws := o.join(req)
	o.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		var res Result[T]
		if res.Err = o.acquire(ctx, ws); res.Err == nil {
			if res.Err = ctx.Err(); res.Err == nil {
				// Not cancelled by shutdown (Start waits for it), but bounded by Timeout.
				opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Timeout)
				res.Value, res.Err = fn(opCtx)
				if res.Err != nil && errors.Is(opCtx.Err(), context.DeadlineExceeded) {
					res.Err = fmt.Errorf("the operation ran past its deadline of %s: %w", o.Timeout, res.Err)
				}
				cancel()
			}
			o.release(ws)
		}
		o.mu.Lock()
		o.leave(ws)
		delete(o.running, key)
		o.results[key] = res
		o.mu.Unlock()
		if o.Done != nil {
			o.Done(req)
		}
	}()
	return true
}

// join returns the slots of req's workspace, counting one more user; nil without PerWorkspace.
// o.mu is held.
func (o *Operations[R, T]) join(req R) *workspaceSlots {
	if o.PerWorkspace <= 0 || o.Workspace == nil {
		return nil
	}
	name := o.Workspace(req)
	ws := o.perWorkspace[name]
	if ws == nil {
		ws = &workspaceSlots{name: name, sem: make(chan struct{}, o.PerWorkspace)}
		o.perWorkspace[name] = ws
	}
	ws.users++
	return ws
}

// leave counts one user of ws less and forgets it after the last. o.mu is held.
func (o *Operations[R, T]) leave(ws *workspaceSlots) {
	if ws == nil {
		return
	}
	if ws.users--; ws.users == 0 {
		delete(o.perWorkspace, ws.name)
	}
}

// acquire takes a slot of the workspace (first: a workspace's operations waiting for their own
// slots never queue for the shared ones) and then a shared slot; it fails when ctx ends first.
func (o *Operations[R, T]) acquire(ctx context.Context, ws *workspaceSlots) error {
	if ws != nil {
		select {
		case ws.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case o.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		if ws != nil {
			<-ws.sem
		}
		return ctx.Err()
	}
}

// release gives back the slots acquire took.
func (o *Operations[R, T]) release(ws *workspaceSlots) {
	<-o.sem
	if ws != nil {
		<-ws.sem
	}
}

// Running reports whether an operation for key is running.
func (o *Operations[R, T]) Running(key string) bool {
	o.init()
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.running[key]
	return ok
}

// Recheck is how long a step waiting on a running operation waits before it looks again
// anyway: the operation's end requeues the object at once, so this is only the fallback for an
// end that was never told (its Timeout, and a little more).
func (o *Operations[R, T]) Recheck() time.Duration {
	o.init()
	return o.Timeout + 10*time.Second
}

// OperationState is what Poll found for a key.
type OperationState int

const (
	// OperationIdle: no operation runs for the key and none left a result: the step observes
	// the external system and starts one when due.
	OperationIdle OperationState = iota
	// OperationRunning: one runs; its end reconciles the object again.
	OperationRunning
	// OperationEnded: one ended since the last Poll; its result is returned (and forgotten).
	OperationEnded
)

// Poll is a step's one look at key's operation, under one lock: the result of one that ended
// (taken), or whether one is running.
func (o *Operations[R, T]) Poll(key string) (Result[T], OperationState) {
	o.init()
	o.mu.Lock()
	defer o.mu.Unlock()
	if res, ok := o.results[key]; ok {
		delete(o.results, key)
		return res, OperationEnded
	}
	if _, ok := o.running[key]; ok {
		return Result[T]{}, OperationRunning
	}
	return Result[T]{}, OperationIdle
}

// Quiet reports whether no operation runs for key, forgetting the result of one that ended: a
// delete step waits until it is, so no operation writes after the delete.
func (o *Operations[R, T]) Quiet(key string) bool {
	_, state := o.Poll(key)
	return state != OperationRunning
}

// Take returns and forgets the result of key's last operation, if it ended since last taken.
func (o *Operations[R, T]) Take(key string) (Result[T], bool) {
	o.init()
	o.mu.Lock()
	defer o.mu.Unlock()
	res, ok := o.results[key]
	delete(o.results, key)
	return res, ok
}

// NeedLeaderElection: operations run where the reconcilers run.
func (o *Operations[R, T]) NeedLeaderElection() bool { return true }
