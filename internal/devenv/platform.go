package devenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/bootstrap"
)

// ManagerKCPUser is the kcp user the manager runs as in the local environment and the tests:
// kcp's unprivileged "user", with exactly the platform workspace role the product ships bound
// to it.
const ManagerKCPUser = "user"

// InstallPlatform puts on kcp (admin config kcp) and a backend (admin config backend) what the
// product's installation puts there before a manager runs: the backend namespace
// ManagerNamespace, the platform workspace (bootstrap.Bootstrap: schemas, exports, WorkspaceType
// kubeopera-tenant), the manager's platform role bound to ManagerKCPUser, and root:orgs for
// tenant workspaces. It is idempotent. bin/devenv and the suites that run the manager binary
// (test/framework/platform) both start through it; the manager's backend identity is
// ManagerIdentity's.
func InstallPlatform(ctx context.Context, kcp, backend *rest.Config) error {
	cs, err := kubernetes.NewForConfig(backend)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create namespace %s on the backend: %w", ManagerNamespace, err)
	}
	if err := bootstrap.Bootstrap(ctx, kcp, bootstrap.PlatformWorkspace); err != nil {
		return err
	}
	if err := bootstrap.BindManagerRole(ctx, kcp, bootstrap.PlatformWorkspace, ManagerKCPUser); err != nil {
		return err
	}
	if _, err := workspaces.EnsureWorkspace(ctx, kcp, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		return err
	}
	return nil
}
