package jobrun

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrNotFound is returned for an ID that names no run (never created, malformed, being deleted,
// or swept).
var ErrNotFound = errors.New("run not found")

// Run names one run's objects for ReadRun.
type Run struct {
	// Namespace is the jobs namespace.
	Namespace string
	// ID is the run's ID; RunLabel the label that carries it on the Job.
	ID, RunLabel string
	// Job is the run's Job; Report the Secret its runner reports on.
	Job, Report string
}

// ReadRun gets a run's Job and the Secret its runner reports on (nil while it does not exist, or
// when it is not this Job's: left from an earlier Job of the same name). ErrNotFound when the ID
// is malformed or no such Job is there.
func ReadRun(ctx context.Context, cs kubernetes.Interface, r Run) (*batchv1.Job, *corev1.Secret, error) {
	if !ValidID(r.ID) {
		return nil, nil, ErrNotFound
	}
	job, err := cs.BatchV1().Jobs(r.Namespace).Get(ctx, r.Job, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read Job %s: %w", r.Job, err)
	}
	if job.Labels[r.RunLabel] != r.ID || job.DeletionTimestamp != nil {
		return nil, nil, ErrNotFound
	}
	report, err := cs.CoreV1().Secrets(r.Namespace).Get(ctx, r.Report, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return job, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("failed to read Secret %s: %w", r.Report, err)
	case !metav1.IsControlledBy(report, job):
		return job, nil, nil
	}
	return job, report, nil
}

// LatestPodProblem is PodProblem of the Job's newest pod's container; "" when it has no pod or
// nothing is wrong with it.
func LatestPodProblem(ctx context.Context, cs kubernetes.Interface, job *batchv1.Job, container string) (string, error) {
	pod, err := LatestPod(ctx, cs, job)
	if err != nil || pod == nil {
		return "", err
	}
	return PodProblem(pod, container), nil
}
