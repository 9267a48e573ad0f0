package helm

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/flowcontrol"
)

var _ genericclioptions.RESTClientGetter = (*restClientGetter)(nil)

// restClientGetter is a genericclioptions.RESTClientGetter backed by an
// in-memory *rest.Config instead of a kubeconfig file. Everything it hands
// out is created once per backend and shared by the getters of every
// namespace: the HTTP transport (so Helm's clients of every operation reuse
// the same connections), the memory-cached discovery client and the REST
// mapper.
type restClientGetter struct {
	cfg       *rest.Config // carries the shared transport; never its TLS or auth settings
	namespace string
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
}

// newRESTClientGetter returns a getter for cfg whose transport, discovery
// client and REST mapper are created once; use forNamespace to bind it to a
// namespace.
func newRESTClientGetter(cfg *rest.Config) (*restClientGetter, error) {
	// The transport carries TLS, authentication, impersonation and any
	// wrappers of cfg; the config handed to Helm only points at it, so every
	// client built from it shares one connection pool.
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create transport: %w", err)
	}
	// One rate limiter for every Helm operation: clients built from a config without one each
	// get their own, so concurrent installs would multiply the set QPS.
	limiter := cfg.RateLimiter
	if limiter == nil && cfg.QPS > 0 {
		burst := cfg.Burst
		if burst <= 0 {
			burst = int(cfg.QPS)
		}
		limiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, burst)
	}
	shared := &rest.Config{
		Host:           cfg.Host,
		APIPath:        cfg.APIPath,
		ContentConfig:  cfg.ContentConfig,
		UserAgent:      cfg.UserAgent,
		QPS:            cfg.QPS,
		Burst:          cfg.Burst,
		RateLimiter:    limiter,
		Timeout:        cfg.Timeout,
		WarningHandler: cfg.WarningHandler,
		Transport:      transport,
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(shared))
	if err != nil {
		return nil, fmt.Errorf("failed to create discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
	return &restClientGetter{cfg: shared, discovery: cached, mapper: mapper}, nil
}

// forNamespace returns a copy of g bound to namespace.
func (g *restClientGetter) forNamespace(namespace string) *restClientGetter {
	c := *g
	c.namespace = namespace
	return &c
}

// ToRESTConfig returns a copy of the shared config (same transport).
func (g *restClientGetter) ToRESTConfig() (*rest.Config, error) {
	return rest.CopyConfig(g.cfg), nil
}

// ToDiscoveryClient returns the shared memory-cached discovery client.
func (g *restClientGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

// ToRESTMapper returns the shared discovery-backed REST mapper.
func (g *restClientGetter) ToRESTMapper() (meta.RESTMapper, error) {
	return g.mapper, nil
}

// ToRawKubeConfigLoader returns a client config that only carries the
// namespace; Helm's kube client reads its default namespace from it.
func (g *restClientGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{
		Context: clientcmdapi.Context{Namespace: g.namespace},
	})
}
