package framework

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// Manifests decodes the YAML documents of the repository's file at path (relative to the
// repository root, e.g. "config/scaffolder/rbac.yaml") into typed objects.
func Manifests(t testing.TB, path string) []runtime.Object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// CreateIdentity creates objs through cs as they are: Namespaces, ServiceAccounts, Roles and
// RoleBindings (a component's namespace and identity from config/).
func CreateIdentity(ctx context.Context, t testing.TB, cs kubernetes.Interface, objs []runtime.Object) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			_, err = cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("CreateIdentity: unexpected %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// GrantSecretRead lets ServiceAccount saNamespace/saName get Secret ns/secret, by name and nothing
// else, as the manager grants the provisioner and the scaffolder a workspace's stored Secrets
// (internal/reconcile Scope.GrantRead): a Role and RoleBinding <secret>-reader in ns.
func GrantSecretRead(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, secret, saNamespace, saName string) {
	t.Helper()
	name := secret + "-reader"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// CheckRestricted checks that namespace ns enforces Pod Security "restricted" (a privileged pod
// is refused) and admits the pod of every Deployment in the repository's file deployments (a
// dry run), as a component's Deployment in config/ must be.
func CheckRestricted(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, deployments string) {
	t.Helper()
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
	}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a privileged pod in %s: %v, want Forbidden by Pod Security", ns, err)
	}
	for _, o := range Manifests(t, deployments) {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			t.Fatalf("%s holds a %T, not only Deployments", deployments, o)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + "-", Namespace: ns}, Spec: d.Spec.Template.Spec}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("the pod of Deployment %s is refused in %s: %v", d.Name, ns, err)
		}
	}
}
