package sim_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/terraform/runner"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

const (
	tfRegion      = "eu-north-1"
	tfFingerprint = "d37f1981a6be"
)

// tfStateBucket is the runs' state bucket: the workspace tfFingerprint's.
var tfStateBucket = api.StateBucketName(tfFingerprint, "actors-test")

// Paths in the runner's container, as internal/provisioner/jobs mounts them (objects.go).
const (
	moduleMount      = "/provision/module"
	credentialsMount = "/provision/credentials"
	imageModulesDir  = "/modules"
	workDir          = "/work"
	homeDir          = "/home/runner"
	tmpDir           = "/tmp"
)

// backendBlock is the rendered module's S3 backend: the run's state bucket, S3-native locking.
func backendBlock(key string) string {
	return fmt.Sprintf(`terraform {
  backend "s3" {
    bucket       = %q
    key          = %q
    region       = %q
    use_lockfile = true
    encrypt      = true
  }
}
`, tfStateBucket, key, tfRegion)
}

// terraformEnv is what the RunnerJobs tests share: a backend, the AWS endpoint, the built
// runner and the actor running Jobs.
type terraformEnv struct {
	cs    kubernetes.Interface
	aws   *sim.AWS
	actor *sim.RunnerJobs
	user  sim.AWSCredentials
}

const jobsNamespace = api.DefaultJobsNamespace

