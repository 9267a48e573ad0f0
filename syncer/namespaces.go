package syncer

import (
	"context"
	"errors"
	"fmt"

	"github.com/kubeopera/kubeopera/workspaces"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CollisionError says a backend namespace exists but belongs to another logical cluster (or to no
// workspace at all). Such a namespace is never reused and nothing is written into it.
type CollisionError struct {
	Namespace      string
	LogicalCluster string
	Owner          string // the logical cluster named by the namespace's annotation, "" if none
}

func (e *CollisionError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("backend namespace %s already exists and is not managed for this workspace; refusing to reuse it", e.Namespace)
	}
	return fmt.Sprintf("backend namespace %s belongs to another workspace (fingerprint collision); refusing to reuse it", e.Namespace)
}

// OwnerAnnotation names the one object a backend namespace or Secret is exclusively for, e.g.
// "Tenant default/alice-default". Shared namespaces (kcp-<fp>) carry none.
const OwnerAnnotation = "kubeopera.io/owner"

// ClaimedError says a backend namespace of this workspace is already claimed by another object of
// the same workspace (e.g. two Tenants with the same tenantName). Nothing is written.
type ClaimedError struct {
	Namespace string
	Owner     string
}

func (e *ClaimedError) Error() string {
	return fmt.Sprintf("backend namespace %s is already used by %s in this workspace", e.Namespace, e.Owner)
}

// IsClaimed reports whether err is a ClaimedError.
func IsClaimed(err error) bool {
	var ce *ClaimedError
	return errors.As(err, &ce)
}

// deletingError says a backend namespace is still being deleted (a Tenant of the same name that
// was just deleted): retry later. Its text is the platform's own and names only the workspace's
// own namespace, so it is what the tenant reads (PublicMessage, see reconcile.PublicError).
type deletingError struct{ namespace string }

func (e *deletingError) Error() string {
	return fmt.Sprintf("backend namespace %s is being deleted; waiting for it to go", e.namespace)
}
func (e *deletingError) PublicMessage() string { return e.Error() }

func namespaceDeleting(name string) error { return &deletingError{namespace: name} }

// IsCollision reports whether err is a CollisionError.
func IsCollision(err error) bool {
	var ce *CollisionError
	return errors.As(err, &ce)
}

// Backend reads and writes backend namespaces. Reader should be uncached (an API reader): a
// namespace created by someone else must be seen before anything is written.
type Backend struct {
	Client client.Client
	Reader client.Reader
	// Namespaces, if set, reads the metadata (metav1.PartialObjectMetadata) of the backend
	// namespaces labelled with a workspace fingerprint from a cache, so a pass does not ask the
	// API server for namespaces that exist and are its own (EnsureNamespaces). A namespace it does
	// not hold is created, and one that then turns out to exist (AlreadyExists: not the
	// manager's, or new) is read uncached, so a foreign one is still refused. nil: Reader.
	Namespaces client.Reader
	// DeferAccess: a RoleBinding just made for the manager in a namespace of its own that is not
	// in effect yet is an AccessPendingError, to look at again later, instead of being waited
	// for in line (the reconcilers set it: they requeue rather than hold a worker).
	DeferAccess bool
}

// EnsureNamespace creates backend namespace name for logicalCluster, labelled with the workspace
// fingerprint and its Pod Security labels (PodSecurityLabels), and annotated with the full
// logical cluster name and, when owner is set, with the one object it is for. An existing
// namespace is reused only when its annotation names the same logical cluster (else a
// CollisionError) and the same owner (else a ClaimedError); nothing is written otherwise. A
// namespace being deleted is reported as an error to retry later. An existing namespace of its
// own without its Pod Security labels (made before namespaces carried them) gets them. In a
// namespace of its own it binds NamespaceRole to the manager's identity (see ensureAccess).
func (b Backend) EnsureNamespace(ctx context.Context, logicalCluster, name, owner string) error {
	ns := &corev1.Namespace{}
	err := b.Reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		if err := b.Client.Create(ctx, newNamespace(logicalCluster, name, owner)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Lost a race; look again so a foreign namespace is still refused.
				return b.EnsureNamespace(ctx, logicalCluster, name, owner)
			}
			return fmt.Errorf("failed to create backend namespace %s: %w", name, err)
		}
		return b.ensureAccess(ctx, name, true)
	case err != nil:
		return fmt.Errorf("failed to get backend namespace %s: %w", name, err)
	}
	if lc := ns.Annotations[workspaces.LogicalClusterAnnotation]; lc != logicalCluster {
		return &CollisionError{Namespace: name, LogicalCluster: logicalCluster, Owner: lc}
	}
	if current := ns.Annotations[OwnerAnnotation]; current != owner {
		return &ClaimedError{Namespace: name, Owner: current}
	}
	if ns.DeletionTimestamp != nil {
		return namespaceDeleting(name)
	}
	if err := b.ensurePodSecurity(ctx, logicalCluster, ns); err != nil {
		return err
	}
	return b.ensureAccess(ctx, name, false)
}

