package e2e

import (
	"context"
	"encoding/json"

	"strings"
	"testing"

	"github.com/kubeopera/kubeopera/syncer"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestManagerBackendIdentity proves that the manager's backend identity as shipped (config/rbac:
// ServiceAccount kubeopera-system/kubeopera-manager, its roles and the admission policy) does what
// the manager does on the backend and nothing else. It runs on a backend only (no kcp): every call
// below is made with the ServiceAccount's token, the way the manager makes it.
func TestManagerBackendIdentity(t *testing.T) {
	// It starts its own servers, or only reads the shared ones: it runs beside the parallel tests.
	t.Parallel()
	ctx := context.Background()
	m := framework.StartBackendAsManager(t)
	id, admin, mgr := m.Identity, m.Admin, m.Manager
	backend := syncer.Backend{Client: mgr, Reader: mgr}
	const lc = "1bg4baqdjkcw9lz4"
	store, host := workspaces.Namespace(lc), workspaces.VClusterNamespace(lc, "alice")
	const owner = "Tenant default/alice"

	// Objects of others the manager must not touch, made by the admin.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}},
		// A kcp-* namespace on a shared backend that is not KubeOpera's (no fingerprint label).
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcp-system-components"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cloud-credentials"}, StringData: map[string]string{"key": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-password"}, StringData: map[string]string{"key": "v"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kubeopera-system", Name: "kubeopera-manager"}, StringData: map[string]string{"key": "v"}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("creates its namespaces and binds itself there", func(t *testing.T) {
		for _, ns := range []string{store, host} {
			if err := backend.EnsureNamespace(ctx, lc, ns, ownerOf(ns, host, owner)); err != nil {
				t.Fatalf("EnsureNamespace(%s): %v", ns, err)
			}
			// Again: an existing namespace of its own is fine.
			if err := backend.EnsureNamespace(ctx, lc, ns, ownerOf(ns, host, owner)); err != nil {
				t.Fatalf("EnsureNamespace(%s) again: %v", ns, err)
			}
		}
		for _, ns := range []string{store, host} {
			got := &corev1.Namespace{}
			if err := admin.Get(ctx, client.ObjectKey{Name: ns}, got); err != nil {
				t.Fatal(err)
			}
			if want := syncer.PodSecurityLevel(lc, ns); got.Labels[syncer.PodSecurityEnforceLabel] != want {
				t.Errorf("namespace %s enforces Pod Security %q, want %q", ns, got.Labels[syncer.PodSecurityEnforceLabel], want)
			}
		}
		rb := &rbacv1.RoleBinding{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: host, Name: syncer.NamespaceRoleBinding}, rb); err != nil {
			t.Fatal(err)
		}
		want := "system:serviceaccount:kubeopera-system:kubeopera-manager"
		if rb.RoleRef.Name != syncer.NamespaceRole || len(rb.Subjects) != 1 || rb.Subjects[0].Name != want {
			t.Errorf("RoleBinding %s/%s = %v %v, want %s bound to %s only", host, rb.Name, rb.RoleRef, rb.Subjects, syncer.NamespaceRole, want)
		}
	})

	t.Run("gives a namespace of its own made before Pod Security labels its labels", func(t *testing.T) {
		old := workspaces.VClusterNamespace(lc, "old")
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        old,
			Labels:      map[string]string{workspaces.FingerprintLabel: workspaces.Fingerprint(lc)},
			Annotations: map[string]string{workspaces.LogicalClusterAnnotation: lc, syncer.OwnerAnnotation: "Tenant default/old"},
		}}); err != nil {
			t.Fatal(err)
		}
		if err := backend.EnsureNamespace(ctx, lc, old, "Tenant default/old"); err != nil {
			t.Fatalf("EnsureNamespace(%s) as the manager: %v", old, err)
		}
		got := &corev1.Namespace{}
		if err := admin.Get(ctx, client.ObjectKey{Name: old}, got); err != nil {
			t.Fatal(err)
		}
		if got.Labels[syncer.PodSecurityEnforceLabel] != syncer.PodSecurityBaseline {
			t.Errorf("namespace %s labels = %v, want enforce baseline", old, got.Labels)
		}
		if _, err := backend.DeleteNamespace(ctx, lc, old, "Tenant default/old"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("stores, reads and deletes Secrets in its namespaces", func(t *testing.T) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: store, Name: "tenant-x-kubeconfig"}, Data: map[string][]byte{"kubeconfig": []byte("k")}}
		if err := mgr.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := mgr.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{}); err != nil {
			t.Fatal(err)
		}
		if err := mgr.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("installs, upgrades and uninstalls the vCluster chart with Helm", func(t *testing.T) {
		ch, err := loader.Load(framework.VClusterChart())
		if err != nil {
			t.Fatal(err)
		}
		cfg := helmConfig(t, id.KubeconfigPath, host)
		values := func(cpu string) map[string]any {
			// The layout of controllers/tenant's values: k3s, synced ingresses and service
			// accounts, NetworkPolicy, ResourceQuota and LimitRange on.
			return map[string]any{
				"controlPlane": map[string]any{
					"distro":      map[string]any{"k3s": map[string]any{"enabled": true}},
					"statefulSet": map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": cpu}, "limits": map[string]any{"cpu": cpu}}},
				},
				"sync": map[string]any{"toHost": map[string]any{
					"ingresses":       map[string]any{"enabled": true},
					"serviceAccounts": map[string]any{"enabled": true},
				}},
				"exportKubeConfig": map[string]any{"server": "https://vc-alice." + host + ":443"},
				"policies": map[string]any{
					"networkPolicy": map[string]any{"enabled": true},
					"resourceQuota": map[string]any{"enabled": true},
					"limitRange":    map[string]any{"enabled": true},
				},
			}
		}
		// As internal/helm runs them: server-side apply, hooks waited for, workloads not.
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace = "vc-alice", host
		install.WaitStrategy, install.ServerSideApply, install.ForceConflicts = kube.HookOnlyStrategy, true, true
		if _, err := install.Run(ch, values("1")); err != nil {
			t.Fatalf("helm install as the manager: %v", err)
		}
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = host
		upgrade.WaitStrategy, upgrade.ServerSideApply, upgrade.ForceConflicts = kube.HookOnlyStrategy, "true", true
		if _, err := upgrade.Run("vc-alice", ch, values("2")); err != nil {
			t.Fatalf("helm upgrade as the manager: %v", err)
		}
		for _, obj := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}} {
			if err := admin.Get(ctx, client.ObjectKey{Namespace: host, Name: "vc-alice"}, obj); err != nil {
				t.Errorf("the release's %T: %v", obj, err)
			}
		}
		uninstall := action.NewUninstall(cfg)
		uninstall.WaitStrategy = kube.HookOnlyStrategy
		if _, err := uninstall.Run("vc-alice"); err != nil {
			t.Fatalf("helm uninstall as the manager: %v", err)
		}
	})

	t.Run("creates the real vCluster chart's Role and RoleBinding without escalate", func(t *testing.T) {
		// What loft-sh/vcluster 0.21's templates/role.yaml and rolebinding.yaml render with
		// KubeOpera's values (endpoints synced by default, ingresses and service accounts on):
		// the test chart has no Role, so it is created here as Helm would create it.
		all := []string{"create", "delete", "patch", "update", "get", "list", "watch"}
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: host, Name: "vc-vc-alice"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "services", "pods", "pods/attach", "pods/portforward", "pods/exec", "persistentvolumeclaims"}, Verbs: all},
				{APIGroups: []string{""}, Resources: []string{"pods/status", "pods/ephemeralcontainers"}, Verbs: []string{"patch", "update"}},
				{APIGroups: []string{"apps"}, Resources: []string{"statefulsets", "replicasets", "deployments"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"endpoints", "events", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: []string{"create", "delete", "patch", "update"}},
				{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: all},
				{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: all},
			},
		}
		if err := mgr.Create(ctx, role); err != nil {
			t.Fatalf("creating the vCluster Role as the manager: %v", err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: host, Name: "vc-vc-alice"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: host, Name: "vc-vc-alice"}},
		}
		if err := mgr.Create(ctx, rb); err != nil {
			t.Fatalf("creating the vCluster RoleBinding as the manager: %v", err)
		}
		// A Role with more than the manager holds is refused (no escalate).
		wider := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: host, Name: "wider"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
		}
		refused(t, "creating a Role with */* in "+host, mgr.Create(ctx, wider))
	})

	t.Run("leader election and claim records in kubeopera-system", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kubeopera-system", Name: "claim-x"}}
		if err := mgr.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if err := mgr.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("everything else is refused", func(t *testing.T) {
		for _, c := range []struct {
			what string
			err  error
		}{
			{"creating namespace not-kcp-x", mgr.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-kcp-x"}})},
			{"deleting namespace someone-else", mgr.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "someone-else"}})},
			{"deleting an unlabelled kcp-* namespace", mgr.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcp-system-components"}})},
			{"creating an unlabelled kcp-* namespace", mgr.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcp-unlabelled"}})},
			{"labelling namespace someone-else", labelNamespace(ctx, mgr, "someone-else", map[string]any{syncer.PodSecurityEnforceLabel: "privileged"})},
			{"claiming an unlabelled kcp-* namespace with a fingerprint label", labelNamespace(ctx, mgr, "kcp-system-components", map[string]any{workspaces.FingerprintLabel: workspaces.Fingerprint(lc)})},
			{"removing the fingerprint label of its own namespace", labelNamespace(ctx, mgr, host, map[string]any{workspaces.FingerprintLabel: nil})},
			{"moving its own namespace to another fingerprint", labelNamespace(ctx, mgr, host, map[string]any{workspaces.FingerprintLabel: "000000000000"})},
			{"binding its tenant-namespace role in an unlabelled kcp-* namespace", mgr.Create(ctx, selfBinding("kcp-system-components", "system:serviceaccount:kubeopera-system:kubeopera-manager"))},
			{"reading a Secret in kube-system", mgr.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "cloud-credentials"}, &corev1.Secret{})},
			{"reading a Secret in default", mgr.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db-password"}, &corev1.Secret{})},
			{"reading a Secret in kubeopera-system", mgr.Get(ctx, client.ObjectKey{Namespace: "kubeopera-system", Name: "kubeopera-manager"}, &corev1.Secret{})},
			{"listing Secrets cluster-wide", mgr.List(ctx, &corev1.SecretList{})},
			{"creating a Deployment in default", mgr.Create(ctx, deployment("default"))},
			{"creating a Secret in default", mgr.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}})},
			{"binding its tenant-namespace role in default", mgr.Create(ctx, selfBinding("default", "system:serviceaccount:kubeopera-system:kubeopera-manager"))},
			{"binding its tenant-namespace role to someone else in " + host, mgr.Create(ctx, selfBinding(host, "mallory"))},
			{"binding cluster-admin in " + host, mgr.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: host, Name: "admin"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:serviceaccount:kubeopera-system:kubeopera-manager"}},
			})},
			{"creating a ClusterRoleBinding", mgr.Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "kubeopera-manager-tenant-everywhere"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: syncer.NamespaceRole},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:serviceaccount:kubeopera-system:kubeopera-manager"}},
			})},
		} {
			refused(t, c.what, c.err)
		}
		// Nothing of the above happened.
		if err := admin.Get(ctx, client.ObjectKey{Name: "not-kcp-x"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace not-kcp-x: %v", err)
		}
		for _, name := range []string{"someone-else", "kcp-system-components"} {
			ns := &corev1.Namespace{}
			if err := admin.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil || ns.DeletionTimestamp != nil {
				t.Errorf("namespace %s was touched: %v %v", name, err, ns.DeletionTimestamp)
			}
			if _, labelled := ns.Labels[workspaces.FingerprintLabel]; labelled || ns.Labels[syncer.PodSecurityEnforceLabel] != "" {
				t.Errorf("namespace %s was labelled: %v", name, ns.Labels)
			}
		}
	})

	t.Run("deletes its namespaces", func(t *testing.T) {
		for _, ns := range []string{host, store} {
			if _, err := backend.DeleteNamespace(ctx, lc, ns, ownerOf(ns, host, owner)); err != nil {
				t.Fatalf("DeleteNamespace(%s): %v", ns, err)
			}
		}
	})
}

