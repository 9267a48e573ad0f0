// Package platform starts kcp and a backend installed as the product is before a manager runs,
// for suites that run the manager binary (e2e, bench). It is apart from package framework, which
// package workspaces' own tests import.
package platform

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// ManagerKCPUser is the kcp user the manager runs as in tests: kcp's unprivileged "user", with
// exactly the platform workspace role the product ships bound to it.
const ManagerKCPUser = "user"

// Platform is kcp and a backend installed as the product is before a manager runs.
type Platform struct {
	KCP     *devenv.KCP
	Backend *devenv.Backend
}

// Start starts kcp and a backend with their state in dir (kcp/, backend/) and installs
// the platform: the platform workspace (bootstrap.Bootstrap), root:orgs for tenant workspaces,
// the manager's platform role (apiexports/bootstrap/manager-rbac.yaml) bound to ManagerKCPUser,
// and the backend namespace kubeopera-system. stop stops both servers.
func Start(ctx context.Context, dir string) (p *Platform, stop func(), err error) {
	p = &Platform{}
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	kcpDir, backendDir := filepath.Join(dir, "kcp"), filepath.Join(dir, "backend")
	for _, d := range []string{kcpDir, backendDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	// kcp and the backend start side by side; each one that started is stopped with the rest.
	var (
		backendStop func()
		backendErr  error
		backendUp   = make(chan struct{})
	)
	go func() {
		defer close(backendUp)
		p.Backend, backendStop, backendErr = framework.StartBackendIn(backendDir)
	}()
	kcp, kcpStop, kcpErr := framework.StartKCPIn(kcpDir)
	<-backendUp
	if kcpErr == nil {
		p.KCP = kcp
		stops = append(stops, kcpStop)
	}
	if backendErr == nil {
		stops = append(stops, backendStop)
	}
	if err := errors.Join(kcpErr, backendErr); err != nil {
		return nil, nil, err
	}
	if err := bootstrap.Bootstrap(ctx, p.KCP.Config, bootstrap.PlatformWorkspace); err != nil {
		return nil, nil, err
	}
	if _, err := workspaces.EnsureWorkspace(ctx, p.KCP.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		return nil, nil, err
	}
	if err := bootstrap.BindManagerRole(ctx, p.KCP.Config, bootstrap.PlatformWorkspace, ManagerKCPUser); err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(p.Backend.Config)
	if err != nil {
		return nil, nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeopera-system"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, err
	}
	return p, stop, nil
}
