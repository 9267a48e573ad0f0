// Package jobruntest plays, in tests on a real kube-apiserver without a kubelet or a Job
// controller, what a run of a job service (internal/jobrun) needs besides the service and its
// runner: JobController writes a run's Job status and pods exactly as kube-controller-manager's
// Job controller would (start, complete, fail) — the test apiserver runs no Job controller — and
// ServiceAccountClient acts as a ServiceAccount through the apiserver's real authorization.
// Nothing else: they never touch what the service itself creates. Each service's runner is
// played by its own test package (internal/provisioner/jobs/jobstest,
// internal/scaffolder/jobs/jobstest).
package jobruntest

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// ServiceAccountClient is a client that acts as ServiceAccount ns/name: cfg (an admin's)
// impersonates it, so every request goes through the apiserver's real authorization.
func ServiceAccountClient(cfg *rest.Config, ns, name string) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return kubernetes.NewForConfig(c)
}

// JobController plays kube-controller-manager's Job controller for runs in Namespace.
type JobController struct {
	Client    kubernetes.Interface
	Namespace string
	// JobName is a run's Job name from its ID (e.g. the provisioner's api.JobName).
	JobName func(id string) string
}

func (jc JobController) update(ctx context.Context, id string, mutate func(*batchv1.Job)) (*batchv1.Job, error) {
	jobs := jc.Client.BatchV1().Jobs(jc.Namespace)
	job, err := jobs.Get(ctx, jc.JobName(id), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	mutate(job)
	return jobs.UpdateStatus(ctx, job, metav1.UpdateOptions{})
}

// Start marks the run's Job started, with one active pod.
func (jc JobController) Start(ctx context.Context, id string) (*batchv1.Job, error) {
	return jc.update(ctx, id, func(j *batchv1.Job) {
		now := metav1.Now()
		j.Status.StartTime = &now
		j.Status.Active = 1
	})
}

// Complete marks the run's Job complete (its pod exited 0).
func (jc JobController) Complete(ctx context.Context, id string) (*batchv1.Job, error) {
	return jc.update(ctx, id, func(j *batchv1.Job) {
		now := metav1.Now()
		if j.Status.StartTime == nil {
			j.Status.StartTime = &now
		}
		j.Status.Active, j.Status.Succeeded = 0, 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = append(j.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastTransitionTime: now, LastProbeTime: now},
			batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastTransitionTime: now, LastProbeTime: now})
	})
}

// Fail marks the run's Job failed with the Job controller's reason and message, e.g.
// BackoffLimitExceeded ("Job has reached the specified backoff limit") when the pod failed, or
// DeadlineExceeded ("Job was active longer than specified deadline").
func (jc JobController) Fail(ctx context.Context, id, reason, message string) (*batchv1.Job, error) {
	return jc.update(ctx, id, func(j *batchv1.Job) {
		now := metav1.Now()
		if j.Status.StartTime == nil {
			j.Status.StartTime = &now
		}
		j.Status.Active, j.Status.Failed = 0, 1
		j.Status.Conditions = append(j.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: now, LastProbeTime: now},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastTransitionTime: now, LastProbeTime: now})
	})
}

// CreatePod creates the run's pod from the Job's template, as the Job controller does, and sets
// its status (as the kubelet would) when status is not nil.
func (jc JobController) CreatePod(ctx context.Context, id string, status *corev1.PodStatus) (*corev1.Pod, error) {
	job, err := jc.Client.BatchV1().Jobs(jc.Namespace).Get(ctx, jc.JobName(id), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: job.Name + "-",
			Namespace:    jc.Namespace,
			Labels:       job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	pod, err = jc.Client.CoreV1().Pods(jc.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil || status == nil {
		return pod, err
	}
	pod.Status = *status
	return jc.Client.CoreV1().Pods(jc.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// ServiceMayNot are calls that the identity of a job service (cs, acting as ServiceAccount
// ns/sa, whose Role is in ns) must be refused, by name: reading Secrets elsewhere, listing or
// deleting Secrets, creating pods, and escalating through RBAC. A test adds its service's own and
// checks that every one is Forbidden.
func ServiceMayNot(ctx context.Context, cs kubernetes.Interface, ns, sa string) map[string]func() error {
	privileged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
	}}}}
	return map[string]func() error{
		"read Secrets outside its namespace": func() error {
			_, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
			return err
		},
		"list Secrets": func() error {
			_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"delete Secrets": func() error {
			return cs.CoreV1().Secrets(ns).Delete(ctx, "anything", metav1.DeleteOptions{})
		},
		"create pods": func() error {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, privileged, metav1.CreateOptions{})
			return err
		},
		"create ClusterRoleBindings": func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "x"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			}, metav1.CreateOptions{})
			return err
		},
		// cluster-admin, not admin: admin's rules are aggregated by a kube-controller-manager
		// controller a test backend may not run, so admin may be empty there.
		"bind a broader role in its namespace": func() error {
			_, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "x"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
			}, metav1.CreateOptions{})
			return err
		},
		"create a Role granting more than it holds": func() error {
			_, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "x"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{})
			return err
		},
	}
}