// labelNamespace merge-patches the labels of namespace name (a nil value removes the label).
func labelNamespace(ctx context.Context, c client.Client, name string, labels map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch))
}

// ownerOf is the owner annotation of a backend namespace: the host namespace is the Tenant's, the
// store namespace is shared.
func ownerOf(ns, host, owner string) string {
	if ns == host {
		return owner
	}
	return ""
}

// refused fails the test unless err is the API server refusing the request (RBAC's Forbidden or
// the admission policy's denial).
func refused(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want refused", what)
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		t.Logf("%s: refused: %v", what, err)
	default:
		t.Errorf("%s: want Forbidden, got %v", what, err)
	}
}

func selfBinding(namespace, user string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "kubeopera-manager-" + strings.ReplaceAll(user, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: syncer.NamespaceRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
}

func deployment(namespace string) *appsv1.Deployment {
	labels := map[string]string{"app": "x"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "x"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}},
			},
		},
	}
}

// helmConfig is a Helm action configuration for namespace with the credentials of kubeconfig and
// Helm's "secret" storage driver, as internal/helm configures it.
func helmConfig(t *testing.T, kubeconfig, namespace string) *action.Configuration {
	t.Helper()
	cache := t.TempDir()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kubeconfig, &namespace, &cache
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(logr.ToSlogHandler(testr.New(t))))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}
