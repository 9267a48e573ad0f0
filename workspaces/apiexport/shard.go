package apiexport

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	kcpcache "github.com/kcp-dev/apimachinery/v2/pkg/cache"
	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	conditionsv1alpha1 "github.com/kcp-dev/sdk/apis/third_party/conditions/apis/conditions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	wildcard "github.com/kcp-dev/multicluster-provider/pkg/cache"
	"github.com/kcp-dev/multicluster-provider/pkg/provider"
)

// DefaultQPS and DefaultBurst bound a shard's requests when the config sets no QPS.
const (
	DefaultQPS   = 50
	DefaultBurst = 100
)

// shard is one endpoint URL of the export (one kcp shard's virtual workspace): one wildcard cache,
// one writer client and one handler per informer for every workspace it serves.
type shard struct {
	url    string
	cache  wildcard.WildcardCache
	writer client.Client
	// plain is the shard's HTTP client without routing, for callers that build their own client
	// from a workspace's config.
	plain  *http.Client
	config *rest.Config
	cancel context.CancelFunc
	// ctx is the shard's life (set by start); routed says the controllers' kinds are watched
	// (guarded by Provider.mu). The kinds are watched from the first engaged workspace on: before
	// any workspace binds the export, the virtual workspace does not serve them, and a watch
	// would only log errors.
	ctx    context.Context
	routed bool
}

// newShard builds the shard of virtual workspace URL vw. Nothing runs until start.
func (p *Provider) newShard(vw string) (*shard, error) {
	u, err := url.Parse(vw)
	if err != nil {
		return nil, fmt.Errorf("invalid endpoint URL %q: %w", vw, err)
	}
	cfg := rest.CopyConfig(p.opts.Config)
	cfg.Host = strings.TrimSuffix(vw, "/")
	if cfg.QPS <= 0 {
		cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	}
	if cfg.Burst <= 0 {
		cfg.Burst = int(cfg.QPS)
	}
	// One limiter for every workspace of the shard (rest clients made without one each get their
	// own, per kind).
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	plain, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	all := rest.CopyConfig(cfg)
	all.Host = cfg.Host + "/clusters/*"
	mapper, err := apiutil.NewDynamicRESTMapper(all, plain)
	if err != nil {
		return nil, err
	}
	wc, err := wildcard.NewWildcardCache(cfg, cache.Options{
		Scheme:           p.opts.Scheme,
		HTTPClient:       plain,
		Mapper:           mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         map[client.Object]cache.ByObject{&apisv1alpha1.APIBinding{}: {Transform: trimBinding}},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the wildcard cache of %s: %w", vw, err)
	}
	routed := &http.Client{Transport: router{base: strings.TrimSuffix(u.Path, "/"), next: plain.Transport}, Timeout: plain.Timeout}
	writer, err := client.New(cfg, client.Options{Scheme: p.opts.Scheme, HTTPClient: routed, Mapper: mapper})
	if err != nil {
		return nil, err
	}
	return &shard{url: vw, cache: wc, writer: writer, plain: plain, config: cfg}, nil
}

// trimBinding keeps of an APIBinding what the provider reads: its name, its logical cluster
// (annotation kcp.io/cluster), its deletion and whether it is Ready (the Ready condition's type
// and status). Its bound resources with their storage versions, its permission claims, its other
// conditions and their messages are most of its size, and every workspace has one binding per
// export.
func trimBinding(obj any) (any, error) {
	b, ok := obj.(*apisv1alpha1.APIBinding)
	if !ok {
		return obj, nil
	}
	out := &apisv1alpha1.APIBinding{TypeMeta: b.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion, Generation: b.Generation,
		DeletionTimestamp: b.DeletionTimestamp,
	}}
	if lc, ok := b.Annotations[logicalcluster.AnnotationKey]; ok {
		out.Annotations = map[string]string{logicalcluster.AnnotationKey: lc}
	}
	out.Status.Phase = b.Status.Phase
	for _, c := range b.Status.Conditions {
		if c.Type == "Ready" {
			out.Status.Conditions = conditionsv1alpha1.Conditions{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// start watches the shard's bindings and every routed kind, and runs its cache until ctx ends.
func (p *Provider) start(ctx context.Context, s *shard) error {
	p.mu.Lock()
	s.ctx = ctx
	p.mu.Unlock()
	inf, err := s.cache.GetInformer(ctx, &apisv1alpha1.APIBinding{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("failed to watch APIBindings at %s: %w", s.url, err)
	}
	shInf, _, _, err := s.cache.GetSharedInformer(&apisv1alpha1.APIBinding{})
	if err != nil {
		return err
	}
	ready := provider.ConditionReadyFunc("Ready")
	bound := func(obj any) {
		b, ok := obj.(client.Object)
		if !ok {
			return
		}
		if ok, err := ready(b); err != nil || !ok {
			return
		}
		p.engage(logicalcluster.From(b).String(), s, b)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    bound,
		UpdateFunc: func(_, obj any) { bound(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			b, ok := obj.(client.Object)
			if !ok {
				return
			}
			lc := logicalcluster.From(b)
			// Disengaged once the workspace has no binding to the export left on this shard.
			if keys, err := shInf.GetIndexer().IndexKeys(kcpcache.ClusterIndexName, wildcard.ClusterIndexKey(lc)); err == nil && len(keys) == 0 {
				p.disengage(lc.String(), s, b)
			}
		},
	}); err != nil {
		return err
	}
	p.mu.Lock()
	indexes := append([]index(nil), p.indexes...)
	p.mu.Unlock()
	for _, i := range indexes {
		if err := s.cache.IndexField(ctx, i.obj, i.field, i.extract); err != nil {
			return err
		}
	}
	return s.cache.Start(ctx)
}

// routeShard watches the controllers' kinds in shard s, once, when its first workspace is engaged.
func (p *Provider) routeShard(s *shard) {
	p.mu.Lock()
	if s.routed || s.ctx == nil {
		p.mu.Unlock()
		return
	}
	s.routed = true
	routes := append([]*route(nil), p.routes...)
	ctx := s.ctx
	p.mu.Unlock()
	for _, r := range routes {
		if err := p.watch(ctx, s, r); err != nil {
			p.opts.Log.Error(err, "Cannot watch a kind of the export", "url", s.url)
		}
	}
}
