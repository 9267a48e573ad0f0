package helm

import (
	"fmt"
	"sync"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/validation"
)

var _ helmkube.Factory = (*sharedFactory)(nil)

// sharedFactory is Helm's helmkube.Factory for every operation: kubectl's factory (resource builders,
// validation) on the shared getter, with one clientset, one dynamic client and one validator per
// directive instead of new ones at each call. Operations name their namespace on their
// kube.Client, never through it.
//
// kubectl's Validator builds, at each call, a verifier of the server's field-validation support
// that reads and decodes the OpenAPI v3 document of every group-version it checks; Helm asks for
// one at every install and upgrade (kube.Client.Build), which made that decoding most of an
// install's CPU. The verifier caches its answers per kind (cachingVerifier) and is safe for
// concurrent use, so one per directive serves every operation.
type sharedFactory struct {
	cmdutil.Factory
	clientset *kubernetes.Clientset
	dynamic   dynamic.Interface

	mu         sync.Mutex
	validators map[string]validation.Schema // by validation directive
}

func newSharedFactory(g *restClientGetter) (*sharedFactory, error) {
	f := cmdutil.NewFactory(g)
	cs, err := f.KubernetesClientSet()
	if err != nil {
		return nil, fmt.Errorf("failed to create the clientset: %w", err)
	}
	dc, err := f.DynamicClient()
	if err != nil {
		return nil, fmt.Errorf("failed to create the dynamic client: %w", err)
	}
	return &sharedFactory{Factory: f, clientset: cs, dynamic: dc}, nil
}

func (f *sharedFactory) KubernetesClientSet() (*kubernetes.Clientset, error) { return f.clientset, nil }
func (f *sharedFactory) DynamicClient() (dynamic.Interface, error)           { return f.dynamic, nil }
func (f *sharedFactory) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return f.Factory.ToRawKubeConfigLoader()
}
func (f *sharedFactory) NewBuilder() *resource.Builder { return f.Factory.NewBuilder() }
func (f *sharedFactory) Validator(directive string) (validation.Schema, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.validators[directive]; ok {
		return v, nil
	}
	v, err := f.Factory.Validator(directive)
	if err != nil {
		return nil, err
	}
	if f.validators == nil {
		f.validators = map[string]validation.Schema{}
	}
	f.validators[directive] = v
	return v, nil
}
