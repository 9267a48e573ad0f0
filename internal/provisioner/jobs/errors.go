package jobs

import (
	"errors"
	"fmt"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// ErrNoKubeconfig is returned by Kubeconfig for a succeeded run whose outputs Secret holds no
// kubeconfig: destroy and plan runs publish none.
var ErrNoKubeconfig = errors.New("the run published no kubeconfig")

// ErrNoPod is returned by Logs while the run's Job has no pod (not started yet, or the pod is
// gone).
var ErrNoPod = errors.New("the run has no pod")

// NotDoneError is returned by Kubeconfig before the run has succeeded.
type NotDoneError struct {
	ID     string
	Status api.Status
}

func (e *NotDoneError) Error() string {
	if e.Status == api.StatusFailed {
		return fmt.Sprintf("run %s failed: it has no kubeconfig", e.ID)
	}
	return fmt.Sprintf("run %s has not succeeded yet (status %s)", e.ID, e.Status)
}

// Request errors are *api.FieldError values (the request's field at fault, e.g.
// credentialSecretRef when the credential Secret is missing): the server answers them with 400.
func credentialError(ref api.SecretRef, msg string) error {
	return &api.FieldError{Field: "credentialSecretRef", Message: fmt.Sprintf("Secret %s/%s %s", ref.Namespace, ref.Name, msg)}
}
