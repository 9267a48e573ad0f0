package jobs_test

// These tests run the run store on a real kube-apiserver with etcd and a kube-controller-manager
// running only the namespace and garbage-collector controllers (framework.StartBackendIn). There
// is no kubelet and no Job controller: Jobs never start by themselves. jobruntest.JobController
// writes Job status and pods as the Job controller would, and jobstest.Runner writes the outputs
// Secret as cmd/terraform-runner would, through the run's own ServiceAccount.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs/jobstest"
	"github.com/kubeopera/kubeopera/test/framework"
)

// backend is the admin config of the package's backend cluster; nil under -short.
var backend *rest.Config

func TestMain(m *testing.M) {
	framework.RunWithBackend(m, "provisioner-jobs", func(c *rest.Config) { backend = c })
}

// Values that must never appear in a Job spec.
const (
	accessKey = "AKIAEXAMPLEACCESSKEY"
	secretKey = "example/secret/key/value"
)

// clock is the store's clock, moved by tests that need time to pass.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// env is one test's jobs namespace, store and actors.
type env struct {
	t      *testing.T
	ctx    context.Context
	admin  kubernetes.Interface
	ns     string
	clock  *clock
	runs   *jobs.Client
	jobCtl jobruntest.JobController
	runner jobstest.Runner
}

// render stands in for internal/terraform/render: the store's injected dependency.
func render(req api.CreateRequest) (map[string]string, error) {
	return map[string]string{
		"main.tf":    fmt.Sprintf("# %s in %s\n", req.ClusterID, req.Region),
		"backend.tf": fmt.Sprintf("# bucket %s%s\n", api.StateBucketPrefix, req.TerraformEnvironment),
	}, nil
}

type envOption func(*jobs.Config)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	framework.SkipWithoutServers(t)
	e := &env{t: t, ctx: t.Context(), admin: kubernetes.NewForConfigOrDie(backend), clock: &clock{now: time.Now()}}
	e.ns = e.namespace("jobs")
	cfg := jobs.Config{Namespace: e.ns, RunnerImage: "example.test/terraform-runner:test", Render: render, Now: e.clock.Now}
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	if e.runs, err = jobs.New(e.admin, cfg); err != nil {
		t.Fatal(err)
	}
	e.jobCtl = jobruntest.JobController{Client: e.admin, Namespace: e.ns, JobName: api.JobName}
	e.runner = jobstest.Runner{Config: backend, Namespace: e.ns}
	return e
}

// namespace creates a namespace named prefix-<random> for this test.
func (e *env) namespace(prefix string) string {
	e.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(8)}}
	if _, err := e.admin.CoreV1().Namespaces().Create(e.ctx, ns, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return ns.Name
}

// credential creates a credential Secret like the manager's copy in kcp-<fp>.
func (e *env) credential(ns, name string, data map[string]string) api.SecretRef {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: data}
	if _, err := e.admin.CoreV1().Secrets(ns).Create(e.ctx, s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return api.SecretRef{Namespace: ns, Name: name}
}

func request(ref api.SecretRef) api.CreateRequest {
	return api.CreateRequest{
		ClusterID: "prod-1", Region: "eu-north-1", Topology: api.TopologyVanillaKubeadm,
		ControlPlaneCount: ptr.To[int32](3), NodeCount: 2, InstanceType: "t3.medium",
		KubernetesVersion: "1.31", TerraformEnvironment: "prod-1", CredentialSecretRef: ref,
		Workspace: testWorkspace, WorkspaceFingerprint: testFingerprint, OwnerUID: testOwnerUID,
	}
}

// The workspace and the object a test's runs are for.
const (
	testWorkspace   = "1bg4baqdjkcw9lz4"
	testFingerprint = "d37f1981a6be"
	testOwnerUID    = "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f"
)

// start creates a run with a fresh access-key credential.
func (e *env) start(mutate ...func(*api.CreateRequest)) api.Provision {
	e.t.Helper()
	ref := e.credential(e.ns, "cred-"+rand.String(6), map[string]string{"access_key": accessKey, "secret_key": secretKey})
	req := request(ref)
	for _, m := range mutate {
		m(&req)
	}
	p, err := e.runs.Create(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Create: %v", err)
	}
	return p
}

