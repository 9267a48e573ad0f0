package apiexport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/kcp-dev/logicalcluster/v3"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces"
)

// MapFunc maps an object of a watched kind to the objects (in the same workspace) to reconcile.
type MapFunc func(client.Object) []types.NamespacedName

// route is one controller's watch of one kind: one handler on that kind's informer in each shard.
type route struct {
	obj     client.Object
	mapFn   MapFunc
	updates func(old, new client.Object) bool
	settled func(client.Object) time.Duration
	queue   workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	// controller names the controller whose queue this is.
	controller string
}

// addOpts are how a request is queued: its priority and how long it may wait first.
type addOpts struct {
	priority int
	after    time.Duration
}

func requestFor(key types.NamespacedName) reconcile.Request {
	return reconcile.Request{NamespacedName: key}
}

// Watch describes one kind a controller watches in every workspace, and how its objects map to
// requests (nil Map: the object itself); or, with Trigger set, a trigger of the controller.
type Watch struct {
	Object  client.Object
	Map     MapFunc
	Trigger *Trigger
	// Updates, if set, says which updates are queued (old and new object): e.g. not the
	// controller's own status writes. nil: every update. A Watch of the controller's own kind
	// with Updates and no Map sets how that kind is watched.
	Updates func(old, new client.Object) bool
	// Settled, if set, says for an object listed when the informer starts (a manager's cold
	// start) how long its first pass may wait: a settled object (Ready at its generation) is only
	// due for its periodic drift check, which then comes on its usual schedule, spread, instead
	// of every object's at once. 0: queued at once (behind what changes meanwhile). Set with
	// Updates on a Watch of the controller's own kind.
	Settled func(client.Object) time.Duration
}

// Trigger queues requests of its controller from outside any watch: e.g. when a long operation
// the controller started has ended (reconcile.Operations' Done).
type Trigger struct {
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[mcreconcile.Request]
}

// Enqueue queues req; before the controller started, requests are dropped (nothing ran yet).
func (t *Trigger) Enqueue(req mcreconcile.Request) {
	t.mu.Lock()
	q := t.queue
	t.mu.Unlock()
	if q != nil {
		q.Add(req)
	}
}

// Start implements the controller source.
func (t *Trigger) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	t.mu.Lock()
	t.queue = q
	t.mu.Unlock()
	return nil
}

func (t *Trigger) String() string { return "fleet trigger" }

// NewController registers a controller for For (and the extra watches) in every workspace of
// the provider: one workqueue and, per shard, one handler per watched informer that routes each
// event by its logical cluster, never a handler, client or recorder per workspace. Requests carry
// the cluster name "<provider>#<logical cluster>"; the reconciler gets the workspace with
// Provider.Workspace. It is added to mgr's local manager, so it runs only on the leader.
//
// Every pass gets the provider's PassTimeout as its deadline, and one workspace holds at most
// WorkersPerWorkspace of the controller's workers at once (shareGuard): one tenant's slow objects
// never starve the others.
func NewController(mgr mcmanager.Manager, name string, p *Provider, For client.Object, opts controller.TypedOptions[mcreconcile.Request], watches ...Watch) error {
	if opts.Reconciler == nil {
		return errors.New("fleet: a controller needs a Reconciler")
	}
	// As controller-runtime's builder does: the manager's controller defaults and its logger (the
	// reconcilers' loggers derive from it).
	local := mgr.GetLocalManager()
	opts.DefaultFromConfig(local.GetControllerOptions())
	if opts.Logger.GetSink() == nil {
		opts.Logger = local.GetLogger()
	}
	// controller-runtime's own lines about a request ("Reconciler error", which carries a Stalled
	// outcome's reason and message) name its workspace and object as the reconcilers' lines do
	// (reconcile.RequestLogger: "cluster" and the kind in lowerCamel case); the reconcilers get
	// the controller's logger without them (shareGuard), so nothing is named twice.
	base := opts.Logger.WithValues("controller", name)
	if opts.LogConstructor == nil {
		kindKey := lowerFirst(reflect.TypeOf(For).Elem().Name())
		opts.LogConstructor = func(req *mcreconcile.Request) logr.Logger {
			if req == nil {
				return base
			}
			return base.WithValues("cluster", workspaces.LogicalCluster(req.ClusterName), kindKey, klog.KRef(req.Namespace, req.Name))
		}
	}
	opts.Reconciler = &shareGuard{
		next:    opts.Reconciler,
		log:     base,
		timeout: p.opts.PassTimeout,
		shares:  newShares(p.opts.WorkersPerWorkspace),
	}
	c, err := controller.NewTypedUnmanaged(name, opts)
	if err != nil {
		return err
	}
	own := Watch{Object: For}
	var others []Watch
	for _, w := range watches {
		if w.Trigger == nil && w.Map == nil && (w.Updates != nil || w.Settled != nil) && reflect.TypeOf(w.Object) == reflect.TypeOf(For) {
			own.Updates, own.Settled = w.Updates, w.Settled
			continue
		}
		others = append(others, w)
	}
	for _, w := range append([]Watch{own}, others...) {
		if w.Trigger != nil {
			if err := c.Watch(w.Trigger); err != nil {
				return err
			}
			continue
		}
		if err := c.Watch(&source{provider: p, watch: w, controller: name}); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.controllers++
	p.mu.Unlock()
	return local.Add(c)
}

// source feeds a controller's queue from the provider; it registers a route when the controller
// starts.
type source struct {
	provider   *Provider
	watch      Watch
	controller string
}

func (s *source) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	return s.provider.addRoute(ctx, &route{obj: s.watch.Object, mapFn: s.watch.Map, updates: s.watch.Updates, settled: s.watch.Settled, queue: q, controller: s.controller})
}

