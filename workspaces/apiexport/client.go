package apiexport

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	kcpcache "github.com/kcp-dev/apimachinery/v2/pkg/cache"
	"github.com/kcp-dev/logicalcluster/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpcache "github.com/kcp-dev/multicluster-provider/pkg/cache"
)

type clusterKey struct{}

// WithCluster returns ctx naming the logical cluster a shard's writer sends requests to.
func WithCluster(ctx context.Context, logicalCluster string) context.Context {
	return context.WithValue(ctx, clusterKey{}, logicalCluster)
}

// ClusterFrom returns the logical cluster of ctx, or "".
func ClusterFrom(ctx context.Context) string {
	lc, _ := ctx.Value(clusterKey{}).(string)
	return lc
}

// router sends every request of the shared writer to /clusters/<logical cluster of its context>
// below the virtual workspace's base path: one HTTP client, rate limiter and REST mapper for every
// workspace of a shard instead of one each. A request without a cluster is refused, never sent to
// the wildcard endpoint.
type router struct {
	base string // the virtual workspace URL's path, e.g. /services/apiexport/root:kubeopera/kubeopera.io
	next http.RoundTripper
}

func (r router) RoundTrip(req *http.Request) (*http.Response, error) {
	lc := ClusterFrom(req.Context())
	if lc == "" {
		return nil, fmt.Errorf("fleet: request %s %s has no workspace in its context", req.Method, req.URL.Path)
	}
	rest, ok := strings.CutPrefix(req.URL.Path, r.base)
	if !ok {
		return nil, fmt.Errorf("fleet: request path %s is not below %s", req.URL.Path, r.base)
	}
	out := req.Clone(req.Context())
	out.URL.Path = r.base + "/clusters/" + lc + rest
	out.URL.RawPath = ""
	return r.next.RoundTrip(out)
}

// scopedClient is one workspace's view of a shard's shared writer (and, when reader is set, of
// the shard's wildcard cache). It is a small value made per reconcile, never kept per workspace.
type scopedClient struct {
	lc     string
	reader client.Reader // nil: reads go to the API server
	w      client.Client
	writes *ownWrites // the provider's record of its own writes (ownwrites.go)
}

var _ client.Client = scopedClient{}

func (c scopedClient) in(ctx context.Context) context.Context { return WithCluster(ctx, c.lc) }

func (c scopedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c.reader != nil {
		return c.reader.Get(ctx, key, obj, opts...)
	}
	return c.w.Get(c.in(ctx), key, obj, opts...)
}

func (c scopedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if c.reader != nil {
		return c.reader.List(ctx, list, opts...)
	}
	return c.w.List(c.in(ctx), list, opts...)
}

func (c scopedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.w.Apply(c.in(ctx), obj, opts...)
}

func (c scopedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.w.Create(c.in(ctx), obj, opts...)
}

func (c scopedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.w.Delete(c.in(ctx), obj, opts...)
}

func (c scopedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	before := obj.GetResourceVersion()
	if err := c.w.Update(c.in(ctx), obj, opts...); err != nil {
		return err
	}
	c.writes.record(obj, before)
	return nil
}

func (c scopedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	before := obj.GetResourceVersion()
	if err := c.w.Patch(c.in(ctx), obj, patch, opts...); err != nil {
		return err
	}
	c.writes.record(obj, before)
	return nil
}

func (c scopedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.w.DeleteAllOf(c.in(ctx), obj, opts...)
}

func (c scopedClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c scopedClient) SubResource(subResource string) client.SubResourceClient {
	return scopedSubResource{lc: c.lc, c: c.w.SubResource(subResource), writes: c.writes}
}

func (c scopedClient) Scheme() *runtime.Scheme        { return c.w.Scheme() }
func (c scopedClient) RESTMapper() apimeta.RESTMapper { return c.w.RESTMapper() }
func (c scopedClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return c.w.GroupVersionKindFor(obj)
}
func (c scopedClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	return c.w.IsObjectNamespaced(obj)
}

type scopedSubResource struct {
	lc     string
	c      client.SubResourceClient
	writes *ownWrites
}

func (s scopedSubResource) Get(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceGetOption) error {
	return s.c.Get(WithCluster(ctx, s.lc), obj, sub, opts...)
}

func (s scopedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return s.c.Create(WithCluster(ctx, s.lc), obj, sub, opts...)
}

func (s scopedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	before := obj.GetResourceVersion()
	if err := s.c.Update(WithCluster(ctx, s.lc), obj, opts...); err != nil {
		return err
	}
	s.writes.record(obj, before)
	return nil
}

func (s scopedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	before := obj.GetResourceVersion()
	if err := s.c.Patch(WithCluster(ctx, s.lc), obj, patch, opts...); err != nil {
		return err
	}
	s.writes.record(obj, before)
	return nil
}

func (s scopedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return s.c.Apply(WithCluster(ctx, s.lc), obj, opts...)
}

// cacheReader reads one workspace's objects from a shard's wildcard cache, through the cluster
// indexes multicluster-provider's wildcard cache adds to every informer. Reading a kind starts its
// informer (for every workspace) if it is not running yet, as controller-runtime's cache does.
type cacheReader struct {
	lc     string
	cache  mcpcache.WildcardCache
	scheme *runtime.Scheme
}

func (r cacheReader) Get(_ context.Context, key client.ObjectKey, out client.Object, _ ...client.GetOption) error {
	inf, gvk, scope, err := r.cache.GetSharedInformer(out)
	if err != nil {
		return err
	}
	if scope == apimeta.RESTScopeNameRoot {
		key.Namespace = ""
	}
	item, exists, err := inf.GetIndexer().GetByKey(kcpcache.ToClusterAwareKey(r.lc, key.Namespace, key.Name))
	if err != nil {
		return err
	}
	if !exists {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	}
	obj, ok := item.(runtime.Object)
	if !ok {
		return fmt.Errorf("cache contained %T, which is not an Object", item)
	}
	return copyInto(obj.DeepCopyObject(), out, gvk)
}

func (r cacheReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.FieldSelector != nil || lo.Continue != "" {
		return fmt.Errorf("fleet: the cache lists by namespace and labels only")
	}
	inf, gvk, _, err := r.cache.GetSharedInformer(list)
	if err != nil {
		return err
	}
	var items []any
	if lo.Namespace != "" {
		items, err = inf.GetIndexer().ByIndex(kcpcache.ClusterAndNamespaceIndexName, mcpcache.ClusterAndNamespaceIndexKey(logicalcluster.Name(r.lc), lo.Namespace))
	} else {
		items, err = inf.GetIndexer().ByIndex(kcpcache.ClusterIndexName, mcpcache.ClusterIndexKey(logicalcluster.Name(r.lc)))
	}
	if err != nil {
		return err
	}
	out := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return fmt.Errorf("cache contained %T, which is not an Object", item)
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		c := obj.DeepCopyObject()
		c.GetObjectKind().SetGroupVersionKind(gvk)
		out = append(out, c)
	}
	return apimeta.SetList(list, out)
}

// copyInto sets *out to *obj, as controller-runtime's cache reader does.
func copyInto(obj runtime.Object, out client.Object, gvk schema.GroupVersionKind) error {
	outVal, objVal := reflect.ValueOf(out), reflect.ValueOf(obj)
	if !objVal.Type().AssignableTo(outVal.Type()) {
		return fmt.Errorf("cache had type %s, but %s was asked for", objVal.Type(), outVal.Type())
	}
	reflect.Indirect(outVal).Set(reflect.Indirect(objVal))
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}
