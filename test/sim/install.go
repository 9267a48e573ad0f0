package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/manifests"
)

// Install creates the objects of the repository's files (paths below root, e.g.
// "config/scaffolder/rbac.yaml") on the cluster of cfg (an admin's), as an admin installs a
// component's namespace and identity; objects already there (an earlier Install, or
// `kubectl apply -k config`) are kept.
func Install(ctx context.Context, cfg *rest.Config, root string, files ...string) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return err
		}
		objs, err := manifests.Decode(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: %s %s: %w", f, o.GetKind(), o.GetName(), err)
			}
		}
	}
	return nil
}
