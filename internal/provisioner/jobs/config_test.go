package jobs_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs/jobstest"
	"github.com/kubeopera/kubeopera/test/framework"
)

// manifests decodes the YAML documents of config/provisioner/<file>.
func manifests(t *testing.T, file string) []runtime.Object {
	t.Helper()
	return framework.Manifests(t, filepath.Join("config", "provisioner", file))
}

func apply(t *testing.T, e *env, objs []runtime.Object) {
	t.Helper()
	framework.CreateIdentity(e.ctx, t, e.admin, objs)
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
	provisioner := must[kubernetes.Interface](t)(jobruntest.ServiceAccountClient(backend, ns, "kubeopera-provisioner"))
	runs := must[*jobs.Client](t)(jobs.New(provisioner, jobs.Config{Render: render, Now: e.clock.Now}))
	jobCtl := jobruntest.JobController{Client: e.admin, Namespace: ns, JobName: api.JobName}
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
	framework.GrantSecretRead(e.ctx, t, e.admin, kcp, ref.Name, ns, "kubeopera-provisioner")
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
	framework.CheckRestricted(e.ctx, t, e.admin, ns, "config/provisioner/deployment.yaml")

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
	denied := jobruntest.ServiceMayNot(e.ctx, provisioner, ns, "kubeopera-provisioner")
	for name, call := range denied {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the provisioner may %s: %v", name, err)
		}
	}
}
