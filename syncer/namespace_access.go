package syncer

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// NamespaceRole is the ClusterRole holding what the manager does inside one backend namespace
	// (config/rbac/tenant-namespace.yaml). It is never bound cluster-wide: EnsureNamespace binds it
	// to the manager's own identity in each backend namespace, with RoleBinding NamespaceRoleBinding.
	NamespaceRole = "kubeopera-manager-tenant-namespace"
	// NamespaceRoleBinding names that RoleBinding.
	NamespaceRoleBinding = "kubeopera-manager"
	// accessTimeout bounds the wait for a new RoleBinding to be in effect.
	accessTimeout = 10 * time.Second
)

// ensureAccess makes sure the manager's backend identity holds NamespaceRole in backend namespace
// name: it binds it to the identity the backend reports for the client (SelfSubjectReview) when
// the binding is missing, and waits until the binding is in effect (the identity can read it).
// Kubernetes RBAC cannot grant rights in "every kcp-* namespace", so this binding is what confines
// the manager's reads and writes of Secrets and workloads to its own namespaces. In a namespace
// it has just created (fresh) there is no binding to look for.
func (b Backend) ensureAccess(ctx context.Context, name string, fresh bool) error {
	key := client.ObjectKey{Namespace: name, Name: NamespaceRoleBinding}
	if !fresh {
		err := b.Reader.Get(ctx, key, &rbacv1.RoleBinding{})
		switch {
		case err == nil:
			return nil
		case !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err):
			// Forbidden is expected: without the binding the identity cannot read bindings there.
			return fmt.Errorf("failed to get RoleBinding %s/%s: %w", name, NamespaceRoleBinding, err)
		}
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := b.Client.Create(ctx, review); err != nil {
		return fmt.Errorf("failed to look up the manager's backend identity: %w", err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: NamespaceRoleBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NamespaceRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: review.Status.UserInfo.Username}},
	}
	if err := b.Client.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to bind %s in backend namespace %s: %w", NamespaceRole, name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, accessTimeout, true, func(ctx context.Context) (bool, error) {
		return b.Reader.Get(ctx, key, &rbacv1.RoleBinding{}) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("RoleBinding %s/%s is not in effect yet: %w", name, NamespaceRoleBinding, err)
	}
	return nil
}
