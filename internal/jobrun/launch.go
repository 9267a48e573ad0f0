package jobrun

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Launch starts a run in namespace: it creates the Job build returns for a new ID (suspended:
// build must set spec.suspend; a fresh ID when the name is taken), then the objects owned returns
// for it, each given the Job's ControllerRef, in order, and un-suspends the Job, so no pod starts
// before everything it mounts and runs as exists. owned may return *corev1.ServiceAccount,
// *corev1.Secret, *corev1.ConfigMap, *rbacv1.Role and *rbacv1.RoleBinding. When anything fails
// after the Job exists, the Job is deleted (the garbage collector takes what it owns). It returns
// the started Job.
func Launch(ctx context.Context, cs kubernetes.Interface, namespace string, build func(id string) *batchv1.Job, owned func(id string, job *batchv1.Job) []metav1.Object) (*batchv1.Job, error) {
	return LaunchGated(ctx, cs, namespace, build, nil, owned)
}

// LaunchGated is Launch with a gate: called once the suspended Job exists, before anything it
// owns; an error from it deletes the Job (it never ran) and is returned as it is (e.g. another
// run holds the cluster's lock).
func LaunchGated(ctx context.Context, cs kubernetes.Interface, namespace string, build func(id string) *batchv1.Job, gate func(id string, job *batchv1.Job) error, owned func(id string, job *batchv1.Job) []metav1.Object) (*batchv1.Job, error) {
	id, job, err := createJob(ctx, cs, namespace, build)
	if err != nil {
		return nil, err
	}
	if gate != nil {
		if err := gate(id, job); err != nil {
			return nil, errors.Join(err, abandon(cs, job))
		}
	}
	for _, o := range owned(id, job) {
		o.SetOwnerReferences(ControllerRef(job))
		if err := create(ctx, cs, namespace, o); err != nil {
			return nil, errors.Join(err, abandon(cs, job))
		}
	}
	patch := []byte(`{"spec":{"suspend":false}}`)
	started, err := cs.BatchV1().Jobs(namespace).Patch(ctx, job.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("failed to start Job %s: %w", job.Name, err), abandon(cs, job))
	}
	return started, nil
}

// createJob creates the Job of a new ID, suspended.
func createJob(ctx context.Context, cs kubernetes.Interface, namespace string, build func(id string) *batchv1.Job) (string, *batchv1.Job, error) {
	for attempt := 0; ; attempt++ {
		id, err := NewID()
		if err != nil {
			return "", nil, err
		}
		want := build(id)
		if !ptr.Deref(want.Spec.Suspend, false) {
			return "", nil, fmt.Errorf("job %s must be built suspended", want.Name)
		}
		job, err := cs.BatchV1().Jobs(namespace).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("failed to create Job %s/%s: %w", namespace, want.Name, err)
		}
		return id, job, nil
	}
}

// create creates one object a run's Job owns.
func create(ctx context.Context, cs kubernetes.Interface, ns string, o metav1.Object) error {
	var err error
	var kind string
	switch o := o.(type) {
	case *corev1.ServiceAccount:
		kind = "ServiceAccount"
		_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Secret:
		kind = "Secret"
		_, err = cs.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		kind = "ConfigMap"
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		kind = "Role"
		_, err = cs.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		kind = "RoleBinding"
		_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("a run cannot own a %T", o)
	}
	if err != nil {
		return fmt.Errorf("failed to create %s %s in %s: %w", kind, o.GetName(), ns, err)
	}
	return nil
}

// abandon deletes a Job whose run could not be set up; the garbage collector takes what it owns.
// It runs on its own deadline: the request's context may be the reason the launch failed.
func abandon(cs kubernetes.Interface, job *batchv1.Job) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := DeleteJob(ctx, cs, job); err != nil {
		return fmt.Errorf("failed to delete the unfinished run's Job %s (the sweep deletes it later): %w", job.Name, err)
	}
	return nil
}

// DeleteJob deletes job, and only that Job (a UID precondition: not a newer Job of the same
// name), with Background propagation, so everything it owns goes too. A Job already gone is
// not an error.
func DeleteJob(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) error {
	err := cs.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &job.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// LatestPod is the Job's newest pod, nil when it has none.
func LatestPod(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job) (*corev1.Pod, error) {
	sel := labels.Set{batchv1.JobNameLabel: job.Name, batchv1.ControllerUidLabel: string(job.UID)}.AsSelector().String()
	pods, err := cs.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("failed to list the pods of Job %s: %w", job.Name, err)
	}
	if len(pods.Items) == 0 {
		return nil, nil
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[j].CreationTimestamp.Before(&pods.Items[i].CreationTimestamp)
	})
	return &pods.Items[0], nil
}

// Sweep deletes the Jobs in namespace that carry label runLabel and ended more than retention
// before now, with Background propagation: the garbage collector deletes the objects each Job
// owns. Runs that have not ended are never touched. It returns how many runs it deleted.
func Sweep(ctx context.Context, cs kubernetes.Interface, namespace, runLabel string, retention time.Duration, now time.Time) (int, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("retention must be positive, not %s", retention)
	}
	deleted := 0
	var errs []error
	opts := metav1.ListOptions{LabelSelector: runLabel, Limit: 500}
	for {
		list, err := cs.BatchV1().Jobs(namespace).List(ctx, opts)
		if err != nil {
			return deleted, errors.Join(append(errs, fmt.Errorf("failed to list Jobs in %s: %w", namespace, err))...)
		}
		for i := range list.Items {
			job := &list.Items[i]
			o := JobOutcome(job, now)
			if o.End == Running || now.Sub(o.At) <= retention || job.DeletionTimestamp != nil {
				continue
			}
			if err := DeleteJob(ctx, cs, job); err != nil {
				errs = append(errs, fmt.Errorf("failed to delete Job %s: %w", job.Name, err))
				continue
			}
			deleted++
		}
		if list.Continue == "" {
			return deleted, errors.Join(errs...)
		}
		opts.Continue = list.Continue
	}
}
