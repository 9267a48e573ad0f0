package jobs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// RunnerImage is the terraform-runner image every Job runs, pinned by hand here and nowhere else
// (docs/provisioner.md#configuration: no Deployment runs this image, so nothing else would bump it).
// Config.RunnerImage overrides it (RUNNER_IMAGE), for tests and air-gapped mirrors.
const RunnerImage = "ghcr.io/kubeopera/terraform-runner:v0.1.0"

// DefaultActiveDeadline bounds a run (the Job's activeDeadlineSeconds): a vanilla_kubeadm apply
// is up to ~40 minutes of Terraform plus up to 20 minutes of waiting for the kubeconfig.
const DefaultActiveDeadline = 2 * time.Hour

// Where the runner's container finds its inputs. The paths reach the runner through api.Env*.
const (
	// ContainerName is the runner's container in the Job's pod.
	ContainerName        = "terraform"
	ModuleMountPath      = "/provision/module"
	CredentialsMountPath = "/provision/credentials"
	// ModulesDir holds the project's Terraform modules inside the runner's image.
	ModulesDir = "/modules"
	// WorkDir (the container's working directory), HomeDir ($HOME) and TmpDir ($TMPDIR) are
	// emptyDirs: the root filesystem is read-only.
	WorkDir = "/work"
	HomeDir = "/home/runner"
	TmpDir  = "/tmp"
)

// AnnotationClusterID keeps the request's clusterID verbatim on the Job: the LabelCluster label
// value may have to be shortened of characters a label value may not end with.
const AnnotationClusterID = "provisioner.kubeopera.io/cluster-id"

// managedBy is the value of jobrun.LabelManagedBy on every object of a run.
const managedBy = "kubeopera-provisioner"

// run is what the builders need to know about one run.
type run struct {
	id        string
	namespace string
	req       api.CreateRequest
}

func (r run) operation() api.Operation {
	if r.req.Operation == "" {
		return api.OperationApply
	}
	return r.req.Operation
}

// labels are on every object of the run: which run, cluster and operation, and whose run it is
// (the workspace's fingerprint and the owner's UID; both are valid label values as Validate
// admits them).
func (r run) labels() map[string]string {
	return map[string]string{
		api.LabelRun:                  r.id,
		api.LabelCluster:              jobrun.LabelValue(r.req.ClusterID),
		api.LabelOperation:            string(r.operation()),
		api.LabelWorkspaceFingerprint: r.req.WorkspaceFingerprint,
		api.LabelOwnerUID:             r.req.OwnerUID,
		jobrun.LabelManagedBy:         managedBy,
	}
}

// meta is the metadata of the run's object name; Launch adds the owner reference to the Job.
func (r run) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: r.namespace, Labels: r.labels()}
}