func startTerraformEnv(t *testing.T) *terraformEnv {
	t.Helper()
	framework.SkipWithoutServers(t)
	tf, err := runner.PinnedTerraform(t.Context())
	if err != nil {
		t.Skipf("needs Terraform %s in PATH: %v", runner.TerraformVersion, err)
	}
	backend := framework.StartCluster(t, framework.ClusterOptions{})
	cs := kubernetes.NewForConfigOrDie(backend.Config)
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: jobsNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bin, err := framework.Command("terraform-runner")
	if err != nil {
		t.Fatal(err)
	}
	// The project's modules as the runner's image ships them; the test modules call one.
	modules := t.TempDir()
	if err := os.MkdirAll(filepath.Join(modules, "noop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(modules, "noop", "main.tf"), []byte(`variable "name" { type = string }
resource "terraform_data" "noop" { input = var.name }
output "name" { value = terraform_data.noop.output }
`), 0o644); err != nil {
		t.Fatal(err)
	}

	e := &terraformEnv{cs: cs, aws: sim.StartAWS(t)}
	e.user = e.aws.AddUser("kubeopera-provisioner")
	env := e.aws.Env()
	env[runner.EnvTerraformBinary] = tf
	env[runner.EnvSSMPollInterval] = "250ms"
	env[runner.EnvSSMPollTimeout] = "1m"
	e.actor = &sim.RunnerJobs{Backend: backend.Config, Namespace: jobsNamespace, RunnerBinary: bin, ModulesDir: modules, Env: env}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.actor.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("RunnerJobs.Run: %v", err)
		}
	})
	return e
}

// run is one provisioning run as the test starts it.
type run struct {
	id, topology string
	operation    api.Operation
	module       map[string]string
	credential   map[string][]byte
	// deadline is the Job's activeDeadlineSeconds.
	deadline *int64
}

// start creates a run's objects as the provisioner's jobs.Create does (internal/provisioner/jobs,
// doc.go and objects.go), with the test's module instead of a rendered one: the run's
// ServiceAccount, a Role that may only get and update the outputs Secret, the credential Secret,
// the module ConfigMap, the empty outputs Secret, and the Job (the same pod spec: volumes and
// modes, emptyDirs for the working directory, HOME and TMPDIR, the environment, security
// contexts), created suspended and resumed once everything it mounts exists. The objects are
// not owner-referenced to the Job here (nothing deletes them in this test).
func (e *terraformEnv) start(t *testing.T, r run) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{api.LabelRun: r.id, api.LabelOperation: string(r.operation)}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: jobsNamespace, Labels: labels}
	}
	sa := api.ServiceAccountName(r.id)
	objects := []func() error{
		func() error {
			_, err := e.cs.CoreV1().ServiceAccounts(jobsNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(sa), AutomountServiceAccountToken: ptr.To(true)}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := e.cs.RbacV1().Roles(jobsNamespace).Create(ctx, &rbacv1.Role{ObjectMeta: meta(sa), Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update"}, ResourceNames: []string{api.OutputsSecretName(r.id)},
			}}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := e.cs.RbacV1().RoleBindings(jobsNamespace).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: meta(sa),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: jobsNamespace}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := e.cs.CoreV1().Secrets(jobsNamespace).Create(ctx, &corev1.Secret{ObjectMeta: meta(api.CredentialsSecretName(r.id)), Data: r.credential}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := e.cs.CoreV1().ConfigMaps(jobsNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta(api.ModuleConfigMapName(r.id)), Data: r.module}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := e.cs.CoreV1().Secrets(jobsNamespace).Create(ctx, &corev1.Secret{ObjectMeta: meta(api.OutputsSecretName(r.id))}, metav1.CreateOptions{})
			return err
		},
		func() error {
			env := []corev1.EnvVar{
				{Name: api.EnvRunID, Value: r.id},
				{Name: api.EnvOperation, Value: string(r.operation)},
				{Name: api.EnvTopology, Value: r.topology},
				{Name: api.EnvRegion, Value: tfRegion},
				{Name: api.EnvStateBucket, Value: tfStateBucket},
				{Name: api.EnvWorkspaceFingerprint, Value: tfFingerprint},
				{Name: api.EnvModuleDir, Value: moduleMount},
				{Name: api.EnvModulesDir, Value: imageModulesDir},
				{Name: api.EnvCredentialsDir, Value: credentialsMount},
				{Name: api.EnvOutputsSecret, Value: api.OutputsSecretName(r.id)},
				{Name: api.EnvNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
				{Name: "HOME", Value: homeDir},
				{Name: "TMPDIR", Value: tmpDir},
				{Name: "TF_IN_AUTOMATION", Value: "1"},
				{Name: "TF_INPUT", Value: "0"},
			}
			deadline := r.deadline
			if deadline == nil {
				deadline = ptr.To[int64](600)
			}
			emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
			job := &batchv1.Job{
				ObjectMeta: meta(api.JobName(r.id)),
				Spec: batchv1.JobSpec{
					Suspend:               ptr.To(true),
					BackoffLimit:          ptr.To[int32](0),
					ActiveDeadlineSeconds: deadline,
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							ServiceAccountName:            sa,
							AutomountServiceAccountToken:  ptr.To(true),
							EnableServiceLinks:            ptr.To(false),
							RestartPolicy:                 corev1.RestartPolicyNever,
							TerminationGracePeriodSeconds: ptr.To[int64](120),
							SecurityContext: &corev1.PodSecurityContext{
								RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
							},
							Containers: []corev1.Container{{
								Name:       "terraform",
								Image:      "ghcr.io/kubeopera/terraform-runner:dev",
								WorkingDir: workDir,
								Env:        env,
								SecurityContext: &corev1.SecurityContext{
									AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
									Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
								},
								VolumeMounts: []corev1.VolumeMount{
									{Name: "module", MountPath: moduleMount, ReadOnly: true},
									{Name: "credentials", MountPath: credentialsMount, ReadOnly: true},
									{Name: "work", MountPath: workDir},
									{Name: "home", MountPath: homeDir},
									{Name: "tmp", MountPath: tmpDir},
								},
							}},
							Volumes: []corev1.Volume{
								{Name: "module", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: api.ModuleConfigMapName(r.id)}, DefaultMode: ptr.To[int32](0o444)}}},
								{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: api.CredentialsSecretName(r.id), DefaultMode: ptr.To[int32](0o440)}}},
								{Name: "work", VolumeSource: emptyDir},
								{Name: "home", VolumeSource: emptyDir},
								{Name: "tmp", VolumeSource: emptyDir},
							},
						},
					},
				},
			}
			if _, err := e.cs.BatchV1().Jobs(jobsNamespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := e.cs.BatchV1().Jobs(jobsNamespace).Patch(ctx, job.Name, types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{})
			return err
		},
	}
	for _, create := range objects {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
}

// phases watches run id's outputs Secret and returns a function giving the phases it went
// through so far, in order (each change once).
func (e *terraformEnv) phases(t *testing.T, id string) func() []string {
	t.Helper()
	w, err := e.cs.CoreV1().Secrets(jobsNamespace).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + api.OutputsSecretName(id)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ch := make(chan []string, 1)
	ch <- nil
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Secret)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			seen := <-ch
			if p := s.Annotations[api.AnnotationPhase]; p != "" && (len(seen) == 0 || seen[len(seen)-1] != p) {
				seen = append(seen, p)
			}
			ch <- seen
		}
	}()
	return func() []string {
		seen := <-ch
		ch <- seen
		return slices.Clone(seen)
	}
}

// wait waits for run id's Job to finish and returns it with the outputs Secret.
func (e *terraformEnv) wait(t *testing.T, id string) (*batchv1.Job, *corev1.Secret) {
	t.Helper()
	var job *batchv1.Job
	framework.Eventually(t, 3*time.Minute, "Job "+api.JobName(id)+" to finish", func() (bool, string) {
		var err error
		job, err = e.cs.BatchV1().Jobs(jobsNamespace).Get(t.Context(), api.JobName(id), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range job.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		out, _ := e.actor.Output(api.JobName(id))
		return false, fmt.Sprintf("status %+v; output:\n%s", job.Status, out)
	})
	s, err := e.cs.CoreV1().Secrets(jobsNamespace).Get(t.Context(), api.OutputsSecretName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job, s
}

// conditionTypes lists the Job's True conditions in order.
func conditionTypes(job *batchv1.Job) []string {
	var out []string
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			out = append(out, string(c.Type)+"/"+c.Reason)
		}
	}
	return out
}

// pod returns the one Pod of Job id.
func (e *terraformEnv) pod(t *testing.T, id string) *corev1.Pod {
	t.Helper()
	pods, err := e.cs.CoreV1().Pods(jobsNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + api.JobName(id)})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of Job %s: %v %v", api.JobName(id), pods, err)
	}
	return &pods.Items[0]
}

func (e *terraformEnv) staticKey() map[string][]byte {
	return map[string][]byte{api.CredentialAccessKey: []byte(e.user.AccessKeyID), api.CredentialSecretKey: []byte(e.user.SecretAccessKey + "\n")}
}

func eksModule(key, caB64 string) map[string]string {
	return map[string]string{
		"backend.tf": backendBlock(key),
		"main.tf": fmt.Sprintf(`module "vpc" {
  source = "./modules/noop"
  name   = "vpc"
}
resource "terraform_data" "cluster" { input = module.vpc.name }
output "cluster_name" { value = "c-eks" }
output "cluster_endpoint" { value = "https://ABCDEF.gr7.%s.eks.amazonaws.com" }
output "cluster_ca_certificate" { value = %q }
`, tfRegion, caB64),
	}
}

// TestRunnerJobs runs cmd/terraform-runner through the RunnerJobs actor on Jobs made as the
// provisioner makes them, against a real kube-apiserver, the AWS endpoint and the pinned
// Terraform: a vanilla_kubeadm-like run waits for the control plane's SSM parameter; an
// eks-like run builds the exec kubeconfig (twice: the second run converges without changes);
// a failing apply reports Terraform's error; an assume_role credential is used end to end; a
// destroy leaves the state empty.
func TestRunnerJobs(t *testing.T) {
	e := startTerraformEnv(t)
	ca := base64.StdEncoding.EncodeToString(framework.SelfSignedCA(t))

	t.Run("vanilla_kubeadm: the control plane's admin kubeconfig from SSM", func(t *testing.T) {
		const id, param = "vanilla1", "/kubeopera/c-vanilla/admin_kubeconfig"
		phases := e.phases(t, id)
		e.start(t, run{id: id, topology: api.TopologyVanillaKubeadm, operation: api.OperationApply, credential: e.staticKey(), module: map[string]string{
			"backend.tf": backendBlock("c-vanilla/terraform.tfstate"),
			"main.tf": `module "vpc" {
  source = "./modules/noop"
  name   = "vpc"
}
resource "terraform_data" "control_plane" { input = module.vpc.name }
output "admin_kubeconfig_parameter" { value = "` + param + `" }
`,
		}})
		// Terraform creates the parameter (seeded PENDING) while applying; the node publishes
		// its admin.conf a little later.
		framework.Eventually(t, 2*time.Minute, "phase applying", func() (bool, string) {
			p := phases()
			return slices.Contains(p, string(api.StatusApplying)), fmt.Sprint(p)
		})
		e.aws.SSM.Put(param, "SecureString", "PENDING")
		admin := []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: https://10.0.1.10:6443\n    certificate-authority-data: " + ca + "\ncontexts:\n- name: kubernetes-admin@kubernetes\n  context: {cluster: kubernetes, user: kubernetes-admin}\ncurrent-context: kubernetes-admin@kubernetes\nusers:\n- name: kubernetes-admin\n  user: {token: abc}\n")
		e.aws.SSM.PublishAdminKubeconfig(param, admin, 2*time.Second)

		job, out := e.wait(t, id)
		log, _ := e.actor.Output(api.JobName(id))
		if got := out.Annotations[api.AnnotationPhase]; got != string(api.StatusSucceeded) {
			t.Fatalf("phase %s: %s\n%s", got, out.Annotations[api.AnnotationMessage], log)
		}
		if string(out.Data[api.OutputsKubeconfig]) != string(admin) {
			t.Errorf("kubeconfig %q", out.Data[api.OutputsKubeconfig])
		}
		if want := []string{"planning", "applying", runner.PhaseWaitingForKubeconfig, "succeeded"}; !slices.Equal(phases(), want) {
			t.Errorf("phases %v, want %v", phases(), want)
		}
		var gets int
		for _, r := range e.aws.Requests("ssm") {
			if r.Operation == "GetParameter" && r.Resource == param {
				gets++
			}
		}
		if gets < 2 {
			t.Errorf("the runner read the parameter %d times; it must have waited for it", gets)
		}
		// The Job and its Pod, as the Job controller and the kubelet leave them.
		if want := []string{"SuccessCriteriaMet/CompletionsReached", "Complete/CompletionsReached"}; !slices.Equal(conditionTypes(job), want) {
			t.Errorf("Job conditions %v, want %v", conditionTypes(job), want)
		}
		if job.Status.Succeeded != 1 || job.Status.Active != 0 || job.Status.StartTime == nil || job.Status.CompletionTime == nil {
			t.Errorf("Job status %+v", job.Status)
		}
		pod := e.pod(t, id)
		term := pod.Status.ContainerStatuses[0].State.Terminated
		if pod.Status.Phase != corev1.PodSucceeded || term == nil || term.ExitCode != 0 || term.Reason != "Completed" || len(pod.Finalizers) != 0 || !metav1.IsControlledBy(pod, job) {
			t.Errorf("Pod %s: phase %s, state %+v, finalizers %v", pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses[0].State, pod.Finalizers)
		}
		// The state is in the bucket, the lock released; the bucket is configured.
		keys, _ := e.aws.S3.Keys(tfStateBucket)
		if !slices.Contains(keys, "c-vanilla/terraform.tfstate") || slices.Contains(keys, "c-vanilla/terraform.tfstate.tflock") {
			t.Errorf("bucket keys %v", keys)
		}
		if v, _ := e.aws.S3.Versioning(tfStateBucket); v != "Enabled" {
			t.Errorf("state bucket versioning %q", v)
		}
		if !strings.Contains(log, "Apply complete! Resources: 2 added") {
			t.Errorf("the Pod's log has no Terraform output:\n%s", log)
		}
	})

	t.Run("eks: an exec kubeconfig, and a second run changes nothing", func(t *testing.T) {
		for i, id := range []string{"eks1", "eks2"} {
			phases := e.phases(t, id)
			e.start(t, run{id: id, topology: api.TopologyEKS, operation: api.OperationApply, credential: e.staticKey(), module: eksModule("c-eks/terraform.tfstate", ca)})
			_, out := e.wait(t, id)
			if got := out.Annotations[api.AnnotationPhase]; got != string(api.StatusSucceeded) {
				log, _ := e.actor.Output(api.JobName(id))
				t.Fatalf("%s: phase %s: %s\n%s", id, got, out.Annotations[api.AnnotationMessage], log)
			}
			if want := []string{"planning", "applying", "succeeded"}; !slices.Equal(phases(), want) {
				t.Errorf("%s: phases %v, want %v", id, phases(), want)
			}
			cfg, err := clientcmd.Load(out.Data[api.OutputsKubeconfig])
			if err != nil {
				t.Fatal(err)
			}
			user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
			if cfg.Clusters["c-eks"].Server != "https://ABCDEF.gr7."+tfRegion+".eks.amazonaws.com" || user.Exec == nil || user.Exec.Command != runner.EKSTokenHelper ||
				!slices.Equal(user.Exec.Args, []string{"--cluster-name", "c-eks", "--region", tfRegion}) ||
				len(user.Exec.Env) != 2 || user.Exec.Env[0].Value != e.user.AccessKeyID || user.Exec.Env[1].Value != e.user.SecretAccessKey {
				t.Errorf("%s: kubeconfig\n%s", id, out.Data[api.OutputsKubeconfig])
			}
			log, _ := e.actor.Output(api.JobName(id))
			if i == 1 && !strings.Contains(log, "No changes.") {
				t.Errorf("the second run changed something:\n%s", log)
			}
		}
	})

	t.Run("a failing apply reports Terraform's error", func(t *testing.T) {
		const id = "failing1"
		e.start(t, run{id: id, topology: api.TopologyEKS, operation: api.OperationApply, credential: e.staticKey(), module: map[string]string{
			"backend.tf": backendBlock("c-failing/terraform.tfstate"),
			"main.tf": `resource "terraform_data" "cluster" { input = "c-failing" }
resource "terraform_data" "nodes" {
  input = terraform_data.cluster.id
  lifecycle {
    precondition {
      # Known only once the cluster exists: checked during apply.
      condition     = length(terraform_data.cluster.id) == 0
      error_message = "The node group cannot join cluster c-failing: instance quota exceeded."
    }
  }
}
output "cluster_name" { value = "c-failing" }
`,
		}})
		job, out := e.wait(t, id)
		msg := out.Annotations[api.AnnotationMessage]
		if out.Annotations[api.AnnotationPhase] != string(api.StatusFailed) || !strings.HasPrefix(msg, "terraform apply failed: exit status 1") ||
			!strings.Contains(msg, "Resource precondition failed") || !strings.Contains(msg, "instance quota exceeded.") {
			t.Errorf("phase %s, message:\n%s", out.Annotations[api.AnnotationPhase], msg)
		}
		if strings.Contains(msg, e.user.SecretAccessKey) || len(out.Data[api.OutputsKubeconfig]) != 0 {
			t.Error("a failed run published a kubeconfig or a secret")
		}
		if want := []string{"FailureTarget/BackoffLimitExceeded", "Failed/BackoffLimitExceeded"}; !slices.Equal(conditionTypes(job), want) {
			t.Errorf("Job conditions %v, want %v", conditionTypes(job), want)
		}
		if job.Status.Failed != 1 || job.Status.Active != 0 || job.Status.CompletionTime != nil {
			t.Errorf("Job status %+v", job.Status)
		}
		pod := e.pod(t, id)
		if term := pod.Status.ContainerStatuses[0].State.Terminated; pod.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 1 || term.Reason != "Error" {
			t.Errorf("Pod %s: phase %s, state %+v", pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses[0].State)
		}
		if log, _ := e.actor.Output(api.JobName(id)); !strings.Contains(log, "instance quota exceeded.") {
			t.Errorf("the Pod's log lacks Terraform's error:\n%s", log)
		}
	})

	t.Run("assume_role: every AWS call with the role's credentials", func(t *testing.T) {
		const id = "role1"
		role := e.aws.STS.AddRole("kubeopera-provisioning", "ext-42")
		before := len(e.aws.Requests(""))
		cred := e.staticKey()
		cred[api.CredentialRoleARN] = []byte(role)
		cred[api.CredentialExternalID] = []byte("ext-42")
		e.start(t, run{id: id, topology: api.TopologyEKS, operation: api.OperationApply, credential: cred, module: eksModule("c-role/terraform.tfstate", ca)})
		_, out := e.wait(t, id)
		if got := out.Annotations[api.AnnotationPhase]; got != string(api.StatusSucceeded) {
			log, _ := e.actor.Output(api.JobName(id))
			t.Fatalf("phase %s: %s\n%s", got, out.Annotations[api.AnnotationMessage], log)
		}
		calls := e.aws.STS.AssumeRoleCalls()
		if len(calls) != 1 || calls[0].RoleARN != role || calls[0].ExternalID != "ext-42" || calls[0].CallerAccessKeyID != e.user.AccessKeyID ||
			calls[0].RoleSessionName != "kubeopera-provision-"+id || calls[0].Issued.AccessKeyID == "" {
			t.Fatalf("AssumeRole calls %+v", calls)
		}
		session := calls[0].Issued.AccessKeyID
		var s3Calls, terraformIdentity int
		for _, r := range e.aws.Requests("")[before:] {
			switch {
			case r.Service == "sts" && r.Operation == "AssumeRole":
				if r.AccessKeyID != e.user.AccessKeyID {
					t.Errorf("AssumeRole signed by %s", r.AccessKeyID)
				}
			case r.AccessKeyID != session:
				t.Errorf("%s %s %s was signed by %s, not the role's session", r.Service, r.Operation, r.Resource, r.AccessKeyID)
			case r.Service == "s3":
				s3Calls++
			case r.Service == "sts" && r.Operation == "GetCallerIdentity":
				terraformIdentity++
			}
		}
		if s3Calls < 6 || terraformIdentity == 0 {
			t.Errorf("%d S3 calls and %d GetCallerIdentity calls with the role's session", s3Calls, terraformIdentity)
		}
		// The kubeconfig's helper assumes the role itself, with the access key.
		cfg, err := clientcmd.Load(out.Data[api.OutputsKubeconfig])
		if err != nil {
			t.Fatal(err)
		}
		exec := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Exec
		if !slices.Equal(exec.Args, []string{"--cluster-name", "c-eks", "--region", tfRegion, "--role-arn", role, "--external-id", "ext-42"}) || exec.Env[0].Value != e.user.AccessKeyID {
			t.Errorf("exec %+v", exec)
		}
		if strings.Contains(string(out.Data[api.OutputsKubeconfig]), calls[0].Issued.SecretAccessKey) {
			t.Error("the kubeconfig holds the role's temporary credentials")
		}
	})

	t.Run("the Job's deadline stops Terraform cleanly", func(t *testing.T) {
		const id = "deadline1"
		e.start(t, run{id: id, topology: api.TopologyEKS, operation: api.OperationApply, credential: e.staticKey(), deadline: ptr.To[int64](6), module: map[string]string{
			"backend.tf": backendBlock("c-deadline/terraform.tfstate"),
			"main.tf": `resource "terraform_data" "slow" {
  provisioner "local-exec" { command = "exec sleep 120" }
}
output "cluster_name" { value = "c-deadline" }
`,
		}})
		job, out := e.wait(t, id)
		log, _ := e.actor.Output(api.JobName(id))
		msg := out.Annotations[api.AnnotationMessage]
		if out.Annotations[api.AnnotationPhase] != string(api.StatusFailed) || !strings.HasPrefix(msg, "terraform apply was interrupted: the run's pod is being stopped") {
			t.Errorf("phase %s, message:\n%s\nlog:\n%s", out.Annotations[api.AnnotationPhase], msg, log)
		}
		if want := []string{"FailureTarget/DeadlineExceeded", "Failed/DeadlineExceeded"}; !slices.Equal(conditionTypes(job), want) {
			t.Errorf("Job conditions %v, want %v", conditionTypes(job), want)
		}
		if job.Status.Failed != 1 || job.Status.Active != 0 || ptr.Deref(job.Status.Terminating, -1) != 0 {
			t.Errorf("Job status %+v", job.Status)
		}
		// Terraform was interrupted, not killed: it released the state lock.
		if keys, _ := e.aws.S3.Keys(tfStateBucket); slices.Contains(keys, "c-deadline/terraform.tfstate.tflock") {
			t.Errorf("the state is still locked: %v\n%s", keys, log)
		}
	})

	t.Run("destroy", func(t *testing.T) {
		const id = "destroy1"
		phases := e.phases(t, id)
		before := len(e.aws.Requests("s3"))
		e.start(t, run{id: id, topology: api.TopologyEKS, operation: api.OperationDestroy, credential: e.staticKey(), module: eksModule("c-eks/terraform.tfstate", ca)})
		job, out := e.wait(t, id)
		if out.Annotations[api.AnnotationPhase] != string(api.StatusSucceeded) || out.Annotations[api.AnnotationMessage] != "Destroyed" || len(out.Data) != 0 {
			log, _ := e.actor.Output(api.JobName(id))
			t.Fatalf("phase %s: %s, data %v\n%s", out.Annotations[api.AnnotationPhase], out.Annotations[api.AnnotationMessage], out.Data, log)
		}
		if want := []string{"planning", "applying", "succeeded"}; !slices.Equal(phases(), want) {
			t.Errorf("phases %v, want %v", phases(), want)
		}
		if want := []string{"SuccessCriteriaMet/CompletionsReached", "Complete/CompletionsReached"}; !slices.Equal(conditionTypes(job), want) {
			t.Errorf("Job conditions %+v", job.Status.Conditions)
		}
		state, err := e.aws.S3.Object(tfStateBucket, "c-eks/terraform.tfstate")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Resources []json.RawMessage `json:"resources"`
		}
		if err := json.Unmarshal(state, &st); err != nil || len(st.Resources) != 0 {
			t.Errorf("state after destroy has %d resources (%v)", len(st.Resources), err)
		}
		// The bucket existed: found, not created again.
		for _, r := range e.aws.Requests("s3")[before:] {
			if r.Operation == "CreateBucket" {
				t.Error("the existing state bucket was created again")
			}
		}
		if log, _ := e.actor.Output(api.JobName(id)); !strings.Contains(log, "Destroy complete!") && !strings.Contains(log, "Apply complete! Resources: 0 added, 0 changed, 2 destroyed") {
			t.Errorf("the Pod's log:\n%s", log)
		}
	})
}
