package jobs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs/jobstest"
	"github.com/kubeopera/kubeopera/test/framework"
)

// scaffolderSA is config/scaffolder's ServiceAccount, the manager's --scaffolder-identity.
const scaffolderSA = "gitops-scaffolder"

// The scaffolder runs as config/scaffolder's ServiceAccount with exactly its Role, in the
// namespace config/provisioner makes: every call of the store must pass RBAC (creating the
// runner's Role and RoleBinding included, which RBAC allows only without escalation), the
// Secrets a request names are readable only once the manager grants them by name as
// Scope.GrantRead does, and the runner's pod and the scaffolder's own pod pass the namespace's Pod
// Security "restricted" admission.
func TestScaffolderIdentityFromConfig(t *testing.T) {
	e := newEnv(t)
	framework.CreateIdentity(e.ctx, t, e.admin, framework.Manifests(t, "config/provisioner/namespace.yaml"))
	framework.CreateIdentity(e.ctx, t, e.admin, framework.Manifests(t, "config/scaffolder/rbac.yaml"))
	ns := api.DefaultJobsNamespace
	scaffolder := must[kubernetes.Interface](t)(jobruntest.ServiceAccountClient(backend, ns, scaffolderSA))
	runs := must[*jobs.Client](t)(jobs.New(scaffolder, jobs.Config{Now: e.clock.Now}))
	jobCtl := jobruntest.JobController{Client: e.admin, Namespace: ns, JobName: api.JobName}
	runner := jobstest.Runner{Config: backend, Namespace: ns}

	// The manager's stored Secrets, in the workspace's backend namespace.
	kcp := e.namespace("kcp")
	kc := e.kubeconfig(kcp)
	git := e.secret(kcp, "hostcluster-prod-1-git-credentials", corev1.SecretTypeOpaque, map[string]string{"bearerToken": gitToken}, nil)
	req := request(kc)
	req.GitCredentialsSecretRef = &git
	var fe *api.FieldError
	if _, err := runs.Create(e.ctx, req); !errors.As(err, &fe) || fe.Field != "kubeconfigSecretRef" || !strings.Contains(fe.Message, "not readable by the gitops-scaffolder") {
		t.Fatalf("Create before the manager's grant: %v, want a FieldError on kubeconfigSecretRef saying it is not readable", err)
	}
	// The manager grants the kubeconfig only: the git credentials are still refused, by name.
	framework.GrantSecretRead(e.ctx, t, e.admin, kcp, kc.Name, ns, scaffolderSA)
	framework.Eventually(t, 10*time.Second, "the manager's grant to take effect", func() (bool, string) {
		_, err := runs.Create(e.ctx, req)
		return errors.As(err, &fe) && fe.Field == "gitCredentialsSecretRef", ""
	})
	if !strings.Contains(fe.Message, "not readable") {
		t.Errorf("the git credentials not granted: %v", fe)
	}
	framework.GrantSecretRead(e.ctx, t, e.admin, kcp, git.Name, ns, scaffolderSA)
	var s api.Scaffold
	framework.Eventually(t, 10*time.Second, "the second grant to take effect", func() (bool, string) {
		var err error
		s, err = runs.Create(e.ctx, req)
		return err == nil, ""
	})
	id := s.ID

	// The runner's pod, made from the Job's template as the Job controller would, is admitted by
	// Pod Security "restricted"; a privileged one is not (the check is on).
	must[*batchv1.Job](t)(jobCtl.Start(e.ctx, id))
	if _, err := jobCtl.CreatePod(e.ctx, id, nil); err != nil {
		t.Fatalf("the runner's pod is refused in %s: %v", ns, err)
	}
	framework.CheckRestricted(e.ctx, t, e.admin, ns, "config/scaffolder/deployment.yaml")

	// Get (the Job, the status Secret, the pod) and the sweep, as the scaffolder.
	if err := runner.Report(e.ctx, id, api.StepSucceeded, "tree pushed", "abcdef1"); err != nil {
		t.Fatal(err)
	}
	must[*batchv1.Job](t)(jobCtl.Complete(e.ctx, id))
	if got := must[api.Scaffold](t)(runs.Get(e.ctx, id)); !got.Succeeded() || len(got.Commits) != 1 {
		t.Fatalf("Get: %+v", got)
	}
	e.clock.SetTime(time.Now().Add(200 * time.Hour))
	if n, err := runs.Sweep(e.ctx, 168*time.Hour); err != nil || n != 1 {
		t.Fatalf("Sweep as the scaffolder: %d, %v", n, err)
	}

	// What the scaffolder may not do: besides what no job service may, read a Secret of kcp-<fp>
	// the manager did not grant, pods' logs (the API serves none) or ConfigMaps.
	denied := jobruntest.ServiceMayNot(e.ctx, scaffolder, ns, scaffolderSA)
	denied["read a Secret of the workspace that was not granted"] = func() error {
		_, err := scaffolder.CoreV1().Secrets(kcp).Get(e.ctx, "hostcluster-other-kubeconfig", metav1.GetOptions{})
		return err
	}
	denied["read pod logs"] = func() error {
		_, err := scaffolder.CoreV1().Pods(ns).GetLogs("anything", &corev1.PodLogOptions{}).DoRaw(e.ctx)
		return err
	}
	denied["read ConfigMaps"] = func() error {
		_, err := scaffolder.CoreV1().ConfigMaps(ns).Get(e.ctx, "anything", metav1.GetOptions{})
		return err
	}
	for name, call := range denied {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the scaffolder may %s: %v", name, err)
		}
	}
}
