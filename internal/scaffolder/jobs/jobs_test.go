package jobs_test

// These tests run the run store on a real kube-apiserver with etcd and a kube-controller-manager
// running only the namespace and garbage-collector controllers (framework.StartBackendIn). There
// is no kubelet and no Job controller: Jobs never start by themselves. jobruntest.JobController
// writes Job status and pods as the Job controller would, and jobstest.Runner writes the status
// Secret as cmd/scaffold-runner would, through the run's own ServiceAccount.

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	provisionerapi "github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs/jobstest"
	"github.com/kubeopera/kubeopera/test/framework"
)

// backend is the admin config of the package's backend cluster; nil under -short.
var backend *rest.Config

func TestMain(m *testing.M) {
	framework.RunWithBackend(m, "scaffolder-jobs", func(c *rest.Config) { backend = c })
}

// Values of the named Secrets: never in a Job spec, never in an error.
const (
	kubeconfigValue = "apiVersion: v1\nkind: Config\nclusters: [{name: target, cluster: {server: https://target.example}}]\n"
	gitPassword     = "git-password-value-0123"
	gitToken        = "git-bearer-token-value-4567"
	dockerConfig    = `{"auths":{"registry.example.com":{"auth":"cmVnaXN0cnk6cHVsbC12YWx1ZQ=="}}}`
)

// The workspace and the object a test's scaffolds are for.
const (
	testWorkspace = "1bg4baqdjkcw9lz4"
	testOwnerUID  = "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f"
)

// env is one test's jobs namespace, store and actors.
type env struct {
	t      *testing.T
	ctx    context.Context
	admin  kubernetes.Interface
	ns     string
	clock  *testingclock.FakeClock
	runs   *jobs.Client
	jobCtl jobruntest.JobController
	runner jobstest.Runner
}

func newEnv(t *testing.T, opts ...func(*jobs.Config)) *env {
	t.Helper()
	framework.SkipWithoutServers(t)
	e := &env{t: t, ctx: t.Context(), admin: kubernetes.NewForConfigOrDie(backend), clock: testingclock.NewFakeClock(time.Now())}
	e.ns = e.namespace("jobs")
	cfg := jobs.Config{Namespace: e.ns, RunnerImage: "example.test/scaffold-runner:test", Now: e.clock.Now}
	for _, o := range opts {
		o(&cfg)
	}
	e.runs = must[*jobs.Client](t)(jobs.New(e.admin, cfg))
	e.jobCtl = jobruntest.JobController{Client: e.admin, Namespace: e.ns, JobName: api.JobName}
	e.runner = jobstest.Runner{Config: backend, Namespace: e.ns}
	return e
}

// namespace creates a namespace named prefix-<random> for this test.
func (e *env) namespace(prefix string) string {
	e.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(8)}}
	must[*corev1.Namespace](e.t)(e.admin.CoreV1().Namespaces().Create(e.ctx, ns, metav1.CreateOptions{}))
	return ns.Name
}

// secret creates a Secret like the manager's copies in kcp-<fp>.
func (e *env) secret(ns, name string, typ corev1.SecretType, data map[string]string, labels map[string]string) api.SecretRef {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Type: typ, StringData: data}
	must[*corev1.Secret](e.t)(e.admin.CoreV1().Secrets(ns).Create(e.ctx, s, metav1.CreateOptions{}))
	return api.SecretRef{Namespace: ns, Name: name}
}

func (e *env) kubeconfig(ns string) api.SecretRef {
	return e.secret(ns, "hostcluster-prod-1-kubeconfig-"+rand.String(4), corev1.SecretTypeOpaque, map[string]string{api.KubeconfigKey: kubeconfigValue, "note": "stays behind"}, nil)
}

func request(kubeconfig api.SecretRef) api.Request {
	return api.Request{
		ClusterID: "prod-1", Slug: "prod-1", Domain: "prod-1.example.com", Region: "eu-north-1",
		RepoURL: "https://git.example.com/acme/fleet.git", Path: "fluxcd/clusters/prod-1",
		KubeconfigSecretRef: kubeconfig, Workspace: testWorkspace, OwnerUID: testOwnerUID,
	}
}

func (e *env) start() api.Scaffold {
	e.t.Helper()
	return must[api.Scaffold](e.t)(e.runs.Create(e.ctx, request(e.kubeconfig(e.ns))))
}

