package reconcile_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// GrantRead, with exactly the manager's shipped rights (config/rbac) in a backend namespace of its
// own, lets the provisioner's and the scaffolder's identities (config/provisioner,
// config/scaffolder) get the Secrets it names, by name, and nothing else of the namespace.
func TestGrantReadAsTheManager(t *testing.T) {
	m := framework.StartBackendAsManager(t)
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(m.Backend.Config)
	for _, f := range []string{"config/provisioner/namespace.yaml", "config/provisioner/rbac.yaml", "config/scaffolder/rbac.yaml"} {
		framework.CreateIdentity(ctx, t, admin, framework.Manifests(t, f))
	}
	const lc = "1bg4baqdjkcw9lz4"
	ns := "kcp-" + workspaces.Fingerprint(lc)
	backend := syncer.Backend{Client: m.Manager, Reader: m.Manager}
	if err := backend.EnsureNamespace(ctx, lc, ns, ""); err != nil {
		t.Fatal(err)
	}
	s := &reconcile.Scope{Backend: backend, Namespace: ns, LogicalCluster: lc, Labels: map[string]string{"kubeopera.io/host-cluster-id": "prod-1"}}
	names := []string{"hostcluster-prod-1-kubeconfig", "hostcluster-prod-1-git-credentials"}
	for _, n := range append(names, "hostcluster-prod-1-cloud-credential") {
		if err := m.Manager.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	for identity, grant := range map[string]string{
		hostcluster.DefaultScaffolderIdentity:  "hostcluster-prod-1-scaffolder-reader",
		hostcluster.DefaultProvisionerIdentity: "hostcluster-prod-1-provisioner",
	} {
		granted := names
		if identity == hostcluster.DefaultProvisionerIdentity {
			granted = []string{"hostcluster-prod-1-cloud-credential"}
		}
		if _, err := s.GrantRead(ctx, identity, grant, granted...); err != nil {
			t.Fatalf("GrantRead to %s as the manager: %v", identity, err)
		}
		saNamespace, saName, _ := strings.Cut(identity, "/")
		cs, err := jobruntest.ServiceAccountClient(m.Backend.Config, saNamespace, saName)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range granted {
			framework.Eventually(t, 10*time.Second, identity+" to read "+n, func() (bool, string) {
				_, err := cs.CoreV1().Secrets(ns).Get(ctx, n, metav1.GetOptions{})
				return err == nil, fmt.Sprint(err)
			})
		}
		for _, n := range []string{"hostcluster-prod-1-admin-password", "hostcluster-prod-1-cloud-credential", names[0]} {
			if slices.Contains(granted, n) {
				continue
			}
			if _, err := cs.CoreV1().Secrets(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s reads %s, which it was not granted: %v", identity, n, err)
			}
		}
		if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s lists the Secrets of %s: %v", identity, ns, err)
		}
	}
}