// cluster makes a request one of cluster id (its own state: one run at a time per cluster).
func cluster(id string) func(*api.CreateRequest) {
	return func(r *api.CreateRequest) { r.ClusterID, r.TerraformEnvironment = id, id }
}

func (e *env) get(id string) api.Provision {
	e.t.Helper()
	p, err := e.runs.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", id, err)
	}
	return p
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestCreateMakesTheRunsObjects(t *testing.T) {
	e := newEnv(t)
	kcp := e.namespace("kcp")
	ref := e.credential(kcp, "hostcluster-prod-1-cloud-credential", map[string]string{
		"access_key": accessKey, "secret_key": secretKey, "note": "not a credential key",
	})
	req := request(ref)
	req.ClusterID = "prod-1-" // valid clusterID, not a valid label value as is
	p, err := e.runs.Create(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !jobrun.ValidID(p.ID) || p.Status != api.StatusQueued || p.ClusterID != "prod-1-" || p.Operation != api.OperationApply ||
		!p.BelongsTo(testWorkspace, testOwnerUID) || p.WorkspaceFingerprint != testFingerprint {
		t.Fatalf("Create returned %+v", p)
	}
	id := p.ID
	if got := e.get(id); !got.BelongsTo(testWorkspace, testOwnerUID) || got.BelongsTo(testWorkspace, "0a1b2c3d-0000-4000-8000-000000000000") || got.WorkspaceFingerprint != testFingerprint {
		t.Errorf("Get returned %+v: not the run of workspace %s, object %s only", got, testWorkspace, testOwnerUID)
	}
	wantLabels := map[string]string{api.LabelRun: id, api.LabelCluster: "prod-1", api.LabelOperation: "apply", "app.kubernetes.io/managed-by": "kubeopera-provisioner",
		api.LabelWorkspaceFingerprint: testFingerprint, api.LabelOwnerUID: testOwnerUID}

	job := must[*batchv1.Job](t)(e.admin.BatchV1().Jobs(e.ns).Get(e.ctx, api.JobName(id), metav1.GetOptions{}))
	for k, v := range wantLabels {
		if job.Labels[k] != v {
			t.Errorf("Job label %s = %q, want %q", k, job.Labels[k], v)
		}
	}
	if job.Annotations[jobs.AnnotationClusterID] != "prod-1-" || job.Annotations[api.AnnotationWorkspace] != testWorkspace {
		t.Errorf("Job annotations %v lack the verbatim clusterID or the workspace", job.Annotations)
	}
	spec := job.Spec
	if ptr.Deref(spec.Suspend, true) || ptr.Deref(spec.BackoffLimit, -1) != 0 || ptr.Deref(spec.ActiveDeadlineSeconds, 0) != 7200 || spec.TTLSecondsAfterFinished != nil {
		t.Errorf("Job spec: suspend %v, backoffLimit %v, activeDeadlineSeconds %v, ttl %v; want false, 0, 7200, unset",
			spec.Suspend, spec.BackoffLimit, spec.ActiveDeadlineSeconds, spec.TTLSecondsAfterFinished)
	}
	pod := spec.Template.Spec
	if pod.ServiceAccountName != api.ServiceAccountName(id) || !ptr.Deref(pod.AutomountServiceAccountToken, false) || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod identity: sa %q automount %v restart %s", pod.ServiceAccountName, pod.AutomountServiceAccountToken, pod.RestartPolicy)
	}
	psc := pod.SecurityContext
	if !ptr.Deref(psc.RunAsNonRoot, false) || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v is not restricted", psc)
	}
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("pod has %d containers, %d init containers; want 1, 0", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	csc := c.SecurityContext
	if c.Image != "example.test/terraform-runner:test" || ptr.Deref(csc.AllowPrivilegeEscalation, true) || !ptr.Deref(csc.ReadOnlyRootFilesystem, false) ||
		!ptr.Deref(csc.RunAsNonRoot, false) || csc.Capabilities == nil || !cmp.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) != 0 ||
		ptr.Deref(csc.Privileged, false) {
		t.Errorf("container image %q securityContext %+v", c.Image, csc)
	}
	env := map[string]string{}
	for _, v := range c.Env {
		switch {
		case v.ValueFrom == nil:
			env[v.Name] = v.Value
		case v.ValueFrom.FieldRef != nil:
			env[v.Name] = "fieldRef:" + v.ValueFrom.FieldRef.FieldPath
		default:
			t.Errorf("env %s comes from %+v: only the downward API is allowed", v.Name, v.ValueFrom)
		}
	}
	wantEnv := map[string]string{
		api.EnvRunID: id, api.EnvOperation: "apply", api.EnvTopology: "vanilla_kubeadm", api.EnvRegion: "eu-north-1",
		api.EnvStateBucket: "kubeopera-terraform-state-prod-1-" + testFingerprint, api.EnvWorkspaceFingerprint: testFingerprint, api.EnvModuleDir: jobs.ModuleMountPath,
		api.EnvModulesDir: "/modules", api.EnvCredentialsDir: jobs.CredentialsMountPath,
		api.EnvOutputsSecret: api.OutputsSecretName(id), api.EnvNamespace: "fieldRef:metadata.namespace",
		"HOME": jobs.HomeDir, "TMPDIR": jobs.TmpDir, "TF_IN_AUTOMATION": "1", "TF_INPUT": "0",
	}
	if d := cmp.Diff(wantEnv, env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if len(c.EnvFrom) != 0 {
		t.Errorf("envFrom %+v: credentials are mounted, never env", c.EnvFrom)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = fmt.Sprintf("%s ro=%v", m.MountPath, m.ReadOnly)
	}
	wantMounts := map[string]string{
		"module": jobs.ModuleMountPath + " ro=true", "credentials": jobs.CredentialsMountPath + " ro=true",
		"work": jobs.WorkDir + " ro=false", "home": jobs.HomeDir + " ro=false", "tmp": jobs.TmpDir + " ro=false",
	}
	if d := cmp.Diff(wantMounts, mounts); d != "" {
		t.Errorf("volume mounts (-want +got):\n%s", d)
	}
	if c.WorkingDir != jobs.WorkDir {
		t.Errorf("workingDir %q", c.WorkingDir)
	}
	volumes := map[string]string{}
	for _, v := range pod.Volumes {
		switch {
		case v.ConfigMap != nil:
			volumes[v.Name] = "configMap:" + v.ConfigMap.Name
		case v.Secret != nil:
			volumes[v.Name] = "secret:" + v.Secret.SecretName
		case v.EmptyDir != nil:
			volumes[v.Name] = "emptyDir"
		default:
			volumes[v.Name] = "other"
		}
	}
	wantVolumes := map[string]string{
		"module": "configMap:" + api.ModuleConfigMapName(id), "credentials": "secret:" + api.CredentialsSecretName(id),
		"work": "emptyDir", "home": "emptyDir", "tmp": "emptyDir",
	}
	if d := cmp.Diff(wantVolumes, volumes); d != "" {
		t.Errorf("volumes (-want +got):\n%s", d)
	}
	raw, _ := json.Marshal(job)
	for _, v := range []string{accessKey, secretKey} {
		if strings.Contains(string(raw), v) {
			t.Errorf("the Job carries a credential value")
		}
	}

	// Everything else is owned by the Job and labelled; exactly these objects carry the run's
	// label.
	owned := func(kind string, m metav1.Object) {
		t.Helper()
		for k, v := range wantLabels {
			if m.GetLabels()[k] != v {
				t.Errorf("%s %s: label %s = %q, want %q", kind, m.GetName(), k, m.GetLabels()[k], v)
			}
		}
		refs := m.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != job.UID || refs[0].Kind != "Job" || !ptr.Deref(refs[0].Controller, false) {
			t.Errorf("%s %s: ownerReferences %+v, want the Job as controller", kind, m.GetName(), refs)
		}
	}
	sel := metav1.ListOptions{LabelSelector: api.LabelRun + "=" + id}
	secrets := must[*corev1.SecretList](t)(e.admin.CoreV1().Secrets(e.ns).List(e.ctx, sel))
	configMaps := must[*corev1.ConfigMapList](t)(e.admin.CoreV1().ConfigMaps(e.ns).List(e.ctx, sel))
	sas := must[*corev1.ServiceAccountList](t)(e.admin.CoreV1().ServiceAccounts(e.ns).List(e.ctx, sel))
	roles := must[*rbacv1.RoleList](t)(e.admin.RbacV1().Roles(e.ns).List(e.ctx, sel))
	bindings := must[*rbacv1.RoleBindingList](t)(e.admin.RbacV1().RoleBindings(e.ns).List(e.ctx, sel))
	jobList := must[*batchv1.JobList](t)(e.admin.BatchV1().Jobs(e.ns).List(e.ctx, sel))
	var names []string
	for _, s := range secrets.Items {
		owned("Secret", &s)
		names = append(names, "Secret/"+s.Name)
	}
	for _, cm := range configMaps.Items {
		owned("ConfigMap", &cm)
		names = append(names, "ConfigMap/"+cm.Name)
	}
	for _, sa := range sas.Items {
		owned("ServiceAccount", &sa)
		names = append(names, "ServiceAccount/"+sa.Name)
	}
	for _, r := range roles.Items {
		owned("Role", &r)
		names = append(names, "Role/"+r.Name)
	}
	for _, b := range bindings.Items {
		owned("RoleBinding", &b)
		names = append(names, "RoleBinding/"+b.Name)
	}
	for _, j := range jobList.Items {
		names = append(names, "Job/"+j.Name)
	}
	wantNames := []string{
		"Secret/" + api.CredentialsSecretName(id), "Secret/" + api.OutputsSecretName(id),
		"ConfigMap/" + api.ModuleConfigMapName(id), "ServiceAccount/" + api.ServiceAccountName(id),
		"Role/" + api.ServiceAccountName(id), "RoleBinding/" + api.ServiceAccountName(id), "Job/" + api.JobName(id),
	}
	if d := cmp.Diff(wantNames, names, cmpSorted); d != "" {
		t.Errorf("the run's objects (-want +got):\n%s", d)
	}

	cred := must[*corev1.Secret](t)(e.admin.CoreV1().Secrets(e.ns).Get(e.ctx, api.CredentialsSecretName(id), metav1.GetOptions{}))
	if d := cmp.Diff(map[string][]byte{"access_key": []byte(accessKey), "secret_key": []byte(secretKey)}, cred.Data); d != "" || !ptr.Deref(cred.Immutable, false) {
		t.Errorf("credential copy (immutable %v): only the credential's keys are copied (-want +got):\n%s", cred.Immutable, d)
	}
	module := must[*corev1.ConfigMap](t)(e.admin.CoreV1().ConfigMaps(e.ns).Get(e.ctx, api.ModuleConfigMapName(id), metav1.GetOptions{}))
	if d := cmp.Diff(must[map[string]string](t)(render(req)), module.Data); d != "" {
		t.Errorf("module ConfigMap (-want +got):\n%s", d)
	}
	outputs := must[*corev1.Secret](t)(e.admin.CoreV1().Secrets(e.ns).Get(e.ctx, api.OutputsSecretName(id), metav1.GetOptions{}))
	if len(outputs.Data) != 0 || len(outputs.Annotations) != 0 {
		t.Errorf("outputs Secret is not empty: %d keys, annotations %v", len(outputs.Data), outputs.Annotations)
	}
	role := must[*rbacv1.Role](t)(e.admin.RbacV1().Roles(e.ns).Get(e.ctx, api.ServiceAccountName(id), metav1.GetOptions{}))
	wantRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{api.OutputsSecretName(id)}, Verbs: []string{"get", "update"}}}
	if d := cmp.Diff(wantRules, role.Rules); d != "" {
		t.Errorf("runner Role (-want +got):\n%s", d)
	}
	binding := must[*rbacv1.RoleBinding](t)(e.admin.RbacV1().RoleBindings(e.ns).Get(e.ctx, api.ServiceAccountName(id), metav1.GetOptions{}))
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: api.ServiceAccountName(id), Namespace: e.ns}}
	if d := cmp.Diff(wantSubjects, binding.Subjects); d != "" || binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != api.ServiceAccountName(id) {
		t.Errorf("runner RoleBinding roleRef %+v (-want +got subjects):\n%s", binding.RoleRef, d)
	}
}

