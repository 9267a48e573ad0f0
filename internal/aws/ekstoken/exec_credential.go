package ekstoken

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"
)

// ExecCredentialAPIVersion is the apiVersion of the ExecCredential ExecCredential returns; the
// kubeconfig's users[].user.exec.apiVersion must name the same version, or client-go refuses the
// plugin's answer.
const ExecCredentialAPIVersion = "client.authentication.k8s.io/v1beta1"

// ExecCredential returns the JSON client-go's exec credential plugin expects on the plugin's
// stdout: a client.authentication.k8s.io/v1beta1 ExecCredential whose status holds token and
// expires at expiry, after which client-go runs the plugin again.
func ExecCredential(token string, expiry time.Time) ([]byte, error) {
	if token == "" {
		return nil, errors.New("token is required")
	}
	if expiry.IsZero() {
		return nil, errors.New("expiry is required")
	}
	cred := clientauthv1beta1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: ExecCredentialAPIVersion, Kind: "ExecCredential"},
		Status: &clientauthv1beta1.ExecCredentialStatus{
			ExpirationTimestamp: &metav1.Time{Time: expiry},
			Token:               token,
		},
	}
	out, err := json.Marshal(cred)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal ExecCredential: %w", err)
	}
	return out, nil
}
