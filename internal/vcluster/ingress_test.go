package vcluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	imanager "github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestIngressClassPolicy applies the shipped backend policy (config/policies/ingress-class.yaml)
// to a real kube-apiserver: without an allowed class no tenant Ingress is admitted; with one,
// only Ingresses of that class are; namespaces that are not a tenant's are not affected.
func TestIngressClassPolicy(t *testing.T) {
	ctx := t.Context()
	cl := framework.StartCluster(t, framework.ClusterOptions{})
	c, err := client.New(cl.Config, client.Options{Scheme: imanager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "policies", "ingress-class.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "kubeopera-system"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kcp-0123456789ab-vc-alice", Labels: map[string]string{workspaces.FingerprintLabel: "0123456789ab"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}},
	} {
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	ingress := func(ns, class string) error {
		n++
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("ing-%d", n)},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}},
			}},
		}
		if class != "" {
			ing.Spec.IngressClassName = ptr.To(class)
		}
		return c.Create(context.Background(), ing)
	}
	tenantNS := "kcp-0123456789ab-vc-alice"
	// The policy takes effect once the apiserver has loaded it.
	framework.Eventually(t, time.Minute, "no tenant Ingress admitted without an allowed class", func() (bool, string) {
		err := ingress(tenantNS, "nginx")
		// Without the parameter the binding denies (parameterNotFoundAction: Deny).
		return err != nil && strings.Contains(err.Error(), "kubeopera-tenant-ingress-class") && strings.Contains(err.Error(), "no params found"), fmt.Sprint(err)
	})
	if err := ingress("someone-elses", "anything"); err != nil {
		t.Errorf("an Ingress outside the tenants' namespaces was refused: %v", err)
	}

	if err := vcluster.EnsureIngressParams(ctx, c, c, "kubeopera-system", vcluster.IngressParams{Class: "nginx"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "an Ingress of the allowed class admitted", func() (bool, string) {
		err := ingress(tenantNS, "nginx")
		return err == nil, fmt.Sprint(err)
	})
	for _, class := range []string{"public", ""} {
		if err := ingress(tenantNS, class); err == nil || !strings.Contains(err.Error(), "must use ingress class nginx") {
			t.Errorf("an Ingress of class %q was not refused with the allowed class named: %v", class, err)
		}
	}

	// Control planes exposed through a passthrough ingress: that class only from the manager.
	manager, err := vcluster.Writer(ctx, cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := vcluster.EnsureIngressParams(ctx, c, c, "kubeopera-system", vcluster.IngressParams{
		Class: "nginx", ControlPlaneClass: "passthrough", ControlPlaneWriter: manager,
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the manager's control-plane Ingress admitted", func() (bool, string) {
		err := ingress(tenantNS, "passthrough")
		return err == nil, fmt.Sprint(err)
	})
	// The vCluster's syncer, writing as its own ServiceAccount (the chart's vc-<release>), which
	// the chart's Role lets write Ingresses (templates/role.yaml, with ingress sync on).
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "vc-vc-alice"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"create"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "vc-vc-alice"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "vc-vc-alice"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tenantNS, Name: "vc-vc-alice"}}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	syncerCfg := rest.CopyConfig(cl.Config)
	syncerCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + tenantNS + ":vc-vc-alice"}
	asSyncer, err := client.New(syncerCfg, client.Options{Scheme: imanager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	syncerIngress := func(class string) error {
		n++
		return asSyncer.Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: fmt.Sprintf("ing-%d", n)},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(class), DefaultBackend: &networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}},
			}},
		})
	}
	if err := syncerIngress("passthrough"); err == nil || !strings.Contains(err.Error(), "must use ingress class nginx") {
		t.Errorf("a tenant's Ingress of the control planes' passthrough class was not refused: %v", err)
	}
	if err := syncerIngress("nginx"); err != nil {
		t.Errorf("a tenant's Ingress of the allowed class was refused: %v", err)
	}

	// Switching it off again: the parameter goes, and so do tenant Ingresses.
	if err := vcluster.EnsureIngressParams(ctx, c, c, "kubeopera-system", vcluster.IngressParams{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "tenant Ingresses refused again", func() (bool, string) {
		err := ingress(tenantNS, "nginx")
		return err != nil, fmt.Sprint(err)
	})
}
