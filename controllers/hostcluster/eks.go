package hostcluster

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/client-go/rest"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/aws/ekstoken"
	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// eksSessionName is the role session name of the manager's sts:AssumeRole for EKS tokens; it
// shows in the tenant's CloudTrail and in the assumed-role ARN their cluster maps to a user.
const eksSessionName = "kubeopera-manager"

// eksConfig returns the rest.Config of a provisioned EKS cluster from its stored kubeconfig raw,
// without ever running the exec plugin it names: kubeconfig.ParseEKS checks it is exactly the
// runner's shape and gives the server and CA; the bearer token is minted in process
// (ekstoken.WrapTransport) with the access key of the platform's copy of the tenant's credential
// (never the manager's own AWS identity or environment), assuming the credential's role with the
// workspace's external ID, at STS's regional endpoint of the kubeconfig's --region (or
// AWSEndpointURL).
func (r *Reconciler) eksConfig(ctx context.Context, s *scope, raw []byte) (*rest.Config, error) {
	eks, err := kubeconfig.ParseEKS(raw)
	if err != nil {
		return nil, reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "the provisioned cluster's kubeconfig: %v", err)
	}
	cred, err := r.credentialCopy(ctx, s)
	if err != nil {
		return nil, err
	}
	externalID, err := r.workspaceExternalID(ctx, s)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(eks.Config)
	in := eksTokenInputs{
		cluster: eks.ClusterName, region: eks.Region, endpoint: r.AWSEndpointURL,
		creds:   aws.Credentials{AccessKeyID: cred.accessKey, SecretAccessKey: cred.secretKey, SessionToken: cred.sessionToken},
		roleARN: cred.roleARN, externalID: externalID,
	}
	if cred.accessKey == "" {
		// credentialCopy let it through: a role and the platform's identity to assume it with.
		in.platform = r.PlatformAWS
	}
	cfg.WrapTransport, err = r.eksTokens.wrap(s.opKey("eks"), in)
	if err != nil {
		return nil, reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "the provisioned cluster's kubeconfig: %v", err)
	}
	return cfg, nil
}

// storedCredential is the platform's copy of a tenant's cloud credential.
type storedCredential struct {
	accessKey, secretKey, sessionToken, roleARN string
}

// credentialCopy reads the credential copy copyCredential wrote into kcp-<fp>: the one the
// run used.
func (r *Reconciler) credentialCopy(ctx context.Context, s *scope) (storedCredential, error) {
	name := cloudCredentialSecretName(s.hc.Spec.ClusterID)
	sec, found, err := s.Stored(ctx, name)
	switch {
	case err != nil:
		return storedCredential{}, err
	case !found:
		return storedCredential{}, fmt.Errorf("the platform's copy of the cloud credential (Secret %s in the workspace's backend namespace) is missing", name)
	}
	get := func(k string) string { return strings.TrimSpace(string(sec.Data[k])) }
	c := storedCredential{accessKey: get(api.CredentialAccessKey), secretKey: get(api.CredentialSecretKey), sessionToken: get(api.CredentialSessionToken), roleARN: get(api.CredentialRoleARN)}
	switch {
	case c.accessKey != "" && c.secretKey != "":
	case c.roleARN != "" && r.PlatformAWS != nil:
		// Role only: the platform's identity assumes it, with the workspace's external ID.
	default:
		return storedCredential{}, reconcile.Stalledf(kov1alpha1.InvalidCredentialReason,
			"the cloud credential has no %s and %s: the platform signs the EKS cluster's tokens with that access key, or with the session of %s, never with its own identity", api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialRoleARN)
	}
	return c, nil
}

// eksTokenInputs is everything a HostCluster's EKS tokens are minted from: the tenant's access
// key (creds), or, for a role-only credential, the platform's identity (platform), which only
// ever signs the sts:AssumeRole of roleARN.
type eksTokenInputs struct {
	cluster, region, endpoint string
	creds                     aws.Credentials
	platform                  aws.CredentialsProvider
	roleARN, externalID       string
}

// eksTokens keeps one token-minting transport wrapper per HostCluster across passes (each pass
// builds a new target client), so a token, and an assumed role's session, is minted again only
// when it expires or its inputs change, not every pass. Entries go with their HostCluster
// (forget).
type eksTokens struct {
	mu      sync.Mutex
	entries map[string]eksTokenEntry
}

type eksTokenEntry struct {
	sum  [sha256.Size]byte
	wrap func(http.RoundTripper) http.RoundTripper
}

// wrap returns the transport wrapper of HostCluster key for in, made anew when in changed.
func (t *eksTokens) wrap(key string, in eksTokenInputs) (func(http.RoundTripper) http.RoundTripper, error) {
	// The inputs' digest, not the inputs: the entry holds no copy of the secret key beyond the
	// wrapper's own.
	sum := sha256.Sum256([]byte(strings.Join([]string{in.cluster, in.region, in.endpoint, in.creds.AccessKeyID,
		in.creds.SecretAccessKey, in.creds.SessionToken, in.roleARN, in.externalID, fmt.Sprint(in.platform != nil)}, "\x00")))
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[key]; ok && e.sum == sum {
		return e.wrap, nil
	}
	cfg := ekstoken.StaticConfig(in.region, in.endpoint, in.creds)
	if in.platform != nil {
		if in.roleARN == "" {
			// The platform's identity never signs a tenant's cluster token itself.
			return nil, fmt.Errorf("the platform's AWS identity is used only to assume a role, and the credential names none")
		}
		cfg.Credentials = aws.NewCredentialsCache(in.platform)
	}
	if in.roleARN != "" {
		var err error
		if cfg, err = ekstoken.AssumeRole(cfg, ekstoken.Role{ARN: in.roleARN, ExternalID: in.externalID, SessionName: eksSessionName}); err != nil {
			return nil, err
		}
	}
	wrap, err := ekstoken.WrapTransport(cfg, in.cluster)
	if err != nil {
		return nil, err
	}
	if t.entries == nil {
		t.entries = map[string]eksTokenEntry{}
	}
	t.entries[key] = eksTokenEntry{sum: sum, wrap: wrap}
	return wrap, nil
}

// forget drops HostCluster key's entry.
func (t *eksTokens) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, key)
}
