package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// AssumeRoleDuration is how long the role session's credentials last. Terraform gets them once,
// in its environment, so they must outlive init, plan and apply: one hour is the longest STS
// grants a role with the default MaxSessionDuration (and the cap for role chaining). The
// runner's own calls refresh theirs before they expire.
const AssumeRoleDuration = time.Hour

// maxCredentialFile bounds what is read from one credential file (a key is a few hundred bytes,
// a session token a few KB).
const maxCredentialFile = 64 << 10

// Credential is the run's AWS credential as the credential Secret's keys (api.Credential*).
type Credential struct {
	// AccessKey and SecretKey (and SessionToken with temporary keys) are a static access key.
	AccessKey, SecretKey, SessionToken string
	// RoleARN is a role to assume, with ExternalID when its trust policy requires one. With an
	// access key, that key assumes it; without one, the runner's default credentials do.
	RoleARN, ExternalID string
}

var (
	// roleARNRe is an IAM role ARN in any partition.
	roleARNRe = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$`)
	// sessionNameInvalid are the characters sts:AssumeRole's RoleSessionName does not allow.
	sessionNameInvalid = regexp.MustCompile(`[^\w+=,.@-]`)
)

// ReadCredential reads the credential from dir, where the kubelet projects the credential
// Secret's keys as files. Unknown files (and the kubelet's ..data entries) are ignored;
// surrounding whitespace of a value is dropped (no key, token or ARN contains any).
func ReadCredential(dir string) (Credential, error) {
	read := func(key string) (string, error) {
		f, err := os.Open(filepath.Join(dir, key))
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("failed to read credential key %s: %w", key, err)
		}
		defer func() { _ = f.Close() }()
		b, err := io.ReadAll(io.LimitReader(f, maxCredentialFile+1))
		if err != nil {
			return "", fmt.Errorf("failed to read credential key %s: %w", key, err)
		}
		if len(b) > maxCredentialFile {
			return "", fmt.Errorf("credential key %s is larger than %d bytes", key, maxCredentialFile)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var c Credential
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{
		{api.CredentialAccessKey, &c.AccessKey},
		{api.CredentialSecretKey, &c.SecretKey},
		{api.CredentialSessionToken, &c.SessionToken},
		{api.CredentialRoleARN, &c.RoleARN},
		{api.CredentialExternalID, &c.ExternalID},
	} {
		if *f.dst, err = read(f.key); err != nil {
			return Credential{}, err
		}
	}
	return c, c.Validate()
}

// Validate checks that c is a usable credential. Its errors name keys, never values.
func (c Credential) Validate() error {
	switch {
	case (c.AccessKey == "") != (c.SecretKey == ""):
		return fmt.Errorf("credential has only one of %s and %s", api.CredentialAccessKey, api.CredentialSecretKey)
	case c.SessionToken != "" && c.AccessKey == "":
		return fmt.Errorf("credential has %s without %s", api.CredentialSessionToken, api.CredentialAccessKey)
	case c.AccessKey == "" && c.RoleARN == "":
		return fmt.Errorf("credential has neither %s/%s nor %s", api.CredentialAccessKey, api.CredentialSecretKey, api.CredentialRoleARN)
	case c.ExternalID != "" && c.RoleARN == "":
		return fmt.Errorf("credential has %s without %s", api.CredentialExternalID, api.CredentialRoleARN)
	case c.RoleARN != "" && !roleARNRe.MatchString(c.RoleARN):
		return fmt.Errorf("credential's %s is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", api.CredentialRoleARN)
	}
	return nil
}

// secrets are the values that must never appear in a message.
func (c Credential) secrets() []string {
	return []string{c.SecretKey, c.SessionToken, c.AccessKey, c.ExternalID}
}

// RoleSessionName is the role session name of run id: kubeopera-provision-<id>, with characters
// STS does not allow replaced and cut to STS's 64 characters.
func RoleSessionName(id string) string {
	name := sessionNameInvalid.ReplaceAllString("kubeopera-provision-"+id, "-")
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// AWSConfig returns the run's aws.Config in region: the credential's static key, or the SDK's
// default credential chain without one; with a role, the temporary credentials of
// sts:AssumeRole (ExternalId, session name RoleSessionName(runID), AssumeRoleDuration), called
// at the STS endpoint of the first config when the credentials are first retrieved. Endpoints
// come from the SDK's own configuration (AWS_ENDPOINT_URL and friends).
func AWSConfig(ctx context.Context, c Credential, region, runID string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithRegion(region)}
	if c.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, c.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("failed to load the AWS configuration: %w", err)
	}
	if c.RoleARN == "" {
		return cfg, nil
	}
	provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), c.RoleARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = RoleSessionName(runID)
		o.Duration = AssumeRoleDuration
		if c.ExternalID != "" {
			o.ExternalID = aws.String(c.ExternalID)
		}
	})
	cfg.Credentials = aws.NewCredentialsCache(provider)
	return cfg, nil
}

// credentialEnv are the variables through which an AWS SDK (Terraform's included) finds
// credentials. Terraform's environment drops every one the runner inherited and gets exactly
// the run's resolved credentials instead.
var credentialEnv = []string{
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
	"AWS_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
	"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
}

// TerraformEnv is Terraform's environment: environ (the runner's) without any credential source
// of its own, the runner's Kubernetes identity or the variables terraform-exec manages itself,
// plus the resolved credentials creds and the region.
func TerraformEnv(environ []string, creds aws.Credentials, region string) map[string]string {
	env := make(map[string]string, len(environ)+4)
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, k := range credentialEnv {
		delete(env, k)
	}
	delete(env, "KUBECONFIG")
	for k := range env {
		// terraform-exec refuses these (tfexec.ProhibitedEnv): it sets them itself.
		if strings.HasPrefix(k, "TF_VAR_") || strings.HasPrefix(k, "TF_CLI_ARGS") || strings.HasPrefix(k, "TF_LOG") ||
			k == "TF_INPUT" || k == "TF_IN_AUTOMATION" || k == "TF_REATTACH_PROVIDERS" || k == "TF_APPEND_USER_AGENT" ||
			k == "TF_WORKSPACE" || k == "TF_DISABLE_PLUGIN_TLS" || k == "TF_SKIP_PROVIDER_VERIFY" {
			delete(env, k)
		}
	}
	env["AWS_ACCESS_KEY_ID"] = creds.AccessKeyID
	env["AWS_SECRET_ACCESS_KEY"] = creds.SecretAccessKey
	if creds.SessionToken != "" {
		env["AWS_SESSION_TOKEN"] = creds.SessionToken
	}
	env["AWS_REGION"] = region
	return env
}

// Scrub replaces every non-empty secret in s with "[redacted]", longest first (so a secret that
// contains another is replaced whole).
func Scrub(s string, secrets ...string) string {
	sorted := make([]string, 0, len(secrets))
	for _, v := range secrets {
		if len(v) >= 4 { // shorter values would redact ordinary words
			sorted = append(sorted, v)
		}
	}
	slices.SortFunc(sorted, func(a, b string) int { return len(b) - len(a) })
	for _, v := range sorted {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}