// newNamespace is backend namespace name of logicalCluster, claimed by owner ("": shared), with
// its fingerprint and Pod Security labels.
func newNamespace(logicalCluster, name, owner string) *corev1.Namespace {
	labels := PodSecurityLabels(logicalCluster, name)
	labels[workspaces.FingerprintLabel] = workspaces.Fingerprint(logicalCluster)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      labels,
		Annotations: map[string]string{workspaces.LogicalClusterAnnotation: logicalCluster},
	}}
	if owner != "" {
		ns.Annotations[OwnerAnnotation] = owner
	}
	return ns
}

// OwnedBy reports whether a backend object (namespace, stored Secret) was made for logicalCluster
// and, when owner is set, for owner.
func OwnedBy(obj metav1.Object, logicalCluster, owner string) bool {
	a := obj.GetAnnotations()
	return a[workspaces.LogicalClusterAnnotation] == logicalCluster && (owner == "" || a[OwnerAnnotation] == owner)
}

// Owns reports whether backend namespace name exists and belongs to logicalCluster and owner.
func (b Backend) Owns(ctx context.Context, logicalCluster, name, owner string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := b.Reader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return OwnedBy(ns, logicalCluster, owner), nil
}

// DeleteNamespace deletes backend namespace name when it belongs to logicalCluster (and, when owner
// is set, to owner). It returns true once the namespace is gone or is not ours to delete. A
// namespace of another logical cluster or owner is never touched.
func (b Backend) DeleteNamespace(ctx context.Context, logicalCluster, name, owner string) (gone bool, err error) {
	ns := &corev1.Namespace{}
	if err := b.Reader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("failed to get backend namespace %s: %w", name, err)
	}
	if !OwnedBy(ns, logicalCluster, owner) {
		// Not ours: nothing to delete on our behalf.
		return true, nil
	}
	if ns.DeletionTimestamp == nil {
		if err := b.Client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("failed to delete backend namespace %s: %w", name, err)
		}
	}
	return false, nil
}

// WorkspaceNamespaces lists the backend namespaces of logicalCluster (by fingerprint label, checked
// against the annotation).
func (b Backend) WorkspaceNamespaces(ctx context.Context, logicalCluster string) ([]corev1.Namespace, error) {
	list := &corev1.NamespaceList{}
	if err := b.Reader.List(ctx, list, client.MatchingLabels{workspaces.FingerprintLabel: workspaces.Fingerprint(logicalCluster)}); err != nil {
		return nil, fmt.Errorf("failed to list backend namespaces of %s: %w", logicalCluster, err)
	}
	out := list.Items[:0]
	for _, ns := range list.Items {
		if ns.Annotations[workspaces.LogicalClusterAnnotation] == logicalCluster {
			out = append(out, ns)
		}
	}
	return out, nil
}
