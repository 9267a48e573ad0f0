package syncer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
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
	user, err := identity(ctx, b.Client)
	if err != nil {
		return err
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: NamespaceRoleBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NamespaceRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := b.Client.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to bind %s in backend namespace %s: %w", NamespaceRole, name, err)
	}
	inEffect := func(ctx context.Context) (bool, error) {
		return b.Reader.Get(ctx, key, &rbacv1.RoleBinding{}) == nil, nil
	}
	if b.DeferAccess {
		if ok, _ := inEffect(ctx); !ok {
			return &AccessPendingError{Namespace: name}
		}
		return nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, accessTimeout, true, inEffect); err != nil {
		return fmt.Errorf("RoleBinding %s/%s is not in effect yet: %w", name, NamespaceRoleBinding, err)
	}
	return nil
}

// AccessPendingError says the manager's RoleBinding in a backend namespace of its own was made
// and is not in effect yet (Backend.DeferAccess): Kubernetes' RBAC authorizer sees a new binding a
// moment later. Retry shortly.
type AccessPendingError struct{ Namespace string }

func (e *AccessPendingError) Error() string {
	return fmt.Sprintf("the manager's access to backend namespace %s is not in effect yet", e.Namespace)
}

// IsAccessPending reports whether err is an AccessPendingError.
func IsAccessPending(err error) bool {
	var e *AccessPendingError
	return errors.As(err, &e)
}

// identities caches the backend identity of each client (its SelfSubjectReview): it does not
// change while the process runs, so it is asked once, not for every namespace.
var identities sync.Map // client.Client -> string

// identity returns the user name the backend reports for c.
func identity(ctx context.Context, c client.Client) (string, error) {
	// Only a client behind a pointer is a key (every client controller-runtime makes is one).
	cacheable := reflect.ValueOf(c).Kind() == reflect.Pointer
	if cacheable {
		if u, ok := identities.Load(c); ok {
			return u.(string), nil
		}
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("failed to look up the manager's backend identity: %w", err)
	}
	if cacheable {
		identities.Store(c, review.Status.UserInfo.Username)
	}
	return review.Status.UserInfo.Username, nil
}
