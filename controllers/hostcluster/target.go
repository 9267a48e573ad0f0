package hostcluster

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
)

// targetScheme holds the kinds the controller reads and writes on targets.
var targetScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := flux.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// targetMapper maps the kinds the controller touches on targets without discovery: a target is
// reached with a fresh client each pass, and discovery would cost a dozen requests every time.
var targetMapper = func() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range targetScheme.AllKnownTypes() {
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

// target is one pass' connection to a target cluster, made from its stored kubeconfig.
type target struct {
	config    *rest.Config
	client    client.Client
	clientset kubernetes.Interface
	server    string
}

// newTarget builds the clients of a target from a checked rest.Config (ParseUntrusted); every
// connection they make, and every one made from the config they keep (Flux's install), is
// checked by guard.
func newTarget(cfg *rest.Config, timeout time.Duration, guard *netguard.Guard) (*target, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	cfg.QPS, cfg.Burst = 20, 40
	if err := guard.Apply(cfg); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: targetScheme, Mapper: targetMapper})
	if err != nil {
		return nil, fmt.Errorf("failed to build a client for the target: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build a clientset for the target: %w", err)
	}
	return &target{config: cfg, client: c, clientset: cs, server: cfg.Host}, nil
}
