package provisioning

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// CredentialSecretName is the backend copy of the tenant's cloud credential (kcp-<fp>), the one
// the provisioner reads (credentialSecretRef) and the manager signs EKS tokens with.
func CredentialSecretName(clusterID string) string {
	return "hostcluster-" + clusterID + "-cloud-credential"
}

// Credential is the platform's copy of a tenant's cloud credential.
type Credential struct {
	AccessKey, SecretKey, SessionToken, RoleARN string
}

// StoredCredential reads the credential copy a run used, from kcp-<fp>. It has an access key, or
// only a role when the platform has an identity of its own to assume it with.
func (r *Runs) StoredCredential(ctx context.Context, c Cluster) (Credential, error) {
	name := CredentialSecretName(c.HostCluster.Spec.ClusterID)
	sec, found, err := c.Stored(ctx, name)
	switch {
	case err != nil:
		return Credential{}, err
	case !found:
		return Credential{}, fmt.Errorf("the platform's copy of the cloud credential (Secret %s in the workspace's backend namespace) is missing", name)
	}
	get := func(k string) string { return strings.TrimSpace(string(sec.Data[k])) }
	cred := Credential{AccessKey: get(api.CredentialAccessKey), SecretKey: get(api.CredentialSecretKey), SessionToken: get(api.CredentialSessionToken), RoleARN: get(api.CredentialRoleARN)}
	switch {
	case cred.AccessKey != "" && cred.SecretKey != "":
	case cred.RoleARN != "" && r.PlatformIdentity:
		// Role only: the platform's identity assumes it, with the workspace's external ID.
	default:
		return Credential{}, reconcile.Stalledf(kov1alpha1.InvalidCredentialReason,
			"the cloud credential has no %s and %s: the platform signs the EKS cluster's tokens with that access key, or with the session of %s, never with its own identity", api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialRoleARN)
	}
	return cred, nil
}

// copyCredential checks the tenant's cloud credential and copies it to the backend for the
// provisioner, which may read that one Secret only: a Role naming it and a RoleBinding to the
// provisioner's identity, both owned by the copy so they go with it. With a role_arn the copy's
// external_id is the workspace's external ID, whatever the tenant's Secret says: every
// sts:AssumeRole the run makes carries it, so a role ARN of another tenant's account gets
// AccessDenied unless that account trusts this workspace's ID. It reports whether it created the
// grant now.
func (r *Runs) copyCredential(ctx context.Context, c Cluster) (granted bool, err error) {
	hc := c.HostCluster
	src, err := c.ReferencedSecret(ctx, hc.Spec.Provisioning.CredentialRef)
	if err != nil {
		return false, err
	}
	eks := hc.Spec.Provisioning.Topology == kov1alpha1.TopologyEKS
	if err := checkCredential(src.Data, eks && !r.PlatformIdentity); err != nil {
		return false, reconcile.Stalledf(kov1alpha1.InvalidCredentialReason, "Secret %s/%s: %v", hc.Namespace, src.Name, err)
	}
	data := map[string][]byte{}
	for _, k := range []string{api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialSessionToken, api.CredentialRoleARN} {
		if v := src.Data[k]; len(v) > 0 {
			data[k] = v
		}
	}
	if len(data[api.CredentialRoleARN]) > 0 {
		data[api.CredentialExternalID] = []byte(c.ExternalID)
	}
	if len(strings.TrimSpace(string(src.Data[api.CredentialExternalID]))) > 0 {
		c.Event(corev1.EventTypeNormal, kov1alpha1.ExternalIDIgnoredReason, fmt.Sprintf(
			"Secret %s/%s: key %s is ignored; every sts:AssumeRole for this workspace carries the platform's external ID %s (status.awsExternalID): put that into your role's trust policy",
			hc.Namespace, src.Name, api.CredentialExternalID, c.ExternalID))
	}
	name := CredentialSecretName(hc.Spec.ClusterID)
	if err := c.Store(ctx, name, corev1.SecretTypeOpaque, data); err != nil {
		return false, err
	}
	return r.grant(ctx, c, name)
}

// checkCredential says what is wrong with a credential's keys, never their values. Key
// external_id is not looked at: the platform sends its own (copyCredential). needAccessKey is
// set for an EKS cluster when the manager has no identity of its own to assume a role with: it
// mints the cluster's tokens with the access key then (assuming role_arn with it when set).
func checkCredential(d map[string][]byte, needAccessKey bool) error {
	has := func(k string) bool { return len(strings.TrimSpace(string(d[k]))) > 0 }
	switch {
	case has(api.CredentialAccessKey) != has(api.CredentialSecretKey):
		return fmt.Errorf("keys %s and %s go together", api.CredentialAccessKey, api.CredentialSecretKey)
	case !has(api.CredentialAccessKey) && !has(api.CredentialRoleARN):
		return fmt.Errorf("needs keys %s and %s (an access key), or %s (a role to assume)",
			api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialRoleARN)
	case has(api.CredentialRoleARN) && !strings.HasPrefix(strings.TrimSpace(string(d[api.CredentialRoleARN])), "arn:aws"):
		return fmt.Errorf("key %s is not an IAM role ARN (arn:aws...:iam::<account>:role/<name>)", api.CredentialRoleARN)
	case needAccessKey && !has(api.CredentialAccessKey):
		return fmt.Errorf("topology eks needs keys %s and %s here: the platform signs the cluster's tokens with that access key (and assumes %s with it when set); it has no identity of its own to assume a role with",
			api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialRoleARN)
	}
	return nil
}

// grant lets the provisioner's identity get the credential copy, and nothing else; it reports
// whether it created the grant now.
func (r *Runs) grant(ctx context.Context, c Cluster, secretName string) (bool, error) {
	granted, err := c.GrantRead(ctx, r.Identity, secretName+"-reader", secretName)
	if err != nil {
		return false, fmt.Errorf("failed to let the provisioner read the credential: %w", err)
	}
	return granted, nil
}
