package apiexport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces"
)

// Options configure a Provider.
type Options struct {
	// Name prefixes the cluster names of requests: "<Name>#<logical cluster>".
	Name string
	// Config points at the workspace holding the export's endpoint slice, with the manager's
	// identity; QPS and Burst bound each shard's requests.
	Config *rest.Config
	// EndpointSlice names the export's APIExportEndpointSlice.
	EndpointSlice string
	// Scheme knows every kind read or written through the export.
	Scheme *runtime.Scheme
	// Events writes the events of every workspace; nil: events are dropped.
	Events *EventSink
	// Log is the provider's logger.
	Log logr.Logger
	// OnEngage and OnDisengage are told each workspace engaged or disengaged, with the binding
	// that caused it.
	OnEngage, OnDisengage func(logicalCluster string, binding client.Object)
	// OnEndpoints is told the endpoint slice's URLs (one per shard) each time they are read, before
	// new ones are served (the manager keeps tenants' targets off them, internal/netguard).
	OnEndpoints func(urls []string)
	// PassTimeout is the deadline of every reconcile pass of every controller registered with
	// NewController (0: none).
	PassTimeout time.Duration
	// WorkersPerWorkspace bounds how many of a controller's workers one workspace may hold at
	// once (0: no bound but the controller's MaxConcurrentReconciles).
	WorkersPerWorkspace int
}

// Provider serves every workspace bound to one APIExport, on every shard its endpoint slice
// lists. It is a multicluster.Provider (the manager's GetCluster works) and a ProviderRunnable,
// but it engages nobody: controllers are registered with NewController and get their requests
// from one handler per informer.
type Provider struct {
	opts Options

	mu      sync.RWMutex
	shards  map[string]*shard // by endpoint URL
	engaged map[string]*shard // by logical cluster
	routes  []*route
	indexes []index
	// controllers counts the controllers registered with NewController.
	controllers int
	// engageHooks are told every workspace engaged (WhenEngaged).
	engageHooks []func(logicalCluster string)
	// pending holds requests for workspaces whose objects were seen before their binding was:
	// they are queued when the workspace is engaged and dropped when it goes.
	pending map[string]map[*route]map[types.NamespacedName]addOpts
	// writes are the manager's own writes to workspace objects whose events are in flight.
	writes ownWrites
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
)

// New returns a provider; it watches nothing until Start.
func New(opts Options) (*Provider, error) {
	if opts.Config == nil || opts.EndpointSlice == "" || opts.Scheme == nil || opts.Name == "" {
		return nil, errors.New("fleet: Name, Config, EndpointSlice and Scheme are required")
	}
	return &Provider{
		opts:    opts,
		shards:  map[string]*shard{},
		engaged: map[string]*shard{},
		pending: map[string]map[*route]map[types.NamespacedName]addOpts{},
	}, nil
}

// Name is the provider's cluster-name prefix.
func (p *Provider) Name() string { return p.opts.Name }

// ClusterName is the name of logicalCluster's requests.
func (p *Provider) ClusterName(logicalCluster string) multicluster.ClusterName {
	return workspaces.ClusterName(p.opts.Name, logicalCluster)
}

// Start watches the endpoint slice and serves each of its URLs until ctx ends. A provider no
// controller is registered with watches nothing: engaging workspaces nobody reconciles would
// only cost memory.
func (p *Provider) Start(ctx context.Context, _ multicluster.Aware) error {
	p.mu.Lock()
	idle := p.controllers == 0
	p.mu.Unlock()
	if idle {
		p.opts.Log.Info("No controller reconciles this export's kinds; its workspaces are not engaged")
		<-ctx.Done()
		return nil
	}
	c, err := cache.New(p.opts.Config, cache.Options{
		Scheme: p.opts.Scheme,
		ByObject: map[client.Object]cache.ByObject{
			&apisv1alpha1.APIExportEndpointSlice{}: {Field: fields.OneTermEqualSelector("metadata.name", p.opts.EndpointSlice)},
		},
	})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &apisv1alpha1.APIExportEndpointSlice{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	follow := func(obj any) {
		if es, ok := obj.(*apisv1alpha1.APIExportEndpointSlice); ok {
			urls := make([]string, 0, len(es.Status.APIExportEndpoints))
			for _, e := range es.Status.APIExportEndpoints {
				urls = append(urls, e.URL)
			}
			if p.opts.OnEndpoints != nil {
				p.opts.OnEndpoints(urls)
			}
			p.syncShards(ctx, urls)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    follow,
		UpdateFunc: func(_, obj any) { follow(obj) },
		DeleteFunc: func(any) { p.syncShards(ctx, nil) },
	}); err != nil {
		return err
	}
	err = c.Start(ctx)
	// Stopping: the shards end with ctx; nothing is disengaged or logged as removed.
	return err
}

// syncShards serves exactly urls: new URLs get a shard, removed ones are stopped and their
// workspaces disengaged.
func (p *Provider) syncShards(ctx context.Context, urls []string) {
	p.mu.Lock()
	var stale []*shard
	for u, s := range p.shards {
		if !slices.Contains(urls, u) {
			stale = append(stale, s)
			delete(p.shards, u)
		}
	}
	var fresh []*shard
	for _, u := range urls {
		if _, ok := p.shards[u]; ok || ctx.Err() != nil {
			continue
		}
		s, err := p.newShard(u)
		if err != nil {
			p.opts.Log.Error(err, "Cannot serve an endpoint of the export", "url", u)
			continue
		}
		p.shards[u] = s
		fresh = append(fresh, s)
	}
	p.mu.Unlock()
	for _, s := range stale {
		p.opts.Log.Info("Endpoint removed from the export's endpoint slice; its workspaces are disengaged", "url", s.url)
		s.cancel()
		p.forget(s)
	}
	for _, s := range fresh {
		sctx, cancel := context.WithCancel(ctx)
		s.cancel = cancel
		go p.serve(sctx, s)
	}
}

// serve runs shard s until ctx ends; a shard that fails (kcp unreachable, discovery failing) is
// rebuilt after a backoff, its workspaces engaged again from its bindings.
func (p *Provider) serve(ctx context.Context, s *shard) {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 8, Cap: time.Minute}
	for {
		p.opts.Log.Info("Serving an endpoint of the export", "url", s.url)
		err := p.start(ctx, s)
		if ctx.Err() != nil {
			return
		}
		delay := backoff.Step()
		p.opts.Log.Error(err, "Endpoint of the export failed; retrying", "url", s.url, "after", delay.String())
		p.forget(s)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		next, err := p.newShard(s.url)
		if err != nil {
			continue
		}
		next.cancel = s.cancel
		p.mu.Lock()
		if p.shards[s.url] != s {
			p.mu.Unlock()
			return // removed from the slice meanwhile
		}
		p.shards[s.url] = next
		p.mu.Unlock()
		s = next
	}
}

