package jobs

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
)

// RunnerImage is the scaffold-runner image every Job runs, pinned by hand here and nowhere else
// (docs/scaffolder.md#configuration: no Deployment runs this image, so nothing else would bump
// it). Config.RunnerImage overrides it (RUNNER_IMAGE), for tests and air-gapped mirrors.
const RunnerImage = "ghcr.io/kubeopera/scaffold-runner:v0.1.0"

// DefaultActiveDeadline bounds a run (the Job's activeDeadlineSeconds): a clone, two generator
// runs and pushes, and the wait for the target's sealed-secrets controller to become Available.
const DefaultActiveDeadline = 30 * time.Minute

// DefaultBranch is the branch pushed to when the request names none.
const DefaultBranch = "main"

// Where the runner's container finds its inputs. The paths reach the runner through api.Env*.
const (
	// ContainerName is the runner's container in the Job's pod.
	ContainerName = "scaffold"
	// InputsMountPath holds the inputs Secret's keys (api.Input*), read-only, mode 0440.
	InputsMountPath = "/scaffold/inputs"
	// TemplatesMountPath holds the admin's templates ConfigMap, when one is configured.
	TemplatesMountPath = "/scaffold/templates"
	// WorkDir (the container's working directory: the clone), HomeDir ($HOME: git's
	// configuration) and TmpDir ($TMPDIR) are emptyDirs: the root filesystem is read-only.
	WorkDir = "/work"
	HomeDir = "/home/runner"
	TmpDir  = "/tmp"
)

// managedBy is the value of jobrun.LabelManagedBy on every object of a run.
const managedBy = "kubeopera-gitops-scaffolder"

// run is what the builders need to know about one run.
type run struct {
	id        string
	namespace string
	req       api.Request
}

// labels are on every object of the run: which run and cluster, and whose run it is (the owner's
// UID, a valid label value as Validate admits it; the workspace is an annotation on the Job).
func (r run) labels() map[string]string {
	return map[string]string{
		api.LabelRun:          r.id,
		api.LabelCluster:      jobrun.LabelValue(r.req.ClusterID),
		api.LabelOwnerUID:     r.req.OwnerUID,
		jobrun.LabelManagedBy: managedBy,
	}
}

// meta is the metadata of the run's object name; Launch adds the owner reference to the Job.
func (r run) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: r.namespace, Labels: r.labels()}
}

func (r run) branch() string {
	if r.req.Branch == "" {
		return DefaultBranch
	}
	return r.req.Branch
}

// env is the runner's environment (api.Env*): the request's values, where its inputs are, where
// it reports, and the service's options that are set.
func (r run) env(cfg Config) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: api.EnvRunID, Value: r.id},
		{Name: api.EnvClusterID, Value: r.req.ClusterID},
		{Name: api.EnvSlug, Value: r.req.Slug},
		{Name: api.EnvDomain, Value: r.req.Domain},
		{Name: api.EnvRegion, Value: r.req.Region},
		{Name: api.EnvRepoURL, Value: r.req.RepoURL},
		{Name: api.EnvBranch, Value: r.branch()},
		{Name: api.EnvPath, Value: r.req.Path},
		{Name: api.EnvInputsDir, Value: InputsMountPath},
		{Name: api.EnvStatusSecret, Value: api.StatusSecretName(r.id)},
		jobrun.NamespaceEnv(api.EnvNamespace),
		{Name: "HOME", Value: HomeDir},
		{Name: "TMPDIR", Value: TmpDir},
	}
	if cfg.TemplatesConfigMap != "" {
		env = append(env, corev1.EnvVar{Name: api.EnvTemplatesDir, Value: TemplatesMountPath})
	}
	if cfg.ChartMirror != "" {
		env = append(env, corev1.EnvVar{Name: api.EnvChartMirror, Value: cfg.ChartMirror})
	}
	if cfg.AllowNetworks != "" {
		env = append(env, corev1.EnvVar{Name: api.EnvAllowNetworks, Value: cfg.AllowNetworks})
	}
	if cfg.SealedSecretsTimeout > 0 {
		env = append(env, corev1.EnvVar{Name: api.EnvSealedSecretsTimeout, Value: cfg.SealedSecretsTimeout.String()})
	}
	if cfg.AWSEndpointURL != "" {
		env = append(env, corev1.EnvVar{Name: api.EnvAWSEndpointURL, Value: cfg.AWSEndpointURL})
	}
	return env
}

// job is the run's Job, created suspended: Launch un-suspends it once everything it mounts and
// runs as exists.
func (r run) job(cfg Config) *batchv1.Job {
	meta := r.meta(api.JobName(r.id))
	meta.Annotations = map[string]string{api.AnnotationClusterID: r.req.ClusterID, api.AnnotationWorkspace: r.req.Workspace}
	mounts := []corev1.VolumeMount{
		{Name: "inputs", MountPath: InputsMountPath, ReadOnly: true},
		{Name: "work", MountPath: WorkDir},
		{Name: "home", MountPath: HomeDir},
		{Name: "tmp", MountPath: TmpDir},
	}
	volumes := []corev1.Volume{
		jobrun.SecretVolume("inputs", api.InputsSecretName(r.id)),
		jobrun.EmptyDir("work", "1Gi"),
		jobrun.EmptyDir("home", "64Mi"),
		jobrun.EmptyDir("tmp", "1Gi"),
	}
	if cfg.TemplatesConfigMap != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "templates", MountPath: TemplatesMountPath, ReadOnly: true})
		volumes = append(volumes, jobrun.ConfigMapVolume("templates", cfg.TemplatesConfigMap))
	}
	return jobrun.NewRunnerJob(jobrun.RunnerJob{
		Meta:           meta,
		PodLabels:      r.labels(),
		ServiceAccount: api.ServiceAccountName(r.id),
		Deadline:       cfg.ActiveDeadline,
		// Time for git to stop cleanly when the deadline or a deletion stops the pod.
		GracePeriod: 30 * time.Second,
		Container: corev1.Container{
			Name:       ContainerName,
			Image:      cfg.RunnerImage,
			WorkingDir: WorkDir,
			Env:        r.env(cfg),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				},
				Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			VolumeMounts: mounts,
		},
		Volumes: volumes,
	})
}

// inputs is the copy of the named Secrets' known keys, immutable.
func (r run) inputs(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: r.meta(api.InputsSecretName(r.id)),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       data,
	}
}

// status is created empty, so the runner needs no create right: get and update on this name
// (jobrun.RunnerIdentity).
func (r run) status() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: r.meta(api.StatusSecretName(r.id)), Type: corev1.SecretTypeOpaque}
}
