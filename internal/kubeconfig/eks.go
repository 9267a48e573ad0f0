package kubeconfig

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// EKSTokenHelper is the command an EKS kubeconfig built by the terraform-runner names
// (cmd/eks-token-helper: it mints short-lived AWS-signed tokens, docs/provisioner.md#eks-token-helper). The manager never runs
// it: it reads the kubeconfig with ParseEKS and mints the same tokens in process
// (internal/aws/ekstoken). Whoever uses the delivered kubeconfig elsewhere installs the helper
// there.
const EKSTokenHelper = "/eks-token-helper"

// EKSExecAPIVersion is the exec credential API the helper speaks.
const EKSExecAPIVersion = "client.authentication.k8s.io/v1beta1"

// The exec env variables of an EKS kubeconfig: the access key the runner embeds, nothing else.
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
)

// The helper's flags (cmd/eks-token-helper), each given as two arguments: the flag, then its
// value.
const (
	FlagClusterName = "--cluster-name"
	FlagRegion      = "--region"
	FlagRoleARN     = "--role-arn"
	FlagExternalID  = "--external-id"
	FlagSessionName = "--session-name"
)

// maxEnvValue bounds one exec env value (a session token is a few KB).
const maxEnvValue = 64 << 10

var (
	// eksClusterNameRe is an EKS cluster name (CreateCluster: 1 to 100 characters, alphanumerics,
	// hyphens and underscores, starting with an alphanumeric).
	eksClusterNameRe = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_-]{0,99}$`)
	// awsRegionRe is an AWS region name (eu-north-1, us-gov-west-1, cn-north-1).
	awsRegionRe = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	// roleARNRe is an IAM role ARN in any partition.
	roleARNRe = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$`)
	// externalIDRe is sts:AssumeRole's ExternalId (API_AssumeRole.html: 2 to 1224 characters of
	// [\w+=,.@:/-]; the length is checked by ValidExternalID, Go's regexp repeats at most 1000).
	externalIDRe = regexp.MustCompile(`^[\w+=,.@:/-]+$`)
	// sessionNameRe is sts:AssumeRole's RoleSessionName (2 to 64 characters of [\w+=,.@-]).
	sessionNameRe = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
)

// ValidExternalID reports whether id is a valid sts:AssumeRole ExternalId.
func ValidExternalID(id string) bool {
	return len(id) >= 2 && len(id) <= 1224 && externalIDRe.MatchString(id)
}

// EKS is what ParseEKS read from an EKS kubeconfig.
type EKS struct {
	// Config reaches the cluster's API server: its server and CA, and no credential, exec
	// provider or proxy. The caller adds the bearer token, minted in process
	// (ekstoken.WrapTransport).
	Config *rest.Config
	// ClusterName and Region are the helper's --cluster-name and --region.
	ClusterName, Region string
	// RoleARN, ExternalID and SessionName are its --role-arn, --external-id and --session-name;
	// empty when absent.
	RoleARN, ExternalID, SessionName string
	// HasAccessKey reports whether the exec env carries an access key.
	HasAccessKey bool
	// AccessKeyID, SecretAccessKey and SessionToken are the exec env's access key, when it
	// carries one: who mints the tokens in process signs with it (never logged or shown).
	AccessKeyID, SecretAccessKey, SessionToken string
}

