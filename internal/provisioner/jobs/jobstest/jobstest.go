// Package jobstest plays, in tests on a real kube-apiserver, the runner of a provisioning run:
// Runner reports progress and publishes the kubeconfig on the run's outputs Secret, through the
// run's own ServiceAccount (impersonated), as cmd/terraform-runner does from its pod. The Job
// controller is internal/jobrun/jobruntest's JobController. Nothing else: it never touches what
// the provisioner itself creates.
package jobstest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// Runner plays cmd/terraform-runner of runs in Namespace, through each run's own ServiceAccount.
type Runner struct {
	// Config is an admin's config; the Runner impersonates the run's ServiceAccount with it.
	Config    *rest.Config
	Namespace string
}

// Report writes the runner's phase and message on the run's outputs Secret and, when kubeconfig
// is not empty, publishes it there.
func (r Runner) Report(ctx context.Context, id, phase, message, kubeconfig string) error {
	cs, err := jobruntest.ServiceAccountClient(r.Config, r.Namespace, api.ServiceAccountName(id))
	if err != nil {
		return err
	}
	secrets := cs.CoreV1().Secrets(r.Namespace)
	s, err := secrets.Get(ctx, api.OutputsSecretName(id), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[api.AnnotationPhase] = phase
	s.Annotations[api.AnnotationMessage] = message
	if kubeconfig != "" {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[api.OutputsKubeconfig] = []byte(kubeconfig)
	}
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	return err
}