// forget disengages the workspaces of shard s without telling OnDisengage: they are not
// unbound, only no longer watched; a rebuilt shard engages them again.
func (p *Provider) forget(s *shard) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for lc, at := range p.engaged {
		if at == s {
			delete(p.engaged, lc)
		}
	}
	engagedWorkspaces.WithLabelValues(p.opts.Name).Set(float64(len(p.engaged)))
}

func (p *Provider) engage(lc string, s *shard, binding client.Object) {
	p.mu.Lock()
	if _, ok := p.engaged[lc]; ok {
		// Every update of a bound workspace's binding lands here; nothing to do.
		p.mu.Unlock()
		return
	}
	p.engaged[lc] = s
	engagedWorkspaces.WithLabelValues(p.opts.Name).Set(float64(len(p.engaged)))
	waiting := p.pending[lc]
	delete(p.pending, lc)
	p.mu.Unlock()
	p.routeShard(s)
	for r, keys := range waiting {
		for key, opts := range keys {
			r.add(mcreconcile.Request{ClusterName: p.ClusterName(lc), Request: requestFor(key)}, opts)
		}
	}
	if p.opts.OnEngage != nil {
		p.opts.OnEngage(lc, binding)
	}
	p.mu.RLock()
	hooks := p.engageHooks
	p.mu.RUnlock()
	for _, h := range hooks {
		h(lc)
	}
}

// WhenEngaged tells fn every workspace engaged from now on, e.g. so a controller puts what every
// workspace must hold into a new one. fn must not block.
func (p *Provider) WhenEngaged(fn func(logicalCluster string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.engageHooks = append(p.engageHooks, fn)
}

// EngagedWorkspaces returns the logical clusters of the workspaces engaged now.
func (p *Provider) EngagedWorkspaces() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]string, 0, len(p.engaged))
	for lc := range p.engaged {
		out = append(out, lc)
	}
	return out
}

func (p *Provider) disengage(lc string, s *shard, binding client.Object) {
	p.mu.Lock()
	at, ok := p.engaged[lc]
	if ok && at == s {
		delete(p.engaged, lc)
	}
	delete(p.pending, lc)
	engagedWorkspaces.WithLabelValues(p.opts.Name).Set(float64(len(p.engaged)))
	p.mu.Unlock()
	if ok && at == s && p.opts.OnDisengage != nil {
		p.opts.OnDisengage(lc, binding)
	}
}

// Workspace returns engaged workspace name ("<provider>#<logical cluster>" or a bare logical
// cluster), or false.
func (p *Provider) Workspace(name multicluster.ClusterName) (Workspace, bool) {
	lc := workspaces.LogicalCluster(name)
	p.mu.RLock()
	s, ok := p.engaged[lc]
	p.mu.RUnlock()
	if !ok {
		return Workspace{}, false
	}
	return Workspace{LogicalCluster: lc, shard: s, provider: p}, true
}

// Engaged returns how many workspaces are engaged.
func (p *Provider) Engaged() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.engaged)
}

// Get implements multicluster.Provider with a view of the workspace on the shared clients; it is
// made per call. Its cache reads, but offers no informers: watch through NewController.
func (p *Provider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	ws, ok := p.Workspace(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", multicluster.ErrClusterNotFound, name)
	}
	return workspaceCluster{ws}, nil
}

// IndexField implements multicluster.Provider: the index is added to every shard's cache, now and
// later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	p.indexes = append(p.indexes, index{obj: obj, field: field, extract: extract})
	shards := make([]*shard, 0, len(p.shards))
	for _, s := range p.shards {
		shards = append(shards, s)
	}
	p.mu.Unlock()
	for _, s := range shards {
		if err := s.cache.IndexField(ctx, obj, field, extract); err != nil {
			return err
		}
	}
	return nil
}