var cmpSorted = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestCreateRefusesBadRequests(t *testing.T) {
	renderErr := errors.New("template exploded")
	e := newEnv(t, func(c *jobs.Config) {
		c.Render = func(req api.CreateRequest) (map[string]string, error) {
			switch req.ClusterID {
			case "render-fails":
				return nil, renderErr
			case "render-refuses":
				return nil, &api.FieldError{Field: "instanceType", Message: "not offered in this region"}
			}
			return render(req)
		}
	})
	good := e.credential(e.ns, "good", map[string]string{"access_key": accessKey, "secret_key": secretKey})
	empty := e.credential(e.ns, "empty", map[string]string{"unrelated": "x"})
	half := e.credential(e.ns, "half", map[string]string{"access_key": accessKey})
	first := must[api.Provision](t)(e.runs.Create(e.ctx, request(good)))

	tests := map[string]struct {
		mutate  func(*api.CreateRequest)
		field   string
		message string
	}{
		"invalid region":     {mutate: func(r *api.CreateRequest) { r.Region = "mars" }, field: "region"},
		"invalid namespace":  {mutate: func(r *api.CreateRequest) { r.CredentialSecretRef.Namespace = "Bad_NS" }, field: "credentialSecretRef.namespace"},
		"missing Secret":     {mutate: func(r *api.CreateRequest) { r.CredentialSecretRef.Name = "absent" }, field: "credentialSecretRef", message: "not found"},
		"no credential keys": {mutate: func(r *api.CreateRequest) { r.CredentialSecretRef = empty }, field: "credentialSecretRef", message: "holds no credential"},
		"half an access key": {mutate: func(r *api.CreateRequest) { r.CredentialSecretRef = half }, field: "credentialSecretRef", message: "both"},
		"another run's credential copy": {mutate: func(r *api.CreateRequest) {
			r.CredentialSecretRef = api.SecretRef{Namespace: e.ns, Name: api.CredentialsSecretName(first.ID)}
		}, field: "credentialSecretRef", message: "belongs to a provisioning run"},
		"another run's outputs": {mutate: func(r *api.CreateRequest) {
			r.CredentialSecretRef = api.SecretRef{Namespace: e.ns, Name: api.OutputsSecretName(first.ID)}
		}, field: "credentialSecretRef", message: "belongs to a provisioning run"},
		"renderer refuses": {mutate: func(r *api.CreateRequest) { r.ClusterID = "render-refuses" }, field: "instanceType"},
		"renderer fails":   {mutate: func(r *api.CreateRequest) { r.ClusterID = "render-fails" }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := request(good)
			tc.mutate(&req)
			_, err := e.runs.Create(e.ctx, req)
			var fe *api.FieldError
			switch {
			case tc.field == "":
				if !errors.Is(err, renderErr) || errors.As(err, &fe) {
					t.Fatalf("got %v, want the renderer's error, not a FieldError", err)
				}
			case !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Message, tc.message):
				t.Fatalf("got %v, want a FieldError on %s saying %q", err, tc.field, tc.message)
			}
			if err != nil && (strings.Contains(err.Error(), accessKey) || strings.Contains(err.Error(), secretKey)) {
				t.Errorf("error %q carries a credential value", err)
			}
		})
	}
	jobList := must[*batchv1.JobList](t)(e.admin.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{}))
	if len(jobList.Items) != 1 {
		t.Errorf("refused requests left Jobs behind: %d Jobs", len(jobList.Items))
	}
}