// ParseEKS parses raw, an EKS kubeconfig the terraform-runner built (runner.EKSKubeconfig), and
// refuses anything but exactly that shape:
//   - one cluster, one user and one context, named alike, the current context; no namespace, no
//     preferences or extensions;
//   - the cluster: an https server with a host (no credentials, query or fragment) and inline CA
//     data; nothing else (no certificate-authority file, proxy-url, insecure-skip-tls-verify,
//     tls-server-name or disable-compression);
//   - the user: an exec entry and nothing else (no token, certificates, basic auth, impersonation
//     or auth-provider);
//   - the exec entry: command EKSTokenHelper, apiVersion EKSExecAPIVersion, interactiveMode
//     Never, no provideClusterInfo or installHint; its args only the helper's own flags, each once
//     as "--flag value" (--cluster-name and --region required, --role-arn, and --external-id and
//     --session-name only with --role-arn), every value checked against AWS's rules; its env only
//     AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY, and AWS_SESSION_TOKEN with them, each once.
//
// The kubeconfig comes back from a run in the tenant's cloud account, so it is hostile input too:
// an exec env such as AWS_WEB_IDENTITY_TOKEN_FILE or AWS_ENDPOINT_URL_STS, or any other program,
// would make whoever runs it send the runner's or manager's identity elsewhere. Nothing here runs
// it: the Config returned has no exec provider. Errors name fields and entries, never values.
func ParseEKS(raw []byte) (*EKS, error) {
	cfg, err := loadUntrusted(raw)
	if err != nil {
		return nil, err
	}
	name, err := eksNames(cfg)
	if err != nil {
		return nil, err
	}
	server, ca, err := eksCluster(cfg.Clusters[name])
	if err != nil {
		return nil, err
	}
	exec, err := eksUser(cfg.AuthInfos[name])
	if err != nil {
		return nil, err
	}
	out := &EKS{}
	if err := eksArgs(exec.Args, out); err != nil {
		return nil, err
	}
	if out.HasAccessKey, err = eksEnv(exec.Env); err != nil {
		return nil, err
	}
	for _, v := range exec.Env {
		switch v.Name {
		case EnvAccessKeyID:
			out.AccessKeyID = v.Value
		case EnvSecretAccessKey:
			out.SecretAccessKey = v.Value
		case EnvSessionToken:
			out.SessionToken = v.Value
		}
	}
	out.Config = &rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		// As ParseUntrusted: never the manager's HTTP(S)_PROXY, and a bound on every request.
		Proxy:   noProxy,
		Timeout: UntrustedTimeout,
	}
	return out, nil
}

// eksNames checks that cfg has one cluster, user and context, all named like the current context,
// and nothing else, and returns that name.
func eksNames(cfg *clientcmdapi.Config) (string, error) {
	switch {
	case len(cfg.Clusters) != 1:
		return "", fmt.Errorf("an EKS kubeconfig has exactly one cluster, not %d", len(cfg.Clusters))
	case len(cfg.AuthInfos) != 1:
		return "", fmt.Errorf("an EKS kubeconfig has exactly one user, not %d", len(cfg.AuthInfos))
	case len(cfg.Contexts) != 1:
		return "", fmt.Errorf("an EKS kubeconfig has exactly one context, not %d", len(cfg.Contexts))
	case len(cfg.Extensions) > 0:
		return "", errors.New("an EKS kubeconfig has no extensions")
	case cfg.Preferences.Colors || len(cfg.Preferences.Extensions) > 0:
		return "", errors.New("an EKS kubeconfig has no preferences")
	case cfg.CurrentContext == "":
		return "", errors.New("kubeconfig has no current-context")
	}
	name := cfg.CurrentContext
	ctx, ok := cfg.Contexts[name]
	switch {
	case !ok || ctx == nil:
		return "", errors.New("kubeconfig's current-context names no context in the kubeconfig")
	case ctx.Cluster != name || ctx.AuthInfo != name:
		return "", errors.New("an EKS kubeconfig's context names its cluster and user by the context's name")
	case ctx.Namespace != "" || len(ctx.Extensions) > 0:
		return "", errors.New("an EKS kubeconfig's context has no namespace or extensions")
	}
	if cfg.Clusters[name] == nil || cfg.AuthInfos[name] == nil {
		return "", errors.New("an EKS kubeconfig's cluster and user are named like its context")
	}
	return name, nil
}