func (e *env) get(id string) api.Scaffold {
	e.t.Helper()
	return must[api.Scaffold](e.t)(e.runs.Get(e.ctx, id))
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

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, v := range c.Env {
		if v.ValueFrom != nil {
			m[v.Name] = "fieldRef:" + v.ValueFrom.FieldRef.FieldPath
			continue
		}
		m[v.Name] = v.Value
	}
	return m
}

func TestCreateMakesTheRunsObjects(t *testing.T) {
	e := newEnv(t, func(c *jobs.Config) {
		c.TemplatesConfigMap = "admin-templates"
		c.ChartMirror = "https://charts.mirror.example"
		c.AllowNetworks = "10.0.0.0/8"
		c.SealedSecretsTimeout = 5 * time.Minute
	})
	kcp := e.namespace("kcp")
	req := request(e.kubeconfig(kcp))
	req.Branch = "fleet"
	req.GitCredentialsSecretRef = ptr.To(e.secret(kcp, "hostcluster-prod-1-git-credentials", corev1.SecretTypeOpaque,
		map[string]string{"username": "bot", "password": gitPassword, "caFile": "not copied"}, nil))
	req.RegistryPullSecretRef = ptr.To(e.secret(kcp, "hostcluster-prod-1-registry-pull", corev1.SecretTypeDockerConfigJson,
		map[string]string{corev1.DockerConfigJsonKey: dockerConfig}, nil))
	s := must[api.Scaffold](t)(e.runs.Create(e.ctx, req))
	if !jobrun.ValidID(s.ID) || s.Status != api.StatusQueued || !s.BelongsTo(testWorkspace, testOwnerUID) || s.ClusterID != "prod-1" {
		t.Fatalf("Create: %+v", s)
	}
	id := s.ID

	job := must[*batchv1.Job](t)(e.admin.BatchV1().Jobs(e.ns).Get(e.ctx, api.JobName(id), metav1.GetOptions{}))
	if ptr.Deref(job.Spec.Suspend, true) || ptr.Deref(job.Spec.BackoffLimit, -1) != 0 || ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0) != 1800 {
		t.Errorf("Job spec: suspend %v, backoffLimit %v, activeDeadlineSeconds %v", job.Spec.Suspend, job.Spec.BackoffLimit, job.Spec.ActiveDeadlineSeconds)
	}
	wantLabels := map[string]string{api.LabelRun: id, api.LabelCluster: "prod-1", api.LabelOwnerUID: testOwnerUID, "app.kubernetes.io/managed-by": "kubeopera-gitops-scaffolder"}
	if !maps.Equal(job.Labels, wantLabels) || job.Annotations[api.AnnotationWorkspace] != testWorkspace || job.Annotations[api.AnnotationClusterID] != "prod-1" {
		t.Errorf("Job labels %v, annotations %v", job.Labels, job.Annotations)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	wantEnv := map[string]string{
		api.EnvRunID: id, api.EnvClusterID: "prod-1", api.EnvSlug: "prod-1", api.EnvDomain: "prod-1.example.com",
		api.EnvRegion: "eu-north-1", api.EnvRepoURL: "https://git.example.com/acme/fleet.git", api.EnvBranch: "fleet",
		api.EnvPath: "fluxcd/clusters/prod-1", api.EnvInputsDir: jobs.InputsMountPath, api.EnvStatusSecret: api.StatusSecretName(id),
		api.EnvNamespace: "fieldRef:metadata.namespace", api.EnvTemplatesDir: jobs.TemplatesMountPath,
		api.EnvChartMirror: "https://charts.mirror.example", api.EnvAllowNetworks: "10.0.0.0/8", api.EnvSealedSecretsTimeout: "5m0s",
		"HOME": jobs.HomeDir, "TMPDIR": jobs.TmpDir,
	}
	if got := envOf(c); !maps.Equal(got, wantEnv) {
		t.Errorf("env:\n got %v\nwant %v", got, wantEnv)
	}
	if c.Image != "example.test/scaffold-runner:test" || c.Name != jobs.ContainerName || pod.ServiceAccountName != api.ServiceAccountName(id) {
		t.Errorf("container %s %s as %s", c.Name, c.Image, pod.ServiceAccountName)
	}
	sc := c.SecurityContext
	if !*pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		*sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("security contexts: pod %+v, container %+v", pod.SecurityContext, sc)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for _, p := range []string{jobs.InputsMountPath, jobs.TemplatesMountPath} {
		if !mounts[p].ReadOnly {
			t.Errorf("%s is not mounted read-only: %+v", p, mounts[p])
		}
	}
	for _, p := range []string{jobs.WorkDir, jobs.HomeDir, jobs.TmpDir} {
		if _, ok := mounts[p]; !ok {
			t.Errorf("no emptyDir at %s", p)
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes["inputs"].Secret; v == nil || v.SecretName != api.InputsSecretName(id) || *v.DefaultMode != 0o440 {
		t.Errorf("inputs volume: %+v", volumes["inputs"])
	}
	if v := volumes["templates"].ConfigMap; v == nil || v.Name != "admin-templates" {
		t.Errorf("templates volume: %+v", volumes["templates"])
	}
	raw := string(must[[]byte](t)(json.Marshal(job)))
	for _, v := range []string{kubeconfigValue, gitPassword, dockerConfig, "bot"} {
		if strings.Contains(raw, v) {
			t.Errorf("the Job carries a Secret's value %q", v)
		}
	}

	inputs := must[*corev1.Secret](t)(e.admin.CoreV1().Secrets(e.ns).Get(e.ctx, api.InputsSecretName(id), metav1.GetOptions{}))
	wantInputs := map[string]string{api.InputKubeconfig: kubeconfigValue, api.InputGitUsername: "bot", api.InputGitPassword: gitPassword, api.InputRegistryPull: dockerConfig}
	got := map[string]string{}
	for k, v := range inputs.Data {
		got[k] = string(v)
	}
	if !maps.Equal(got, wantInputs) || !ptr.Deref(inputs.Immutable, false) {
		t.Errorf("inputs Secret: keys %v, immutable %v", slices.Sorted(maps.Keys(got)), inputs.Immutable)
	}
	status := must[*corev1.Secret](t)(e.admin.CoreV1().Secrets(e.ns).Get(e.ctx, api.StatusSecretName(id), metav1.GetOptions{}))
	if len(status.Data) != 0 || len(status.Annotations) != 0 {
		t.Errorf("status Secret is not empty: %v %v", status.Data, status.Annotations)
	}
	for _, o := range []metav1.Object{inputs, status,
		must[*corev1.ServiceAccount](t)(e.admin.CoreV1().ServiceAccounts(e.ns).Get(e.ctx, api.ServiceAccountName(id), metav1.GetOptions{}))} {
		if !metav1.IsControlledBy(o, job) || o.GetLabels()[api.LabelRun] != id {
			t.Errorf("%s is not the run's: owners %v, labels %v", o.GetName(), o.GetOwnerReferences(), o.GetLabels())
		}
	}
	role := must[*rbacv1.Role](t)(e.admin.RbacV1().Roles(e.ns).Get(e.ctx, api.ServiceAccountName(id), metav1.GetOptions{}))
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].ResourceNames, []string{api.StatusSecretName(id)}) || !slices.Equal(role.Rules[0].Verbs, []string{"get", "update"}) {
		t.Errorf("the runner's Role: %+v", role.Rules)
	}

	// A git token, and the defaults: branch main, none of the optional environment.
	plain := newEnv(t)
	req = request(plain.kubeconfig(plain.ns))
	req.GitCredentialsSecretRef = ptr.To(plain.secret(plain.ns, "git-token", corev1.SecretTypeOpaque, map[string]string{"bearerToken": gitToken}, nil))
	s = must[api.Scaffold](t)(plain.runs.Create(plain.ctx, req))
	job = must[*batchv1.Job](t)(plain.admin.BatchV1().Jobs(plain.ns).Get(plain.ctx, api.JobName(s.ID), metav1.GetOptions{}))
	penv := envOf(job.Spec.Template.Spec.Containers[0])
	if penv[api.EnvBranch] != jobs.DefaultBranch || ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0) != int64(jobs.DefaultActiveDeadline/time.Second) {
		t.Errorf("defaults: branch %q, deadline %v", penv[api.EnvBranch], job.Spec.ActiveDeadlineSeconds)
	}
	for _, k := range []string{api.EnvTemplatesDir, api.EnvChartMirror, api.EnvAllowNetworks, api.EnvSealedSecretsTimeout} {
		if _, ok := penv[k]; ok {
			t.Errorf("%s is set although the service has none", k)
		}
	}
	inputs = must[*corev1.Secret](t)(plain.admin.CoreV1().Secrets(plain.ns).Get(plain.ctx, api.InputsSecretName(s.ID), metav1.GetOptions{}))
	if string(inputs.Data[api.InputGitToken]) != gitToken || len(inputs.Data) != 2 {
		t.Errorf("inputs with a token: keys %v", slices.Sorted(maps.Keys(inputs.Data)))
	}
}

