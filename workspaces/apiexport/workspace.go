package apiexport

import (
	"context"
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// Workspace is an engaged workspace: a small value made per request over its shard's shared
// cache, writer and the provider's event sink.
type Workspace struct {
	// LogicalCluster is the workspace's logical cluster name.
	LogicalCluster string
	shard          *shard
	provider       *Provider
}

// Client reads from the shard's wildcard cache and writes through its shared writer.
func (w Workspace) Client() client.Client {
	return scopedClient{lc: w.LogicalCluster, w: w.shard.writer, reader: cacheReader{lc: w.LogicalCluster, cache: w.shard.cache}, writes: &w.provider.writes}
}

// Direct reads and writes through the shard's shared writer, uncached (Secrets, which are never
// cached).
func (w Workspace) Direct() client.Client {
	return scopedClient{lc: w.LogicalCluster, w: w.shard.writer, writes: &w.provider.writes}
}

// Recorder writes events as controller into the workspace through the provider's sink.
func (w Workspace) Recorder(controller string) events.EventRecorder {
	return recorder{ws: w, controller: controller}
}

// Config is a config of the workspace itself (its virtual workspace URL).
func (w Workspace) Config() *rest.Config {
	cfg := rest.CopyConfig(w.shard.config)
	cfg.Host = w.shard.config.Host + "/clusters/" + w.LogicalCluster
	return cfg
}

// workspaceCluster is the cluster.Cluster view of a Workspace that multicluster-runtime's
// GetCluster returns.
type workspaceCluster struct{ ws Workspace }

var _ cluster.Cluster = workspaceCluster{}

func (c workspaceCluster) GetHTTPClient() *http.Client          { return c.ws.shard.plain }
func (c workspaceCluster) GetConfig() *rest.Config              { return c.ws.Config() }
func (c workspaceCluster) GetScheme() *runtime.Scheme           { return c.ws.shard.writer.Scheme() }
func (c workspaceCluster) GetClient() client.Client             { return c.ws.Client() }
func (c workspaceCluster) GetAPIReader() client.Reader          { return c.ws.Direct() }
func (c workspaceCluster) GetRESTMapper() meta.RESTMapper       { return c.ws.shard.writer.RESTMapper() }
func (c workspaceCluster) GetFieldIndexer() client.FieldIndexer { return c.ws.provider }
func (c workspaceCluster) GetCache() cache.Cache                { return scopedCache{c.ws} }
func (c workspaceCluster) GetEventRecorder(name string) events.EventRecorder {
	return c.ws.Recorder(name)
}

// GetEventRecorderFor is the deprecated recorder API; events go through the sink all the same.
func (c workspaceCluster) GetEventRecorderFor(name string) record.EventRecorder {
	return legacyRecorder{c.ws.Recorder(name)}
}
func (c workspaceCluster) Start(ctx context.Context) error { <-ctx.Done(); return nil }

// errNoInformers: a workspace has no informers of its own; one handler per informer serves all.
var errNoInformers = errors.New("fleet: a workspace has no informers of its own; register a controller with apiexport.NewController")

// scopedCache reads the workspace's objects from the shard cache; it offers no informers.
type scopedCache struct{ ws Workspace }

var _ cache.Cache = scopedCache{}

func (c scopedCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return cacheReader{lc: c.ws.LogicalCluster, cache: c.ws.shard.cache}.Get(ctx, key, obj, opts...)
}
func (c scopedCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return cacheReader{lc: c.ws.LogicalCluster, cache: c.ws.shard.cache}.List(ctx, list, opts...)
}
func (c scopedCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return nil, errNoInformers
}
func (c scopedCache) GetInformerForKind(context.Context, schema.GroupVersionKind, ...cache.InformerGetOption) (cache.Informer, error) {
	return nil, errNoInformers
}
func (c scopedCache) RemoveInformer(context.Context, client.Object) error { return errNoInformers }
func (c scopedCache) Start(context.Context) error                         { return errNoInformers }
func (c scopedCache) WaitForCacheSync(ctx context.Context) bool {
	return c.ws.shard.cache.WaitForCacheSync(ctx)
}
func (c scopedCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return c.ws.provider.IndexField(ctx, obj, field, extract)
}

// legacyRecorder adapts the events API to record.EventRecorder.
type legacyRecorder struct{ r events.EventRecorder }

func (l legacyRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	l.r.Eventf(obj, nil, eventtype, reason, reason, "%s", message)
}
func (l legacyRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	l.r.Eventf(obj, nil, eventtype, reason, reason, format, args...)
}
func (l legacyRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	l.r.Eventf(obj, nil, eventtype, reason, reason, format, args...)
}

// Read reads the object of req into obj from its workspace's cache and returns the workspace.
// found is false, with no error, when the workspace is no longer engaged (unbound or deleted
// since the request was queued: its backend state is the terminator's and the orphan sweep's
// business) or the object is gone: the request is then dropped.
func (p *Provider) Read(ctx context.Context, req mcreconcile.Request, obj client.Object) (ws Workspace, found bool, err error) {
	ws, ok := p.Workspace(req.ClusterName)
	if !ok {
		return Workspace{}, false, nil
	}
	if err := ws.Client().Get(ctx, req.NamespacedName, obj); err != nil {
		return Workspace{}, false, client.IgnoreNotFound(err)
	}
	if p.writes.replaced(obj) {
		// The cache has not seen the manager's last write to it yet: read what the write made,
		// so this pass does not redo the last one's work or lose its status patch to it.
		if err := ws.Direct().Get(ctx, req.NamespacedName, obj); err != nil {
			return Workspace{}, false, client.IgnoreNotFound(err)
		}
	}
	return ws, true, nil
}
