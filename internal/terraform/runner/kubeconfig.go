package runner

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeopera/kubeopera/internal/kubeconfig"
)

// EKSTokenHelper is the exec plugin an EKS kubeconfig names (cmd/eks-token-helper). The manager
// never runs it: it reads the kubeconfig with kubeconfig.ParseEKS and mints the tokens in process.
const EKSTokenHelper = kubeconfig.EKSTokenHelper

// ExecAPIVersion is the exec credential API the helper speaks.
const ExecAPIVersion = kubeconfig.EKSExecAPIVersion

// EKSCluster is what an EKS kubeconfig is built from: the eks root module's outputs and the
// run's region and credential.
type EKSCluster struct {
	// Name, Endpoint and CACertificate are outputs cluster_name, cluster_endpoint and
	// cluster_ca_certificate (base64 of the PEM bundle as EKS reports it, or the PEM itself).
	Name, Endpoint, CACertificate string
	// Region is the cluster's region.
	Region string
	// Credential signs the helper's tokens: its access key goes into the exec block's env, its
	// role into --role-arn/--external-id. Without an access key the helper uses its own default
	// credentials (to assume the role).
	Credential Credential
}

// EKSKubeconfig builds cluster c's kubeconfig with client-go's types, serialised by
// clientcmd.Write: one cluster, user and context named after the cluster; the user runs
// EKSTokenHelper (exec API v1beta1, never interactive) with --cluster-name and --region, plus
// --role-arn and --external-id for a role credential, and the credential's access key in
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. The credential is embedded
// here, at construction (docs/provisioner.md#kubeconfig-retrieval), never round-tripped through Terraform. The cluster's name and
// endpoint come from Terraform's state in the tenant's account: the result must pass
// kubeconfig.ParseEKS, the manager's check, or no kubeconfig is published.
func EKSKubeconfig(c EKSCluster) ([]byte, error) {
	if c.Name == "" || c.Region == "" {
		return nil, errors.New("an EKS kubeconfig needs the cluster's name and region")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("output %s is not an https URL", OutputClusterEndpoint)
	}
	ca, err := decodeCA(c.CACertificate)
	if err != nil {
		return nil, err
	}
	args := []string{"--cluster-name", c.Name, "--region", c.Region}
	if c.Credential.RoleARN != "" {
		args = append(args, "--role-arn", c.Credential.RoleARN)
		if c.Credential.ExternalID != "" {
			args = append(args, "--external-id", c.Credential.ExternalID)
		}
	}
	var env []clientcmdapi.ExecEnvVar
	if c.Credential.AccessKey != "" {
		env = append(env,
			clientcmdapi.ExecEnvVar{Name: "AWS_ACCESS_KEY_ID", Value: c.Credential.AccessKey},
			clientcmdapi.ExecEnvVar{Name: "AWS_SECRET_ACCESS_KEY", Value: c.Credential.SecretKey})
		if c.Credential.SessionToken != "" {
			env = append(env, clientcmdapi.ExecEnvVar{Name: "AWS_SESSION_TOKEN", Value: c.Credential.SessionToken})
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Endpoint, CertificateAuthorityData: ca}
	cfg.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      ExecAPIVersion,
		Command:         EKSTokenHelper,
		Args:            args,
		Env:             env,
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	cfg.CurrentContext = c.Name
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to serialise the EKS kubeconfig: %w", err)
	}
	if _, err := kubeconfig.ParseEKS(raw); err != nil {
		return nil, fmt.Errorf("the outputs make an EKS kubeconfig the platform refuses: %w", err)
	}
	return raw, nil
}

// decodeCA returns the PEM bundle of output cluster_ca_certificate: the base64 EKS reports
// (certificate_authority[0].data) or PEM as it is. It must hold at least one certificate.
func decodeCA(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	b := []byte(s + "\n")
	if !strings.HasPrefix(s, "-----BEGIN") {
		var err error
		if b, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, fmt.Errorf("output %s is neither PEM nor base64 of PEM", OutputClusterCACertificate)
		}
	}
	if block, _ := pem.Decode(b); block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("output %s holds no PEM certificate", OutputClusterCACertificate)
	}
	return b, nil
}

// ParameterAPI is the part of the SSM API WaitForAdminKubeconfig uses (*ssm.Client).
type ParameterAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// retryableSSMErrors are the SSM errors worth waiting out: the parameter not (yet) visible, and
// the service's transient ones. Anything else (AccessDenied, a bad name) fails at once.
var retryableSSMErrors = map[string]bool{
	"ParameterNotFound": true, "ThrottlingException": true, "InternalServerError": true,
	"ServiceUnavailable": true, "RequestTimeout": true,
}

// WaitForAdminKubeconfig reads SSM parameter name (with decryption) every interval, the first
// time at once, until it holds something other than SSMPendingValue, and returns that decoded:
// the control-plane node of a vanilla_kubeadm cluster writes its admin.conf there base64-encoded
// once kubeadm init is done (docs/provisioner.md#kubeconfig-retrieval). It gives up after timeout, or at once on an error that
// waiting cannot fix; the result must be a kubeconfig with a cluster.
func WaitForAdminKubeconfig(ctx context.Context, client ParameterAPI, name string, interval, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		out, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
		switch {
		case err == nil && out.Parameter != nil && strings.TrimSpace(aws.ToString(out.Parameter.Value)) != SSMPendingValue:
			return decodeAdminKubeconfig(name, aws.ToString(out.Parameter.Value))
		case err == nil:
			last = fmt.Errorf("SSM parameter %s is still %s", name, SSMPendingValue)
		case ctx.Err() != nil:
		case !retryableSSMErrors[apiErrorCode(err)] && apiErrorCode(err) != "":
			return nil, fmt.Errorf("failed to read SSM parameter %s: %w", name, err)
		default:
			last = fmt.Errorf("failed to read SSM parameter %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("the control plane did not publish its admin kubeconfig within %s (%v)", timeout, last)
			}
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// decodeAdminKubeconfig decodes the base64 admin.conf in parameter name and checks it as the
// manager will (kubeconfig.ParseUntrusted): the parameter lives in the tenant's account, so
// whoever controls that account writes it, and a kubeconfig that would make its user run a
// program (exec, auth-provider), read a file or use a proxy is refused here, before it is
// published. The error names what is wrong, never the content.
func decodeAdminKubeconfig(name, value string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
	if err != nil {
		return nil, fmt.Errorf("SSM parameter %s does not hold a base64 kubeconfig", name)
	}
	if _, err := kubeconfig.ParseUntrusted(raw); err != nil {
		return nil, fmt.Errorf("SSM parameter %s holds a kubeconfig the platform refuses: %w", name, err)
	}
	return raw, nil
}