func TestCreateRefusesBadRequests(t *testing.T) {
	e := newEnv(t)
	kcp := e.namespace("kcp")
	kc := e.kubeconfig(kcp)
	noKey := e.secret(kcp, "no-kubeconfig", corev1.SecretTypeOpaque, map[string]string{"config": kubeconfigValue}, nil)
	noGit := e.secret(kcp, "no-git", corev1.SecretTypeOpaque, map[string]string{"username": "bot"}, nil)
	opaquePull := e.secret(kcp, "opaque-pull", corev1.SecretTypeOpaque, map[string]string{corev1.DockerConfigJsonKey: dockerConfig}, nil)
	scaffoldRun := e.secret(kcp, "scaffold-x-inputs", corev1.SecretTypeOpaque, map[string]string{api.KubeconfigKey: kubeconfigValue}, map[string]string{api.LabelRun: "abcdefghij"})
	provisionRun := e.secret(kcp, "provision-x-outputs", corev1.SecretTypeOpaque, map[string]string{api.KubeconfigKey: kubeconfigValue}, map[string]string{provisionerapi.LabelRun: "abcdefghij"})
	tests := map[string]struct {
		mutate  func(*api.Request)
		field   string
		message string
	}{
		"invalid slug":              {func(r *api.Request) { r.Slug = "Prod_1" }, "slug", "DNS label"},
		"kubeconfig missing":        {func(r *api.Request) { r.KubeconfigSecretRef.Name = "nothing-here" }, "kubeconfigSecretRef", "not found"},
		"kubeconfig without key":    {func(r *api.Request) { r.KubeconfigSecretRef = noKey }, "kubeconfigSecretRef", "holds no key kubeconfig"},
		"a scaffold's own Secret":   {func(r *api.Request) { r.KubeconfigSecretRef = scaffoldRun }, "kubeconfigSecretRef", "belongs to a run"},
		"a provisioning run's":      {func(r *api.Request) { r.KubeconfigSecretRef = provisionRun }, "kubeconfigSecretRef", "belongs to a run"},
		"git credentials missing":   {func(r *api.Request) { r.GitCredentialsSecretRef = &api.SecretRef{Namespace: kcp, Name: "nothing"} }, "gitCredentialsSecretRef", "not found"},
		"git username only":         {func(r *api.Request) { r.GitCredentialsSecretRef = &noGit }, "gitCredentialsSecretRef", "holds no git credentials"},
		"registry pull not docker":  {func(r *api.Request) { r.RegistryPullSecretRef = &opaquePull }, "registryPullSecretRef", "kubernetes.io/dockerconfigjson"},
		"secrets of two namespaces": {func(r *api.Request) { r.GitCredentialsSecretRef = &api.SecretRef{Namespace: e.ns, Name: "x"} }, "gitCredentialsSecretRef.namespace", "kubeconfig Secret's namespace"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := request(kc)
			tc.mutate(&req)
			_, err := e.runs.Create(e.ctx, req)
			var fe *api.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Message, tc.message) {
				t.Fatalf("got %v, want a FieldError on %s saying %q", err, tc.field, tc.message)
			}
			for _, v := range []string{kubeconfigValue, dockerConfig, "bot"} {
				if strings.Contains(err.Error(), v) {
					t.Errorf("error %q carries a value", err)
				}
			}
		})
	}
	if jobs := must[*batchv1.JobList](t)(e.admin.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{})); len(jobs.Items) != 0 {
		t.Errorf("refused requests left %d Jobs", len(jobs.Items))
	}
}

