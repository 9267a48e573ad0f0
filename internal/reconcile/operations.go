package reconcile

import (
	"context"
	"sync"
)

// Operations runs a controller's long operations (a Helm install, a bootstrap) outside its
// reconcile workers, so a slow operation never holds a worker that other objects' quick passes
// need. At most one operation runs per key, at most Limit at once; when one ends, Done is told
// the key's request so the object is reconciled again at once, and the next pass takes the
// result. A step uses it as:
//
//	if res, ok := ops.Take(key); ok { /* use res.Value, res.Err */ }
//	else if ops.Running(key) { return Waiting(...) }
//	else { ops.Start(key, req, fn); return Waiting(...) }
//
// Results live in memory: after a restart the step observes the external system again, which it
// must do anyway. On shutdown, operations that have started run to their end (an install cut in
// half leaves a release its next pass must repair) within the manager's graceful shutdown
// timeout; those still waiting for a slot are dropped.
type Operations[R comparable, T any] struct {
	// Limit bounds the operations running at once (default 4).
	Limit int
	// Done is told the request of each operation that ended (e.g. fleet.Trigger.Enqueue).
	Done func(R)

	once    sync.Once
	sem     chan struct{}
	ctx     context.Context
	mu      sync.Mutex
	running map[string]struct{}
	results map[string]Result[T]
	wg      sync.WaitGroup
}

// Result is what an operation returned.
type Result[T any] struct {
	Value T
	Err   error
}

func (o *Operations[R, T]) init() {
	o.once.Do(func() {
		if o.Limit <= 0 {
			o.Limit = 4
		}
		o.sem = make(chan struct{}, o.Limit)
		o.running = map[string]struct{}{}
		o.results = map[string]Result[T]{}
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
	o.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		var res Result[T]
		select {
		case o.sem <- struct{}{}:
			if res.Err = ctx.Err(); res.Err == nil {
				// Not cancelled by shutdown: Start waits for it.
				res.Value, res.Err = fn(context.WithoutCancel(ctx))
			}
			<-o.sem
		case <-ctx.Done():
			res.Err = ctx.Err()
		}
		o.mu.Lock()
		delete(o.running, key)
		o.results[key] = res
		o.mu.Unlock()
		if o.Done != nil {
			o.Done(req)
		}
	}()
	return true
}

// Running reports whether an operation for key is running.
func (o *Operations[R, T]) Running(key string) bool {
	o.init()
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.running[key]
	return ok
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