func TestRunnerIdentityReachesItsOutputsOnly(t *testing.T) {
	e := newEnv(t)
	a, b := e.start(), e.start(cluster("prod-2"))
	runnerA := must[kubernetes.Interface](t)(jobruntest.ServiceAccountClient(backend, e.ns, api.ServiceAccountName(a.ID)))
	secrets := runnerA.CoreV1().Secrets(e.ns)

	out, err := secrets.Get(e.ctx, api.OutputsSecretName(a.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the runner cannot get its outputs Secret: %v", err)
	}
	out.Annotations = map[string]string{api.AnnotationPhase: "planning"}
	out.Data = map[string][]byte{api.OutputsKubeconfig: []byte("kubeconfig")}
	if _, err := secrets.Update(e.ctx, out, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the runner cannot update its outputs Secret: %v", err)
	}

	forbidden := map[string]func() error{
		"get its credential Secret": func() error {
			_, err := secrets.Get(e.ctx, api.CredentialsSecretName(a.ID), metav1.GetOptions{})
			return err
		},
		"get another run's outputs": func() error {
			_, err := secrets.Get(e.ctx, api.OutputsSecretName(b.ID), metav1.GetOptions{})
			return err
		},
		"update another run's outputs": func() error {
			other := must[*corev1.Secret](t)(e.admin.CoreV1().Secrets(e.ns).Get(e.ctx, api.OutputsSecretName(b.ID), metav1.GetOptions{}))
			other.Annotations = map[string]string{api.AnnotationPhase: "failed"}
			_, err := secrets.Update(e.ctx, other, metav1.UpdateOptions{})
			return err
		},
		"get another run's credential": func() error {
			_, err := secrets.Get(e.ctx, api.CredentialsSecretName(b.ID), metav1.GetOptions{})
			return err
		},
		"list Secrets": func() error {
			_, err := secrets.List(e.ctx, metav1.ListOptions{})
			return err
		},
		"create a Secret": func() error {
			_, err := secrets.Create(e.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		"delete its outputs": func() error {
			return secrets.Delete(e.ctx, api.OutputsSecretName(a.ID), metav1.DeleteOptions{})
		},
		"patch its outputs": func() error {
			_, err := secrets.Patch(e.ctx, api.OutputsSecretName(a.ID), "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		},
		"read its module": func() error {
			_, err := runnerA.CoreV1().ConfigMaps(e.ns).Get(e.ctx, api.ModuleConfigMapName(a.ID), metav1.GetOptions{})
			return err
		},
		"read its Job": func() error {
			_, err := runnerA.BatchV1().Jobs(e.ns).Get(e.ctx, api.JobName(a.ID), metav1.GetOptions{})
			return err
		},
	}
	for name, call := range forbidden {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the runner may %s: got %v, want Forbidden", name, err)
		}
	}
}

func TestGetFollowsTheJobAndTheRunner(t *testing.T) {
	e := newEnv(t)
	const tfError = "Error: creating EC2 VPC: operation error EC2: CreateVpc, https response error StatusCode: 403, api error UnauthorizedOperation"

	t.Run("success", func(t *testing.T) {
		id := e.start().ID
		steps := []struct {
			act     func() error
			status  api.Status
			message string
		}{
			{func() error { return nil }, api.StatusQueued, "waiting for the runner to start"},
			{func() error {
				if _, err := e.jobCtl.Start(e.ctx, id); err != nil {
					return err
				}
				_, err := e.jobCtl.CreatePod(e.ctx, id, &corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
					Name: jobs.ContainerName, Image: "example.test/terraform-runner:test",
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}},
				}}})
				return err
			}, api.StatusQueued, "ImagePullBackOff"},
			{func() error { return e.runner.Report(e.ctx, id, "planning", "terraform plan", "") }, api.StatusPlanning, "terraform plan"},
			{func() error { return e.runner.Report(e.ctx, id, "applying", "terraform apply", "") }, api.StatusApplying, "terraform apply"},
			{func() error { return e.runner.Report(e.ctx, id, "waiting-for-kubeconfig", "waiting for SSM", "") }, api.StatusApplying, "waiting for SSM"},
			{func() error {
				return e.runner.Report(e.ctx, id, "succeeded", "kubeconfig published", "apiVersion: v1\nkind: Config\n")
			}, api.StatusApplying, "kubeconfig published"},
			{func() error { _, err := e.jobCtl.Complete(e.ctx, id); return err }, api.StatusSucceeded, "kubeconfig published"},
		}
		for i, s := range steps {
			if err := s.act(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			p := e.get(id)
			if p.Status != s.status || !strings.Contains(p.Message, s.message) {
				t.Fatalf("step %d: got %s %q, want %s with %q", i, p.Status, p.Message, s.status, s.message)
			}
			if p.Status != api.StatusSucceeded {
				if _, err := e.runs.Kubeconfig(e.ctx, id); !isNotDone(err, p.Status) {
					t.Fatalf("step %d: Kubeconfig before success: got %v, want NotDoneError(%s)", i, err, p.Status)
				}
			}
		}
		p := e.get(id)
		if p.StartedAt == nil || p.FinishedAt == nil || p.FinishedAt.Before(*p.StartedAt) {
			t.Errorf("startedAt %v finishedAt %v", p.StartedAt, p.FinishedAt)
		}
		kc, err := e.runs.Kubeconfig(e.ctx, id)
		if err != nil || kc != "apiVersion: v1\nkind: Config\n" {
			t.Fatalf("Kubeconfig after success: %q, %v", kc, err)
		}
	})

	t.Run("Terraform fails", func(t *testing.T) {
		id := e.start().ID
		must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, id))
		if err := e.runner.Report(e.ctx, id, "failed", tfError, ""); err != nil {
			t.Fatal(err)
		}
		must[*batchv1.Job](t)(e.jobCtl.Fail(e.ctx, id, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
		p := e.get(id)
		if p.Status != api.StatusFailed || p.Message != tfError || p.FinishedAt == nil {
			t.Fatalf("got %+v, want failed with Terraform's error", p)
		}
		if _, err := e.runs.Kubeconfig(e.ctx, id); !isNotDone(err, api.StatusFailed) {
			t.Fatalf("Kubeconfig of a failed run: %v", err)
		}
	})

	t.Run("runner killed without a word", func(t *testing.T) {
		id := e.start().ID
		must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, id))
		if err := e.runner.Report(e.ctx, id, "applying", "terraform apply", ""); err != nil {
			t.Fatal(err)
		}
		must[*corev1.Pod](t)(e.jobCtl.CreatePod(e.ctx, id, &corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name: jobs.ContainerName, Image: "example.test/terraform-runner:test",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
		}}}))
		must[*batchv1.Job](t)(e.jobCtl.Fail(e.ctx, id, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
		if p := e.get(id); p.Status != api.StatusFailed || !strings.Contains(p.Message, "exited with code 137 (OOMKilled)") {
			t.Fatalf("got %+v, want failed saying OOMKilled", p)
		}
	})

	t.Run("deadline exceeded", func(t *testing.T) {
		id := e.start().ID
		must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, id))
		if err := e.runner.Report(e.ctx, id, "waiting-for-kubeconfig", "waiting for SSM parameter admin_kubeconfig", ""); err != nil {
			t.Fatal(err)
		}
		must[*batchv1.Job](t)(e.jobCtl.Fail(e.ctx, id, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"))
		p := e.get(id)
		if p.Status != api.StatusFailed || !strings.Contains(p.Message, "did not finish within 2h0m0s") || !strings.Contains(p.Message, "admin_kubeconfig") {
			t.Fatalf("got %+v, want failed naming the deadline and the last phase", p)
		}
	})

	t.Run("destroy publishes no kubeconfig", func(t *testing.T) {
		id := e.start(func(r *api.CreateRequest) { r.Operation = api.OperationDestroy }).ID
		if err := e.runner.Report(e.ctx, id, "succeeded", "destroyed", ""); err != nil {
			t.Fatal(err)
		}
		must[*batchv1.Job](t)(e.jobCtl.Complete(e.ctx, id))
		p := e.get(id)
		if p.Status != api.StatusSucceeded || p.Operation != api.OperationDestroy {
			t.Fatalf("got %+v", p)
		}
		if _, err := e.runs.Kubeconfig(e.ctx, id); !errors.Is(err, jobs.ErrNoKubeconfig) {
			t.Fatalf("Kubeconfig of a destroy run: %v, want ErrNoKubeconfig", err)
		}
	})

	t.Run("unknown IDs", func(t *testing.T) {
		for _, id := range []string{"zzzzzzzzzz", "not-an-id", "", "../../x"} {
			if _, err := e.runs.Get(e.ctx, id); !errors.Is(err, jobrun.ErrNotFound) {
				t.Errorf("Get(%q): %v, want ErrNotFound", id, err)
			}
			if _, err := e.runs.Kubeconfig(e.ctx, id); !errors.Is(err, jobrun.ErrNotFound) {
				t.Errorf("Kubeconfig(%q): %v, want ErrNotFound", id, err)
			}
			if _, err := e.runs.Logs(e.ctx, id); !errors.Is(err, jobrun.ErrNotFound) {
				t.Errorf("Logs(%q): %v, want ErrNotFound", id, err)
			}
		}
	})
}