func TestGetFollowsTheJobAndTheRunner(t *testing.T) {
	e := newEnv(t)
	id := e.start().ID
	if s := e.get(id); s.Status != api.StatusQueued || s.Message != "waiting for the runner to start" {
		t.Errorf("before the Job controller: %+v", s)
	}
	// The Job controller made a pod that cannot pull its image: the pod says why.
	must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, id))
	must[*corev1.Pod](t)(e.jobCtl.CreatePod(e.ctx, id, &corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: jobs.ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}},
	}}}))
	if s := e.get(id); s.Status != api.StatusQueued || !strings.Contains(s.Message, "ImagePullBackOff") || s.StartedAt == nil {
		t.Errorf("image not pulled: %+v", s)
	}
	for _, step := range []string{api.StepCloning, api.StepInfrastructure, api.StepSealedSecrets, api.StepSealing} {
		if err := e.runner.Report(e.ctx, id, step, "", ""); err != nil {
			t.Fatal(err)
		}
		if s := e.get(id); s.Status != api.StatusRunning || s.Message == "" || s.Step != step {
			t.Errorf("step %s: %+v", step, s)
		}
	}
	const a, b = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	if err := e.runner.Report(e.ctx, id, api.StepSucceeded, "tree pushed at fluxcd/clusters/prod-1", a+" "+b); err != nil {
		t.Fatal(err)
	}
	must[*batchv1.Job](t)(e.jobCtl.Complete(e.ctx, id))
	s := e.get(id)
	if !s.Succeeded() || s.Message != "tree pushed at fluxcd/clusters/prod-1" || !slices.Equal(s.Commits, []string{a, b}) || s.FinishedAt == nil || s.Error != "" {
		t.Errorf("succeeded: %+v", s)
	}

	// A failed scaffold carries the runner's real error.
	id = e.start().ID
	must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, id))
	const pushError = "git push: remote: Permission to acme/fleet.git denied (403)"
	if err := e.runner.Report(e.ctx, id, api.StepFailed, pushError, ""); err != nil {
		t.Fatal(err)
	}
	must[*batchv1.Job](t)(e.jobCtl.Fail(e.ctx, id, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	if s := e.get(id); !s.Failed() || s.Error != pushError {
		t.Errorf("failed: %+v", s)
	}

	// OOMKilled without a word from the runner: the pod says it.
	id = e.start().ID
	must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, id))
	must[*corev1.Pod](t)(e.jobCtl.CreatePod(e.ctx, id, &corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: jobs.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
	}}}))
	must[*batchv1.Job](t)(e.jobCtl.Fail(e.ctx, id, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	if s := e.get(id); !s.Failed() || !strings.Contains(s.Error, "OOMKilled") {
		t.Errorf("OOMKilled: %+v", s)
	}

	for _, bad := range []string{"", "nothing123", "../../etc", "ABCDEFGHIJ"} {
		if _, err := e.runs.Get(e.ctx, bad); !errors.Is(err, jobrun.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", bad, err)
		}
	}
}

func TestRunnerIdentityReachesItsStatusOnly(t *testing.T) {
	e := newEnv(t)
	a, b := e.start().ID, e.start().ID
	runnerA := must[kubernetes.Interface](t)(jobruntest.ServiceAccountClient(backend, e.ns, api.ServiceAccountName(a)))
	if err := e.runner.Report(e.ctx, a, api.StepCloning, "", ""); err != nil {
		t.Fatalf("the runner cannot write its own status: %v", err)
	}
	denied := map[string]func() error{
		"read its inputs": func() error {
			_, err := runnerA.CoreV1().Secrets(e.ns).Get(e.ctx, api.InputsSecretName(a), metav1.GetOptions{})
			return err
		},
		"read another run's status": func() error {
			_, err := runnerA.CoreV1().Secrets(e.ns).Get(e.ctx, api.StatusSecretName(b), metav1.GetOptions{})
			return err
		},
		"list Secrets": func() error {
			_, err := runnerA.CoreV1().Secrets(e.ns).List(e.ctx, metav1.ListOptions{})
			return err
		},
	}
	for name, call := range denied {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the runner may %s: %v", name, err)
		}
	}
}

func TestSweepDeletesOldFinishedRunsOnly(t *testing.T) {
	e := newEnv(t)
	done, running := e.start().ID, e.start().ID
	must[*batchv1.Job](t)(e.jobCtl.Complete(e.ctx, done))
	must[*batchv1.Job](t)(e.jobCtl.Start(e.ctx, running))
	if n, err := e.runs.Sweep(e.ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("Sweep within the retention: %d, %v", n, err)
	}
	e.clock.SetTime(time.Now().Add(2 * time.Hour))
	if n, err := e.runs.Sweep(e.ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("Sweep past the retention: %d, %v", n, err)
	}
	if _, err := e.runs.Get(e.ctx, done); !errors.Is(err, jobrun.ErrNotFound) {
		t.Errorf("the swept run: %v", err)
	}
	if s := e.get(running); s.Status != api.StatusQueued {
		t.Errorf("the running run: %+v", s)
	}
}
