package jobs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

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

// runnerUID runs the runner (and owns, as fsGroup, the files of its mounted volumes).
const runnerUID int64 = 65532

// AnnotationClusterID keeps the request's clusterID verbatim on the Job: the LabelCluster label
// value may have to be shortened of characters a label value may not end with.
const AnnotationClusterID = "provisioner.kubeopera.io/cluster-id"

// labelManagedBy marks every object of a run as the provisioner's.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "kubeopera-provisioner"
)

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
		api.LabelCluster:              clusterLabelValue(r.req.ClusterID),
		api.LabelOperation:            string(r.operation()),
		api.LabelWorkspaceFingerprint: r.req.WorkspaceFingerprint,
		api.LabelOwnerUID:             r.req.OwnerUID,
		labelManagedBy:                managedBy,
	}
}

// clusterLabelValue makes a clusterID a valid label value: the clusterID pattern admits a trailing
// hyphen, a label value does not end with one. The verbatim ID is AnnotationClusterID.
func clusterLabelValue(id string) string {
	v := strings.TrimRight(id, "-_.")
	if len(validation.IsValidLabelValue(v)) != 0 {
		return ""
	}
	return v
}

func (r run) meta(name string, owner *batchv1.Job) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: r.namespace, Labels: r.labels()}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: batchv1.SchemeGroupVersion.String(),
			Kind:       "Job",
			Name:       owner.Name,
			UID:        owner.UID,
			Controller: ptr.To(true),
		}}
	}
	return m
}

// job is the run's Job, created suspended: Create un-suspends it once everything it mounts and
// runs as exists.
func (r run) job(image string, deadline time.Duration) *batchv1.Job {
	meta := r.meta(api.JobName(r.id), nil)
	meta.Annotations = map[string]string{AnnotationClusterID: r.req.ClusterID, api.AnnotationWorkspace: r.req.Workspace, api.AnnotationInputsHash: r.req.InputsHash()}
	if r.req.PlanRun != "" {
		meta.Annotations[api.AnnotationPlanRun] = r.req.PlanRun
	}
	podSC := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(runnerUID),
		RunAsGroup:     ptr.To(runnerUID),
		FSGroup:        ptr.To(runnerUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	containerSC := &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
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
		{Name: api.EnvNamespace, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
		}},
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
	emptyDir := func(limit string) corev1.VolumeSource {
		q := resource.MustParse(limit)
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &q}}
	}
	return &batchv1.Job{
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			// One attempt: Terraform is not retried blindly; the caller starts a new run.
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(int64(deadline / time.Second)),
			// TTLSecondsAfterFinished stays unset: finished runs are kept for RUN_RETENTION and
			// deleted by Sweep, so GET keeps answering for the caller meanwhile.
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: r.labels()},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: api.ServiceAccountName(r.id),
					// The token is mounted only because the runner must write its outputs Secret
					// (progress annotations, the kubeconfig); the run's ServiceAccount may get and
					// update that one Secret and nothing else.
					AutomountServiceAccountToken: ptr.To(true),
					EnableServiceLinks:           ptr.To(false),
					// Time for Terraform to stop cleanly and write its state when the deadline
					// or a deletion stops the pod.
					TerminationGracePeriodSeconds: ptr.To[int64](120),
					SecurityContext:               podSC,
					Containers: []corev1.Container{{
						Name:            ContainerName,
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						WorkingDir:      WorkDir,
						Env:             env,
						SecurityContext: containerSC,
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
					}},
					Volumes: []corev1.Volume{
						{Name: "module", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: api.ModuleConfigMapName(r.id)},
							DefaultMode:          ptr.To[int32](0o444),
						}}},
						// Owned by root, group runnerUID (fsGroup), readable by that group only.
						{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName:  api.CredentialsSecretName(r.id),
							DefaultMode: ptr.To[int32](0o440),
						}}},
						// The runner makes Terraform's working directory under $TMPDIR, and
						// providers are unpacked there (the AWS provider alone is ~0.7 GB).
						{Name: "work", VolumeSource: emptyDir("1Gi")},
						{Name: "home", VolumeSource: emptyDir("1Gi")},
						{Name: "tmp", VolumeSource: emptyDir("4Gi")},
					},
				},
			},
		},
	}
}

func (r run) serviceAccount(owner *batchv1.Job) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: r.meta(api.ServiceAccountName(r.id), owner)}
}

// role lets the run's ServiceAccount get and update its own outputs Secret, and nothing else: not
// its credential Secret, not another run's objects.
func (r run) role(owner *batchv1.Job) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: r.meta(api.ServiceAccountName(r.id), owner),
		Rules: []rbacv1.PolicyRule{{
			APIGroups:     []string{""},
			Resources:     []string{"secrets"},
			ResourceNames: []string{api.OutputsSecretName(r.id)},
			Verbs:         []string{"get", "update"},
		}},
	}
}

func (r run) roleBinding(owner *batchv1.Job) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: r.meta(api.ServiceAccountName(r.id), owner),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: api.ServiceAccountName(r.id)},
		Subjects: []rbacv1.Subject{{
			Kind: rbacv1.ServiceAccountKind, Name: api.ServiceAccountName(r.id), Namespace: r.namespace,
		}},
	}
}

func (r run) credentials(owner *batchv1.Job, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: r.meta(api.CredentialsSecretName(r.id), owner),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       data,
	}
}

func (r run) module(owner *batchv1.Job, files map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: r.meta(api.ModuleConfigMapName(r.id), owner),
		Immutable:  ptr.To(true),
		Data:       files,
	}
}

// outputs is created empty, so the runner needs no create right: get and update on this name.
func (r run) outputs(owner *batchv1.Job) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: r.meta(api.OutputsSecretName(r.id), owner), Type: corev1.SecretTypeOpaque}
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
