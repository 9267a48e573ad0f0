// Package install_test checks the platform's backend install, `kubectl apply -k config`, against a
// fresh kube-apiserver: every object is admitted (a server-side dry run, then the real apply), the
// manager is pointed at the provisioner and the gitops-scaffolder, and the pods of every
// Deployment pass their namespace's Pod Security admission.
package install_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
)

// scaffolderObjects are config/scaffolder's objects (kind/namespace/name), as kubectl prints them.
var scaffolderObjects = []string{
	"serviceaccount/gitops-scaffolder",
	"role.rbac.authorization.k8s.io/gitops-scaffolder",
	"rolebinding.rbac.authorization.k8s.io/gitops-scaffolder",
	"service/gitops-scaffolder",
	"deployment.apps/gitops-scaffolder",
	"networkpolicy.networking.k8s.io/gitops-scaffolder",
}

func TestApplyConfig(t *testing.T) {
	c := framework.StartCluster(t, framework.ClusterOptions{})
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := devenv.WriteKubeconfig(c.Config, path, "backend"); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	config := filepath.Join(framework.RepoRoot(), "config")
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := framework.Kubectl(ctx, t, kubeconfig, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// A server-side dry run admits nothing into a namespace that does not exist yet: the
	// install's namespaces are applied first, as `kubectl apply -k` does in one go.
	kubectl("apply", "--server-side", "--field-manager=install-test", "-f", filepath.Join(config, "namespace.yaml"),
		"-f", filepath.Join(config, "provisioner", "namespace.yaml"))
	dry := kubectl("apply", "-k", config, "--server-side", "--field-manager=install-test", "--dry-run=server")
	for _, o := range scaffolderObjects {
		if !strings.Contains(dry, o+" serverside-applied (server dry run)") {
			t.Errorf("server-side dry run of config/: no %s in\n%s", o, dry)
		}
	}

	out := kubectl("apply", "-k", config, "--server-side", "--field-manager=install-test")
	for _, o := range scaffolderObjects {
		if !strings.Contains(out, o+" serverside-applied") {
			t.Errorf("apply of config/: no %s in\n%s", o, out)
		}
	}
	cs := kubernetes.NewForConfigOrDie(c.Config)
	manager, err := cs.AppsV1().Deployments("kubeopera-system").Get(ctx, "kubeopera-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := manager.Spec.Template.Spec.Containers[0].Env
	wantEnv := map[string]string{
		"GITOPS_SCAFFOLDER_BASE_URL":   "http://gitops-scaffolder.kubeopera-provisioning:8080",
		"CLUSTER_PROVISIONER_BASE_URL": "http://cluster-provisioner.kubeopera-provisioning:8080",
	}
	for name, want := range wantEnv {
		i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || env[i].Value != want {
			t.Errorf("the manager's %s: %+v, want %q", name, env, want)
		}
	}
	i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "GITOPS_SCAFFOLDER_API_KEY" })
	if i < 0 || env[i].ValueFrom == nil || env[i].ValueFrom.SecretKeyRef == nil {
		t.Errorf("the manager's GITOPS_SCAFFOLDER_API_KEY does not come from a Secret: %+v", env)
	}
	scaffolder, err := cs.AppsV1().Deployments("kubeopera-provisioning").Get(ctx, "gitops-scaffolder", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sa := scaffolder.Spec.Template.Spec.ServiceAccountName; sa != "gitops-scaffolder" {
		t.Errorf("the scaffolder runs as %q, want gitops-scaffolder (the manager's --scaffolder-identity)", sa)
	}

	// Each Deployment's pod, as its ReplicaSet would create it, passes the namespace's Pod
	// Security admission (kubeopera-provisioning enforces "restricted").
	for _, ns := range []string{"kubeopera-system", "kubeopera-provisioning"} {
		deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(deps.Items) == 0 {
			t.Errorf("no Deployment in %s", ns)
		}
		for _, d := range deps.Items {
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, podOf(&d), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("the pod of Deployment %s/%s is refused: %v", ns, d.Name, err)
			}
		}
	}
}

func podOf(d *appsv1.Deployment) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + "-", Namespace: d.Namespace, Labels: d.Spec.Template.Labels},
		Spec: d.Spec.Template.Spec}
}
