package jobs

import (
	"fmt"

	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
)

// Request errors are *api.FieldError values naming the request's field at fault, e.g.
// kubeconfigSecretRef when the stored kubeconfig is missing or not readable by the scaffolder:
// the server answers them with 400. The message names the Secret, never a value.
func secretError(field string, ref api.SecretRef, msg string) error {
	return &api.FieldError{Field: field, Message: fmt.Sprintf("Secret %s %s", ref, msg)}
}