// eksCluster checks the cluster entry and returns its server and CA.
func eksCluster(c *clientcmdapi.Cluster) (string, []byte, error) {
	switch {
	case c.CertificateAuthority != "":
		return "", nil, errors.New("an EKS kubeconfig's cluster: certificate-authority (a file path) is not allowed")
	case c.ProxyURL != "":
		return "", nil, errors.New("an EKS kubeconfig's cluster: proxy-url is not allowed")
	case c.InsecureSkipTLSVerify:
		return "", nil, errors.New("an EKS kubeconfig's cluster: insecure-skip-tls-verify is not allowed")
	case c.TLSServerName != "" || c.DisableCompression || len(c.Extensions) > 0:
		return "", nil, errors.New("an EKS kubeconfig's cluster has only server and certificate-authority-data")
	case len(c.CertificateAuthorityData) == 0:
		return "", nil, errors.New("an EKS kubeconfig's cluster has no certificate-authority-data")
	}
	// url.Parse's errors quote the URL; they are not passed on.
	u, err := url.Parse(c.Server)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "":
		return "", nil, errors.New("an EKS kubeconfig's cluster: server must be an https URL with a host")
	case u.User != nil:
		return "", nil, errors.New("an EKS kubeconfig's cluster: server must not carry credentials")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return "", nil, errors.New("an EKS kubeconfig's cluster: server must have no path, query or fragment")
	}
	return c.Server, c.CertificateAuthorityData, nil
}

// eksUser checks the user entry and returns its exec entry.
func eksUser(u *clientcmdapi.AuthInfo) (*clientcmdapi.ExecConfig, error) {
	switch {
	case u.AuthProvider != nil:
		return nil, errors.New("an EKS kubeconfig's user: auth-provider plugins are not allowed")
	case u.Exec == nil:
		return nil, errors.New("an EKS kubeconfig's user has no exec entry")
	case u.Token != "" || u.TokenFile != "" || u.Username != "" || u.Password != "" ||
		u.ClientCertificate != "" || len(u.ClientCertificateData) > 0 || u.ClientKey != "" || len(u.ClientKeyData) > 0 ||
		u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0 ||
		len(u.Extensions) > 0:
		return nil, errors.New("an EKS kubeconfig's user has only an exec entry (no token, certificate, password, impersonation or extensions)")
	}
	e := u.Exec
	switch {
	case e.Command != EKSTokenHelper:
		return nil, fmt.Errorf("an EKS kubeconfig's exec command must be %s", EKSTokenHelper)
	case e.APIVersion != EKSExecAPIVersion:
		return nil, fmt.Errorf("an EKS kubeconfig's exec apiVersion must be %s", EKSExecAPIVersion)
	case e.InteractiveMode != clientcmdapi.NeverExecInteractiveMode:
		return nil, errors.New("an EKS kubeconfig's exec interactiveMode must be Never")
	case e.ProvideClusterInfo:
		return nil, errors.New("an EKS kubeconfig's exec must not set provideClusterInfo")
	case e.InstallHint != "":
		return nil, errors.New("an EKS kubeconfig's exec must not set installHint")
	}
	return e, nil
}

// eksArgs reads the helper's flags from args into out: each flag once, as two arguments, its
// value valid.
func eksArgs(args []string, out *EKS) error {
	if len(args)%2 != 0 {
		return errors.New("an EKS kubeconfig's exec args are --flag value pairs")
	}
	seen := map[string]bool{}
	for i := 0; i < len(args); i += 2 {
		flag, value := args[i], args[i+1]
		var dst *string
		var valid func(string) bool
		var what string
		switch flag {
		case FlagClusterName:
			dst, valid, what = &out.ClusterName, eksClusterNameRe.MatchString, "an EKS cluster name"
		case FlagRegion:
			dst, valid, what = &out.Region, awsRegionRe.MatchString, "an AWS region"
		case FlagRoleARN:
			dst, valid, what = &out.RoleARN, roleARNRe.MatchString, "an IAM role ARN"
		case FlagExternalID:
			dst, valid, what = &out.ExternalID, ValidExternalID, "an sts:AssumeRole external ID"
		case FlagSessionName:
			dst, valid, what = &out.SessionName, sessionNameRe.MatchString, "an sts:AssumeRole session name"
		default:
			// The argument may be a value the tenant chose: only its position is named.
			return fmt.Errorf("an EKS kubeconfig's exec args: argument %d is not one of the helper's flags (%s)", i+1,
				strings.Join([]string{FlagClusterName, FlagRegion, FlagRoleARN, FlagExternalID, FlagSessionName}, ", "))
		}
		if seen[flag] {
			return fmt.Errorf("an EKS kubeconfig's exec args: %s is given twice", flag)
		}
		seen[flag] = true
		if !valid(value) {
			return fmt.Errorf("an EKS kubeconfig's exec args: the value of %s is not %s", flag, what)
		}
		*dst = value
	}
	switch {
	case !seen[FlagClusterName] || !seen[FlagRegion]:
		return fmt.Errorf("an EKS kubeconfig's exec args need %s and %s", FlagClusterName, FlagRegion)
	case (seen[FlagExternalID] || seen[FlagSessionName]) && !seen[FlagRoleARN]:
		return fmt.Errorf("an EKS kubeconfig's exec args: %s and %s need %s", FlagExternalID, FlagSessionName, FlagRoleARN)
	}
	return nil
}

