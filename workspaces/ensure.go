package workspaces

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespaceClaim is one backend namespace an object needs: its name and, for a namespace that is
// exclusively the object's, the owner (see OwnerAnnotation); "" for a shared one (kcp-<fp>).
type NamespaceClaim struct {
	Name  string
	Owner string
}

// EnsureNamespaces makes every claimed namespace exist for logicalCluster, in order. It checks
// every existing one first and creates none unless all agree, so a collision on any of them
// (CollisionError, ClaimedError) leaves the backend exactly as it was.
func (b Backend) EnsureNamespaces(ctx context.Context, logicalCluster string, claims ...NamespaceClaim) error {
	for _, c := range claims {
		if err := b.checkNamespace(ctx, logicalCluster, c); err != nil {
			return err
		}
	}
	for _, c := range claims {
		if err := b.EnsureNamespace(ctx, logicalCluster, c.Name, c.Owner); err != nil {
			return err
		}
	}
	return nil
}

// checkNamespace returns nil when c's namespace is missing or may be reused as claimed.
func (b Backend) checkNamespace(ctx context.Context, logicalCluster string, c NamespaceClaim) error {
	ns := &corev1.Namespace{}
	err := b.Reader.Get(ctx, client.ObjectKey{Name: c.Name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("failed to get backend namespace %s: %w", c.Name, err)
	}
	if lc := ns.Annotations[LogicalClusterAnnotation]; lc != logicalCluster {
		return &CollisionError{Namespace: c.Name, LogicalCluster: logicalCluster, Owner: lc}
	}
	if current := ns.Annotations[OwnerAnnotation]; current != c.Owner {
		return &ClaimedError{Namespace: c.Name, Owner: current}
	}
	return nil
}
