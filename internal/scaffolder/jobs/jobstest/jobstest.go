// Package jobstest plays, in tests on a real kube-apiserver, the runner of a scaffold: Runner
// reports its step, message and commits on the run's status Secret, through the run's own
// ServiceAccount (impersonated), as cmd/scaffold-runner does from its pod. The Job controller is
// internal/jobrun/jobruntest's JobController. Nothing else: it never touches what the scaffolder
// itself creates.
package jobstest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
)

// Runner plays cmd/scaffold-runner of runs in Namespace, through each run's own ServiceAccount.
type Runner struct {
	// Config is an admin's config; the Runner impersonates the run's ServiceAccount with it.
	Config    *rest.Config
	Namespace string
}

// Report writes the runner's step (api.Step*), message and, when not empty, the commits it pushed
// (space-separated) on the run's status Secret.
func (r Runner) Report(ctx context.Context, id, step, message, commits string) error {
	cs, err := jobruntest.ServiceAccountClient(r.Config, r.Namespace, api.ServiceAccountName(id))
	if err != nil {
		return err
	}
	secrets := cs.CoreV1().Secrets(r.Namespace)
	s, err := secrets.Get(ctx, api.StatusSecretName(id), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[api.AnnotationStep] = step
	s.Annotations[api.AnnotationMessage] = message
	if commits != "" {
		s.Annotations[api.AnnotationCommits] = commits
	}
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	return err
}
