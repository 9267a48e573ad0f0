package jobs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs/jobstest"
	"github.com/kubeopera/kubeopera/test/framework"
)

// manifests decodes the YAML documents of config/provisioner/<file>.
func manifests(t *testing.T, file string) []runtime.Object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "provisioner", file))
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
			t.Fatalf("%s: %v", file, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func apply(t *testing.T, e *env, objs []runtime.Object) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			_, err = e.admin.CoreV1().Namespaces().Create(e.ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = e.admin.CoreV1().ServiceAccounts(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = e.admin.RbacV1().Roles(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = e.admin.RbacV1().RoleBindings(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("apply: unexpected %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The provisioner runs as config/provisioner's ServiceAccount with exactly its Role: every call of
// the store must pass RBAC (creating the runner's Role and RoleBinding included, which RBAC allows
// only without escalation), the credential copy is readable only once the manager grants it as
// controllers/hostcluster does, and the runner's pod and the provisioner's own pod pass the
// namespace's Pod Security "restricted" admission.
func TestProvisionerIdentityFromConfig(t *testing.T) {
	e := newEnv(t)
	apply(t, e, manifests(t, "namespace.yaml"))
	apply(t, e, manifests(t, "rbac.yaml"))
	ns := api.DefaultJobsNamespace
	provisioner := must[kubernetes.Interface](t)(jobstest.ServiceAccountClient(backend, ns, "kubeopera-provisioner"))
	runs := must[*jobs.Client](t)(jobs.New(provisioner, jobs.Config{Render: render, Now: e.clock.Now}))
	jobCtl := jobstest.JobController{Client: e.admin, Namespace: ns}
	runner := jobstest.Runner{Config: backend, Namespace: ns}

	// The manager's copy of a tenant's credential, in the workspace's backend namespace.
	kcp := e.namespace("kcp")
	ref := e.credential(kcp, "hostcluster-prod-1-cloud-credential", map[string]string{"role_arn": "arn:aws:iam::123456789012:role/provisioner"})
	_, err := runs.Create(e.ctx, request(ref))
	var fe *api.FieldError
	if !errors.As(err, &fe) || fe.Field != "credentialSecretRef" || !strings.Contains(fe.Message, "not readable") {
		t.Fatalf("Create before the manager's grant: %v, want a FieldError saying the Secret is not readable", err)
	}
	// The manager's grant (controllers/hostcluster grantCredential): get on that one Secret.
	grant := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: kcp, Name: ref.Name + "-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{ref.Name}, Verbs: []string{"get"}}}}
	must[*rbacv1.Role](t)(e.admin.RbacV1().Roles(kcp).Create(e.ctx, grant, metav1.CreateOptions{}))
	must[*rbacv1.RoleBinding](t)(e.admin.RbacV1().RoleBindings(kcp).Create(e.ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: kcp, Name: ref.Name + "-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: grant.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "kubeopera-provisioner"}},
	}, metav1.CreateOptions{}))
	other := e.credential(kcp, "someone-elses-secret", map[string]string{"role_arn": "arn:aws:iam::123456789012:role/x"})
	if _, err := runs.Create(e.ctx, request(other)); !errors.As(err, &fe) || !strings.Contains(fe.Message, "not readable") {
		t.Fatalf("Create with a Secret the manager did not grant: %v", err)
	}

	var p api.Provision
	framework.Eventually(t, 10*time.Second, "the manager's grant to take effect", func() (bool, string) {
		p, err = runs.Create(e.ctx, request(ref))
		return err == nil, ""
	})
	id := p.ID
	// One run at a time per cluster, under exactly this Role (the cluster's Lease).
	var active *jobs.ActiveRunError
	if _, err := runs.Create(e.ctx, request(ref)); !errors.As(err, &active) || active.RunID != id {
		t.Fatalf("a second run of the cluster as the provisioner: %v, want an ActiveRunError naming %s", err, id)
	}

	// The runner's pod, made from the Job's template as the Job controller would, is admitted by
	// Pod Security "restricted"; a privileged one is not (the check is on).
	must[*batchv1.Job](t)(jobCtl.Start(e.ctx, id))
	if _, err := jobCtl.CreatePod(e.ctx, id, nil); err != nil {
		t.Fatalf("the runner's pod is refused in %s: %v", ns, err)
	}
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
	}}}}
	if _, err := e.admin.CoreV1().Pods(ns).Create(e.ctx, bad, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a privileged pod in %s: %v, want Forbidden by Pod Security", ns, err)
	}
	for _, o := range manifests(t, "deployment.yaml") {
		d := o.(*appsv1.Deployment)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "provisioner", Namespace: ns}, Spec: d.Spec.Template.Spec}
		if _, err := e.admin.CoreV1().Pods(ns).Create(e.ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("the provisioner's own pod is refused in %s: %v", ns, err)
		}
	}

	if err := runner.Report(e.ctx, id, "succeeded", "kubeconfig published", "apiVersion: v1\nkind: Config\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Kubeconfig(e.ctx, id); !isNotDone(err, api.StatusApplying) {
		t.Fatalf("Kubeconfig before the Job completed: %v", err)
	}
	must[*batchv1.Job](t)(jobCtl.Complete(e.ctx, id))
	if got := must[api.Provision](t)(runs.Get(e.ctx, id)); got.Status != api.StatusSucceeded {
		t.Fatalf("Get: %+v", got)
	}
	if kc, err := runs.Kubeconfig(e.ctx, id); err != nil || !strings.Contains(kc, "kind: Config") {
		t.Fatalf("Kubeconfig: %q, %v", kc, err)
	}
	rc, err := runs.Logs(e.ctx, id)
	if err != nil {
		t.Fatalf("Logs as the provisioner: %v", err)
	}
	_ = rc.Close()
	e.clock.Set(time.Now().Add(200 * time.Hour))
	if n, err := runs.Sweep(e.ctx, 168*time.Hour); err != nil || n != 1 {
		t.Fatalf("Sweep as the provisioner: %d, %v", n, err)
	}

	// What the provisioner may not do.
	denied := map[string]func() error{
		"read Secrets outside its namespace": func() error {
			_, err := provisioner.CoreV1().Secrets("default").List(e.ctx, metav1.ListOptions{})
			return err
		},
		"list Secrets": func() error {
			_, err := provisioner.CoreV1().Secrets(ns).List(e.ctx, metav1.ListOptions{})
			return err
		},
		"delete Secrets": func() error {
			return provisioner.CoreV1().Secrets(ns).Delete(e.ctx, "anything", metav1.DeleteOptions{})
		},
		"create pods": func() error {
			_, err := provisioner.CoreV1().Pods(ns).Create(e.ctx, bad, metav1.CreateOptions{})
			return err
		},
		"create ClusterRoleBindings": func() error {
			_, err := provisioner.RbacV1().ClusterRoleBindings().Create(e.ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "x"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			}, metav1.CreateOptions{})
			return err
		},
		// cluster-admin, not admin: admin's rules are aggregated by a kube-controller-manager
		// controller this test backend does not run, so admin is empty here.
		"bind a broader role in its namespace": func() error {
			_, err := provisioner.RbacV1().RoleBindings(ns).Create(e.ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "x"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "kubeopera-provisioner"}},
			}, metav1.CreateOptions{})
			return err
		},
		"create a Role granting more than it holds": func() error {
			_, err := provisioner.RbacV1().Roles(ns).Create(e.ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "x"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{})
			return err
		},
	}
	for name, call := range denied {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the provisioner may %s: %v", name, err)
		}
	}
}
