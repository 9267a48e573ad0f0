package jobrun

import (
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// RunnerUID runs a runner's container (and owns, as fsGroup, the files of its mounted volumes):
// distroless's nonroot.
const RunnerUID int64 = 65532

// LabelManagedBy marks every object of a run as its service's (app.kubernetes.io/managed-by).
const LabelManagedBy = "app.kubernetes.io/managed-by"

// LabelValue makes v (a clusterID) a valid label value: a clusterID may end with a hyphen, a
// label value may not; "" when nothing valid is left. Keep the verbatim value in an annotation.
func LabelValue(v string) string {
	v = strings.TrimRight(v, "-_.")
	if len(validation.IsValidLabelValue(v)) != 0 {
		return ""
	}
	return v
}

// PodSecurityContext is a runner pod's: non-root as RunnerUID, the runtime's default seccomp
// profile (Pod Security "restricted").
func PodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(RunnerUID),
		RunAsGroup:     ptr.To(RunnerUID),
		FSGroup:        ptr.To(RunnerUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurityContext is a runner container's: no privilege escalation, every capability
// dropped, a read-only root filesystem (Pod Security "restricted", and more).
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// NamespaceEnv is the container's environment variable name set to the pod's namespace
// (downward API), where the runner finds the Secret it reports on.
func NamespaceEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
	}}
}

// ControllerRef is the owner reference every object of a run carries: its Job, as controller, so
// deleting the Job garbage-collects the run.
func ControllerRef(job *batchv1.Job) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: batchv1.SchemeGroupVersion.String(),
		Kind:       "Job",
		Name:       job.Name,
		UID:        job.UID,
		Controller: ptr.To(true),
	}}
}

// RunnerIdentity is a run's own identity, all three named meta.Name in meta.Namespace: a
// ServiceAccount, and a Role bound to it that allows get and update on Secret secret and nothing
// else (not the run's inputs, not another run's objects). The service creates secret empty, so
// the runner needs no create right.
func RunnerIdentity(meta metav1.ObjectMeta, secret string) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	sa := &corev1.ServiceAccount{ObjectMeta: *meta.DeepCopy()}
	role := &rbacv1.Role{
		ObjectMeta: *meta.DeepCopy(),
		Rules: []rbacv1.PolicyRule{{
			APIGroups:     []string{""},
			Resources:     []string{"secrets"},
			ResourceNames: []string{secret},
			Verbs:         []string{"get", "update"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: *meta.DeepCopy(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: meta.Name, Namespace: meta.Namespace}},
	}
	return sa, role, binding
}

// RunnerJob describes a run's Job for NewRunnerJob.
type RunnerJob struct {
	// Meta is the Job's metadata; PodLabels the pod template's labels.
	Meta      metav1.ObjectMeta
	PodLabels map[string]string
	// ServiceAccount is the run's own identity (RunnerIdentity).
	ServiceAccount string
	// Deadline is activeDeadlineSeconds; GracePeriod the pod's termination grace period, the
	// time the runner has to stop cleanly when the deadline or a deletion stops it.
	Deadline    time.Duration
	GracePeriod time.Duration
	// Container is the runner; NewRunnerJob sets its security context and pull policy.
	Container corev1.Container
	// Volumes are what the container mounts.
	Volumes []corev1.Volume
}

// NewRunnerJob is a run's Job, suspended (Launch starts it): one attempt (backoffLimit 0: a
// failed run is not retried blindly, the caller starts a new one), restartPolicy Never, no TTL
// (finished runs are kept for the retention and deleted by Sweep, so the service keeps answering
// for them meanwhile), Pod Security "restricted" contexts, no service links, and the run's
// ServiceAccount token mounted, because the runner writes the Secret it reports on (its Role
// allows that one Secret and nothing else).
func NewRunnerJob(j RunnerJob) *batchv1.Job {
	c := j.Container
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.SecurityContext = ContainerSecurityContext()
	return &batchv1.Job{
		ObjectMeta: j.Meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(int64(j.Deadline / time.Second)),
			Suspend:               ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: j.PodLabels},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					ServiceAccountName:            j.ServiceAccount,
					AutomountServiceAccountToken:  ptr.To(true),
					EnableServiceLinks:            ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To(int64(j.GracePeriod / time.Second)),
					SecurityContext:               PodSecurityContext(),
					Containers:                    []corev1.Container{c},
					Volumes:                       j.Volumes,
				},
			},
		},
	}
}

// EmptyDir is an emptyDir volume of at most limit (a quantity, e.g. "1Gi").
func EmptyDir(name, limit string) corev1.Volume {
	q := resource.MustParse(limit)
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &q}}}
}

// SecretVolume mounts Secret secret, its files owned by root and group RunnerUID (fsGroup),
// readable by that group only (0440).
func SecretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  secret,
		DefaultMode: ptr.To[int32](0o440),
	}}}
}

// ConfigMapVolume mounts ConfigMap configMap, its files readable by all (0444).
func ConfigMapVolume(name, configMap string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
		DefaultMode:          ptr.To[int32](0o444),
	}}}
}
