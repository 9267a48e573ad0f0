package syncer

import (
	"context"
	"fmt"

	"github.com/kubeopera/kubeopera/workspaces"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespaceClaim is one backend namespace an object needs: its name and, for a namespace that is
// exclusively the object's, the owner (see OwnerAnnotation); "" for a shared one (kcp-<fp>).
type NamespaceClaim struct {
	Name  string
	Owner string
}

// EnsureNamespaces makes every claimed namespace exist for logicalCluster. It checks every
// existing one first and creates none unless all agree, so a collision on any of them
// (CollisionError, ClaimedError) leaves the backend exactly as it was. It then creates the
// missing namespaces (with their Pod Security labels) and labels the existing ones that lack them
// (ensurePodSecurity), all at once, before binding the manager's access in each (ensureAccess),
// so the last namespace exists one round trip after the check rather than after every earlier
// one's binding.
func (b Backend) EnsureNamespaces(ctx context.Context, logicalCluster string, claims ...NamespaceClaim) error {
	// The checks are independent: one round trip for all of them.
	existing := make([]*corev1.Namespace, len(claims))
	var checks errgroup.Group
	for i, c := range claims {
		checks.Go(func() error {
			ns, err := b.checkNamespace(ctx, logicalCluster, c)
			existing[i] = ns
			return err
		})
	}
	if err := checks.Wait(); err != nil {
		return err
	}
	for i, c := range claims {
		if ns := existing[i]; ns != nil && ns.DeletionTimestamp != nil {
			return namespaceDeleting(c.Name)
		}
	}
	// Every claim agrees: the namespaces are made (or labelled) at once, one round trip.
	created := make([]bool, len(claims))
	var makes errgroup.Group
	for i, c := range claims {
		makes.Go(func() error {
			if ns := existing[i]; ns != nil {
				return b.ensurePodSecurity(ctx, logicalCluster, ns)
			}
			err := b.Client.Create(ctx, newNamespace(logicalCluster, c.Name, c.Owner))
			switch {
			case apierrors.IsAlreadyExists(err):
				// Lost a race; look again so a foreign namespace is still refused.
				return b.EnsureNamespace(ctx, logicalCluster, c.Name, c.Owner)
			case err != nil:
				return fmt.Errorf("failed to create backend namespace %s: %w", c.Name, err)
			}
			created[i] = true
			return nil
		})
	}
	if err := makes.Wait(); err != nil {
		return err
	}
	var access errgroup.Group
	for i, c := range claims {
		access.Go(func() error { return b.ensureAccess(ctx, c.Name, created[i]) })
	}
	return access.Wait()
}

// checkNamespace returns c's namespace, nil when it is missing, or an error when it may not be
// reused as claimed.
func (b Backend) checkNamespace(ctx context.Context, logicalCluster string, c NamespaceClaim) (*corev1.Namespace, error) {
	ns, err := b.getNamespace(ctx, c.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get backend namespace %s: %w", c.Name, err)
	}
	if lc := ns.Annotations[workspaces.LogicalClusterAnnotation]; lc != logicalCluster {
		return nil, &CollisionError{Namespace: c.Name, LogicalCluster: logicalCluster, Owner: lc}
	}
	if current := ns.Annotations[OwnerAnnotation]; current != c.Owner {
		return nil, &ClaimedError{Namespace: c.Name, Owner: current}
	}
	return ns, nil
}

// getNamespace reads namespace name from the cache of the manager's namespaces (Namespaces,
// metadata only: all the checks read) or, without one, from Reader.
func (b Backend) getNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if b.Namespaces == nil {
		ns := &corev1.Namespace{}
		return ns, b.Reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	meta := NamespaceMetadata()
	if err := b.Namespaces.Get(ctx, client.ObjectKey{Name: name}, meta); err != nil {
		return nil, err
	}
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: *meta.ObjectMeta.DeepCopy()}, nil
}

// NamespaceMetadata is an empty namespace's metadata, the object Backend.Namespaces is read
// (and its cache set up) with.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
}