// eksEnv checks the exec env: only the access key variables, each once, the secret with the key
// and the session token with both. It reports whether an access key is there.
func eksEnv(env []clientcmdapi.ExecEnvVar) (bool, error) {
	allowed := []string{EnvAccessKeyID, EnvSecretAccessKey, EnvSessionToken}
	seen := map[string]bool{}
	for i, v := range env {
		if !slices.Contains(allowed, v.Name) {
			// Names are not secret, but a tenant chose this one: say which entry, and what may be.
			return false, fmt.Errorf("an EKS kubeconfig's exec env: entry %d is not one of %s", i+1, strings.Join(allowed, ", "))
		}
		if seen[v.Name] {
			return false, fmt.Errorf("an EKS kubeconfig's exec env: %s is given twice", v.Name)
		}
		seen[v.Name] = true
		if v.Value == "" || len(v.Value) > maxEnvValue || strings.IndexFunc(v.Value, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return false, fmt.Errorf("an EKS kubeconfig's exec env: %s is empty, too long or holds spaces or control characters", v.Name)
		}
	}
	switch {
	case seen[EnvAccessKeyID] != seen[EnvSecretAccessKey]:
		return false, fmt.Errorf("an EKS kubeconfig's exec env: %s and %s go together", EnvAccessKeyID, EnvSecretAccessKey)
	case seen[EnvSessionToken] && !seen[EnvAccessKeyID]:
		return false, fmt.Errorf("an EKS kubeconfig's exec env: %s needs %s", EnvSessionToken, EnvAccessKeyID)
	}
	return seen[EnvAccessKeyID], nil
}

// AWSCLIExecAPIVersion is the exec credential API of the kubeconfig `aws eks update-kubeconfig`
// writes: v1beta1 (kubectl 1.24 dropped v1alpha1, which AWS CLI releases before that wrote).
const AWSCLIExecAPIVersion = "client.authentication.k8s.io/v1beta1"

// ForTenant returns the kubeconfig of EKS cluster e that a tenant uses where they sit: the
// cluster's server and CA, and the exec entry `aws eks update-kubeconfig` writes (aws-cli
// awscli/customizations/eks/update_kubeconfig.py, EKSClient.get_user_entry: command aws, args
// --region <region> eks get-token --cluster-name <name>; here with --output json, so a tenant
// whose AWS CLI defaults to another output format still prints an ExecCredential), run with the
// tenant's own AWS identity: no credential, role or external ID of the platform's is in it (the
// platform's copy, with the helper only the manager's image has, stays on the backend).
func ForTenant(e *EKS) ([]byte, error) {
	if e == nil || e.Config == nil || e.ClusterName == "" || e.Region == "" {
		return nil, errors.New("an EKS kubeconfig needs the cluster's server, name and region")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[e.ClusterName] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	cfg.AuthInfos[e.ClusterName] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: AWSCLIExecAPIVersion,
		Command:    "aws",
		Args:       []string{"--region", e.Region, "eks", "get-token", "--cluster-name", e.ClusterName, "--output", "json"},
		// The AWS CLI may ask for an MFA code (client-go's default for v1beta1).
		InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode,
	}}
	cfg.Contexts[e.ClusterName] = &clientcmdapi.Context{Cluster: e.ClusterName, AuthInfo: e.ClusterName}
	cfg.CurrentContext = e.ClusterName
	return clientcmd.Write(*cfg)
}