func (s *source) String() string { return fmt.Sprintf("fleet source %T", s.watch.Object) }

// addRoute serves r on every shard, now and later (routeShard).
func (p *Provider) addRoute(ctx context.Context, r *route) error {
	p.mu.Lock()
	p.routes = append(p.routes, r)
	shards := make([]*shard, 0, len(p.shards))
	for _, s := range p.shards {
		if s.routed {
			shards = append(shards, s)
		}
	}
	p.mu.Unlock()
	for _, s := range shards {
		if err := p.watch(ctx, s, r); err != nil {
			return err
		}
	}
	return nil
}

// watch adds r's one handler to its kind's informer in shard s.
func (p *Provider) watch(ctx context.Context, s *shard, r *route) error {
	inf, err := s.cache.GetInformer(ctx, r.obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("failed to watch %T at %s: %w", r.obj, s.url, err)
	}
	object := func(obj any) (client.Object, bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		o, ok := obj.(client.Object)
		return o, ok
	}
	handle := func(obj any, opts addOpts) {
		if o, ok := object(obj); ok {
			p.route(r, logicalcluster.From(o).String(), o, opts)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			if !initialList {
				handle(obj, addOpts{})
				return
			}
			// What the informer lists when it starts (a manager's cold start) goes behind what
			// changes meanwhile, as controller-runtime's own handlers do; a settled object's
			// drift check comes later still (Watch.Settled).
			opts := addOpts{priority: handler.LowPriority}
			if o, ok := object(obj); ok && r.settled != nil {
				if opts.after = r.settled(o); opts.after > 0 {
					deferredDriftChecks.WithLabelValues(r.controller).Inc()
				}
			}
			handle(obj, opts)
		},
		UpdateFunc: func(oldObj, obj any) {
			if r.updates != nil {
				o, ok1 := oldObj.(client.Object)
				n, ok2 := obj.(client.Object)
				if ok1 && ok2 && !r.updates(o, n) {
					return
				}
			}
			handle(obj, addOpts{})
		},
		DeleteFunc: func(obj any) { handle(obj, addOpts{}) },
	})
	return err
}

// route queues the requests obj maps to with opts, or parks them until lc is engaged.
func (p *Provider) route(r *route, lc string, obj client.Object, opts addOpts) {
	keys := []types.NamespacedName{{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	if r.mapFn != nil {
		keys = r.mapFn(obj)
	}
	if len(keys) == 0 {
		return
	}
	p.mu.Lock()
	_, engaged := p.engaged[lc]
	if !engaged {
		byRoute := p.pending[lc]
		if byRoute == nil {
			byRoute = map[*route]map[types.NamespacedName]addOpts{}
			p.pending[lc] = byRoute
		}
		set := byRoute[r]
		if set == nil {
			set = map[types.NamespacedName]addOpts{}
			byRoute[r] = set
		}
		for _, k := range keys {
			// A key parked twice keeps the more urgent of its two: what changed meanwhile.
			if prev, ok := set[k]; !ok || opts.after < prev.after || (opts.after == prev.after && opts.priority > prev.priority) {
				set[k] = opts
			}
		}
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	for _, k := range keys {
		r.add(mcreconcile.Request{ClusterName: p.ClusterName(lc), Request: requestFor(k)}, opts)
	}
}

// add queues req with opts' priority when the controller's queue has priorities
// (controller-runtime's default), else plainly; after opts.after when that is set.
func (r *route) add(req mcreconcile.Request, opts addOpts) {
	if pq, ok := r.queue.(priorityqueue.PriorityQueue[mcreconcile.Request]); ok && (opts.priority != 0 || opts.after > 0) {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: &opts.priority, After: opts.after}, req)
		return
	}
	if opts.after > 0 {
		r.queue.AddAfter(req, opts.after)
		return
	}
	r.queue.Add(req)
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
