// Package target connects to a cluster a tenant pointed the platform at (a HostCluster's target):
// the clients every reconcile pass builds from the cluster's checked kubeconfig, each connection
// checked by the platform's dial guard (internal/netguard) and each answer read through the
// response caps (internal/readlimit).
package target

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/netguard"
	"github.com/kubeopera/kubeopera/internal/readlimit"
)

// scheme holds the kinds the platform reads and writes on targets.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := flux.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// mapper maps the kinds the platform touches on targets without discovery: a target is reached
// with a fresh client each pass, and discovery would cost a dozen requests every time.
var mapper = func() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Group == "" || gvk.Group == appsv1.GroupName || gvk.Group == "source.toolkit.fluxcd.io" || gvk.Group == "kustomize.toolkit.fluxcd.io" {
			scope := meta.RESTScopeNamespace
			if gvk.Group == "" && (gvk.Kind == "Namespace" || gvk.Kind == "Node" || gvk.Kind == "PersistentVolume") {
				scope = meta.RESTScopeRoot
			}
			m.Add(gvk, scope)
		}
	}
	return m
}()

// Target is one pass' connection to a target cluster, made from its stored kubeconfig.
type Target struct {
	// Config is the checked config the clients use; clients made from it later (Flux's install)
	// are guarded and capped the same way.
	Config *rest.Config
	// Client reads and writes the kinds of the scheme (core, apps, Flux's).
	Client client.Client
	// Clientset is the typed clientset (discovery, the service proxy).
	Clientset kubernetes.Interface
	// Server is the API server as the kubeconfig names it (for messages: never the address a
	// name resolved to).
	Server string
}

// New builds the clients of a target from a checked rest.Config (kubeconfig.ParseUntrusted or
// ParseEKS): every response they read is capped by limits, and every connection they make, and
// every one made from the Config they keep, is checked by guard.
func New(cfg *rest.Config, timeout time.Duration, guard *netguard.Guard, limits readlimit.Limits) (*Target, error) {
	cfg = rest.CopyConfig(cfg)
	readlimit.Apply(cfg, limits)
	cfg.Timeout = timeout
	cfg.QPS, cfg.Burst = 20, 40
	if err := guard.Apply(cfg); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("failed to build a client for the target: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build a clientset for the target: %w", err)
	}
	return &Target{Config: cfg, Client: c, Clientset: cs, Server: cfg.Host}, nil
}