func isNotDone(err error, status api.Status) bool {
	var nd *jobs.NotDoneError
	return errors.As(err, &nd) && nd.Status == status
}

// Logs cannot be read for real here: the apiserver proxies pods/log to the pod's kubelet, and
// there is none. The test covers the way there: no pod (ErrNoPod); a pod not yet scheduled (the
// apiserver answers an empty log); a pod bound to a node (playing the scheduler) whose kubelet
// the apiserver cannot reach (its error, naming the pod).
func TestLogsNeedAPod(t *testing.T) {
	e := newEnv(t)
	id := e.start().ID
	if _, err := e.runs.Logs(e.ctx, id); !errors.Is(err, jobs.ErrNoPod) {
		t.Fatalf("Logs without a pod: %v, want ErrNoPod", err)
	}
	pod := must[*corev1.Pod](t)(e.jobCtl.CreatePod(e.ctx, id, nil))
	rc, err := e.runs.Logs(e.ctx, id)
	if err != nil {
		t.Fatalf("Logs of an unscheduled pod: %v", err)
	}
	b, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || len(b) != 0 {
		t.Fatalf("log of an unscheduled pod: %q, %v; want empty", b, err)
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-without-kubelet"}}
	if err := e.admin.CoreV1().Pods(e.ns).Bind(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err = e.runs.Logs(e.ctx, id)
	if err == nil {
		_ = rc.Close()
		t.Fatal("Logs of a pod on a node without a kubelet succeeded")
	}
	if errors.Is(err, jobs.ErrNoPod) || !strings.Contains(err.Error(), "pod "+pod.Name) {
		t.Fatalf("Logs of a pod on a node without a kubelet: %v, want the apiserver's error naming the pod", err)
	}
}

func TestSweepDeletesOldFinishedRunsOnly(t *testing.T) {
	e := newEnv(t)
	// Four clusters: one run at a time per cluster.
	succeeded, failed, running, queued := e.start().ID, e.start(cluster("prod-2")).ID, e.start(cluster("prod-3")).ID, e.start(cluster("prod-4")).ID
	must[*batchv1.Job](t)(e.jobCtl.Complete(e.ctx, succeeded))
	must[*batchv1.Job](t)(e.jobCtl.Fail(e.ctx, failed, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, running))
	// A run whose Create stopped before un-suspending its Job (the provisioner died).
	abandoned := "abandoned1"
	must[*batchv1.Job](t)(e.admin.BatchV1().Jobs(e.ns).Create(e.ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: api.JobName(abandoned), Labels: map[string]string{api.LabelRun: abandoned}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "x"}},
		}}},
	}, metav1.CreateOptions{}))

	const retention = 168 * time.Hour
	if n, err := e.runs.Sweep(e.ctx, retention); err != nil || n != 0 {
		t.Fatalf("Sweep right after the runs ended: deleted %d, %v; want 0", n, err)
	}
	e.clock.Set(time.Now().Add(retention + time.Hour))
	n, err := e.runs.Sweep(e.ctx, retention)
	if err != nil || n != 3 {
		t.Fatalf("Sweep after the retention: deleted %d, %v; want 3 (succeeded, failed, abandoned)", n, err)
	}
	for _, id := range []string{succeeded, failed, abandoned} {
		if _, err := e.runs.Get(e.ctx, id); !errors.Is(err, jobrun.ErrNotFound) {
			t.Errorf("Get(%s) after Sweep: %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range []string{running, queued} {
		if p, err := e.runs.Get(e.ctx, id); err != nil || p.Status.Done() {
			t.Errorf("run %s that has not ended: %+v, %v", id, p, err)
		}
	}
	// The garbage collector (kube-controller-manager's) deletes what the swept Jobs owned.
	framework.Eventually(t, time.Minute, "the swept runs' objects to be garbage-collected", func() (bool, string) {
		var left []string
		for _, id := range []string{succeeded, failed} {
			sel := metav1.ListOptions{LabelSelector: api.LabelRun + "=" + id}
			s, _ := e.admin.CoreV1().Secrets(e.ns).List(e.ctx, sel)
			cm, _ := e.admin.CoreV1().ConfigMaps(e.ns).List(e.ctx, sel)
			sa, _ := e.admin.CoreV1().ServiceAccounts(e.ns).List(e.ctx, sel)
			ro, _ := e.admin.RbacV1().Roles(e.ns).List(e.ctx, sel)
			rb, _ := e.admin.RbacV1().RoleBindings(e.ns).List(e.ctx, sel)
			if n := len(s.Items) + len(cm.Items) + len(sa.Items) + len(ro.Items) + len(rb.Items); n > 0 {
				left = append(left, fmt.Sprintf("%s: %d objects", id, n))
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	for _, id := range []string{running, queued} {
		if _, err := e.admin.CoreV1().Secrets(e.ns).Get(e.ctx, api.CredentialsSecretName(id), metav1.GetOptions{}); err != nil {
			t.Errorf("run %s lost its credential Secret: %v", id, err)
		}
	}
	if _, err := e.runs.Sweep(e.ctx, 0); err == nil {
		t.Error("Sweep with no retention did not refuse")
	}
}
