package flux

import (
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AddToScheme adds the Flux types this package reads and writes (source.toolkit.fluxcd.io/v1
// GitRepository, kustomize.toolkit.fluxcd.io/v1 Kustomization) to s.
func AddToScheme(s *runtime.Scheme) error {
	if err := sourcev1.AddToScheme(s); err != nil {
		return err
	}
	return kustomizev1.AddToScheme(s)
}