// job is the run's Job, created suspended: Create un-suspends it once everything it mounts and
// runs as exists.
func (r run) job(image string, deadline time.Duration) *batchv1.Job {
	meta := r.meta(api.JobName(r.id))
	meta.Annotations = map[string]string{AnnotationClusterID: r.req.ClusterID, api.AnnotationWorkspace: r.req.Workspace, api.AnnotationInputsHash: r.req.InputsHash()}
	if r.req.PlanRun != "" {
		meta.Annotations[api.AnnotationPlanRun] = r.req.PlanRun
	}
	env := []corev1.EnvVar{
		{Name: api.EnvRunID, Value: r.id},
		{Name: api.EnvOperation, Value: string(r.operation())},
		{Name: api.EnvTopology, Value: r.req.Topology},
		{Name: api.EnvRegion, Value: r.req.Region},
		{Name: api.EnvStateBucket, Value: api.StateBucketName(r.req.WorkspaceFingerprint, r.req.TerraformEnvironment)},
		{Name: api.EnvWorkspaceFingerprint, Value: r.req.WorkspaceFingerprint},
		{Name: api.EnvModuleDir, Value: ModuleMountPath},
		{Name: api.EnvModulesDir, Value: ModulesDir},
		{Name: api.EnvCredentialsDir, Value: CredentialsMountPath},
		{Name: api.EnvOutputsSecret, Value: api.OutputsSecretName(r.id)},
		jobrun.NamespaceEnv(api.EnvNamespace),
		{Name: "HOME", Value: HomeDir},
		{Name: "TMPDIR", Value: TmpDir},
		{Name: "TF_IN_AUTOMATION", Value: "1"},
		{Name: "TF_INPUT", Value: "0"},
	}
	// A plan run saves its plan here, an apply run of an approved plan loads it from here.
	switch {
	case r.operation() == api.OperationPlan:
		env = append(env, corev1.EnvVar{Name: api.EnvPlanKey, Value: api.PlanKey(r.req.WorkspaceFingerprint, r.req.ClusterID, r.id)})
	case r.req.PlanRun != "":
		env = append(env, corev1.EnvVar{Name: api.EnvPlanKey, Value: api.PlanKey(r.req.WorkspaceFingerprint, r.req.ClusterID, r.req.PlanRun)})
	}
	return jobrun.NewRunnerJob(jobrun.RunnerJob{
		Meta:           meta,
		PodLabels:      r.labels(),
		ServiceAccount: api.ServiceAccountName(r.id),
		Deadline:       deadline,
		// Time for Terraform to stop cleanly and write its state when the deadline or a deletion
		// stops the pod.
		GracePeriod: 2 * time.Minute,
		Container: corev1.Container{
			Name:       ContainerName,
			Image:      image,
			WorkingDir: WorkDir,
			Env:        env,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("250m"),
					corev1.ResourceMemory: resource.MustParse("512Mi"),
				},
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "module", MountPath: ModuleMountPath, ReadOnly: true},
				{Name: "credentials", MountPath: CredentialsMountPath, ReadOnly: true},
				{Name: "work", MountPath: WorkDir},
				{Name: "home", MountPath: HomeDir},
				{Name: "tmp", MountPath: TmpDir},
			},
		},
		Volumes: []corev1.Volume{
			jobrun.ConfigMapVolume("module", api.ModuleConfigMapName(r.id)),
			jobrun.SecretVolume("credentials", api.CredentialsSecretName(r.id)),
			// The runner makes Terraform's working directory under $TMPDIR, and providers are
			// unpacked there (the AWS provider alone is ~0.7 GB).
			jobrun.EmptyDir("work", "1Gi"),
			jobrun.EmptyDir("home", "1Gi"),
			jobrun.EmptyDir("tmp", "4Gi"),
		},
	})
}

func (r run) credentials(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: r.meta(api.CredentialsSecretName(r.id)),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       data,
	}
}

func (r run) module(files map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: r.meta(api.ModuleConfigMapName(r.id)),
		Immutable:  ptr.To(true),
		Data:       files,
	}
}

// outputs is created empty, so the runner needs no create right: get and update on this name
// (jobrun.RunnerIdentity).
func (r run) outputs() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: r.meta(api.OutputsSecretName(r.id)), Type: corev1.SecretTypeOpaque}
}

// credentialKeys are the keys copied from the caller's credential Secret; any other key stays
// behind.
var credentialKeys = []string{
	api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialSessionToken,
	api.CredentialRoleARN, api.CredentialExternalID,
}

// credentialData picks the credential's known keys and checks that they make a credential: an
// access key (access_key with secret_key), a role to assume (role_arn), or both. The error never
// carries a value.
func credentialData(ref api.SecretRef, s *corev1.Secret) (map[string][]byte, error) {
	data := map[string][]byte{}
	for _, k := range credentialKeys {
		if v := s.Data[k]; len(v) > 0 {
			data[k] = v
		}
	}
	_, ak := data[api.CredentialAccessKey]
	_, sk := data[api.CredentialSecretKey]
	_, role := data[api.CredentialRoleARN]
	switch {
	case ak != sk:
		return nil, credentialError(ref, fmt.Sprintf("must hold both %s and %s, or neither", api.CredentialAccessKey, api.CredentialSecretKey))
	case !ak && !role:
		return nil, credentialError(ref, fmt.Sprintf("holds no credential: it needs %s and %s, or %s", api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialRoleARN))
	}
	return data, nil
}

// checkModule checks the renderer's files: ConfigMap keys (a file name each, no directories) and
// ConfigMap's size limit.
func checkModule(files map[string]string) error {
	if len(files) == 0 {
		return fmt.Errorf("the renderer returned no files")
	}
	size := 0
	for name, content := range files {
		if errs := validation.IsConfigMapKey(name); len(errs) != 0 {
			return fmt.Errorf("the renderer returned file %q, which cannot be a ConfigMap key: %s", name, strings.Join(errs, "; "))
		}
		size += len(name) + len(content)
	}
	if size > maxModuleBytes {
		return fmt.Errorf("the rendered module is %s bytes, more than a ConfigMap holds (%d)", strconv.Itoa(size), maxModuleBytes)
	}
	return nil
}

// maxModuleBytes stays below a ConfigMap's 1 MiB limit with room for its metadata.
const maxModuleBytes = 1<<20 - 16<<10
