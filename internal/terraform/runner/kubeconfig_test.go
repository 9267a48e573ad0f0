package runner

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/test/framework"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/kubeopera/kubeopera/internal/kubeconfig"
)

func TestEKSKubeconfig(t *testing.T) {
	ca := framework.SelfSignedCA(t)
	for name, tc := range map[string]struct {
		cred     Credential
		caOutput string
		args     []string
		env      []clientcmdapi.ExecEnvVar
	}{
		"access key": {
			cred:     Credential{AccessKey: "AKIAEXAMPLE", SecretKey: "s3cr3t"},
			caOutput: base64.StdEncoding.EncodeToString(ca), // as EKS reports certificate_authority[0].data
			args:     []string{"--cluster-name", "c-1", "--region", "eu-north-1"},
			env:      []clientcmdapi.ExecEnvVar{{Name: "AWS_ACCESS_KEY_ID", Value: "AKIAEXAMPLE"}, {Name: "AWS_SECRET_ACCESS_KEY", Value: "s3cr3t"}},
		},
		"a role with the platform's external id": {
			cred:     Credential{AccessKey: "AKIAEXAMPLE", SecretKey: "s3cr3t", RoleARN: "arn:aws:iam::123456789012:role/eks", ExternalID: "kubeopera-0a1b2c3d"},
			caOutput: base64.StdEncoding.EncodeToString(ca),
			args:     []string{"--cluster-name", "c-1", "--region", "eu-north-1", "--role-arn", "arn:aws:iam::123456789012:role/eks", "--external-id", "kubeopera-0a1b2c3d"},
			env:      []clientcmdapi.ExecEnvVar{{Name: "AWS_ACCESS_KEY_ID", Value: "AKIAEXAMPLE"}, {Name: "AWS_SECRET_ACCESS_KEY", Value: "s3cr3t"}},
		},
		"temporary key and a role with an external id": {
			cred:     Credential{AccessKey: "ASIAEXAMPLE", SecretKey: "s3cr3t", SessionToken: "tok", RoleARN: "arn:aws:iam::123456789012:role/eks", ExternalID: "ext-1"},
			caOutput: string(ca), // PEM as it is
			args:     []string{"--cluster-name", "c-1", "--region", "eu-north-1", "--role-arn", "arn:aws:iam::123456789012:role/eks", "--external-id", "ext-1"},
			env: []clientcmdapi.ExecEnvVar{
				{Name: "AWS_ACCESS_KEY_ID", Value: "ASIAEXAMPLE"}, {Name: "AWS_SECRET_ACCESS_KEY", Value: "s3cr3t"}, {Name: "AWS_SESSION_TOKEN", Value: "tok"},
			},
		},
		"a role assumed with the helper's own credentials": {
			cred:     Credential{RoleARN: "arn:aws:iam::123456789012:role/eks"},
			caOutput: base64.StdEncoding.EncodeToString(ca),
			args:     []string{"--cluster-name", "c-1", "--region", "eu-north-1", "--role-arn", "arn:aws:iam::123456789012:role/eks"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := EKSKubeconfig(EKSCluster{Name: "c-1", Endpoint: "https://ABC.gr7.eu-north-1.eks.amazonaws.com", CACertificate: tc.caOutput, Region: "eu-north-1", Credential: tc.cred})
			if err != nil {
				t.Fatal(err)
			}
			// It is YAML client-go reads back to the same configuration.
			var doc map[string]any
			if err := yaml.Unmarshal(raw, &doc); err != nil || doc["kind"] != "Config" || doc["apiVersion"] != "v1" {
				t.Fatalf("not a kubeconfig document: %v\n%s", err, raw)
			}
			cfg, err := clientcmd.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.CurrentContext != "c-1" || cfg.Contexts["c-1"].Cluster != "c-1" || cfg.Contexts["c-1"].AuthInfo != "c-1" {
				t.Errorf("context %q %+v", cfg.CurrentContext, cfg.Contexts)
			}
			cluster := cfg.Clusters["c-1"]
			if cluster.Server != "https://ABC.gr7.eu-north-1.eks.amazonaws.com" || string(cluster.CertificateAuthorityData) != string(ca) {
				t.Errorf("cluster %+v", cluster)
			}
			exec := cfg.AuthInfos["c-1"].Exec
			if exec.Command != EKSTokenHelper || exec.APIVersion != "client.authentication.k8s.io/v1beta1" || exec.InteractiveMode != clientcmdapi.NeverExecInteractiveMode {
				t.Errorf("exec %+v", exec)
			}
			if d := cmp.Diff(tc.args, exec.Args); d != "" {
				t.Errorf("args (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.env, exec.Env); d != "" {
				t.Errorf("env (-want +got):\n%s", d)
			}
			// The manager accepts it as an EKS kubeconfig, reading back the helper's flags.
			eks, err := kubeconfig.ParseEKS(raw)
			if err != nil {
				t.Fatalf("kubeconfig.ParseEKS: %v", err)
			}
			if eks.ClusterName != "c-1" || eks.Region != "eu-north-1" || eks.RoleARN != tc.cred.RoleARN || eks.ExternalID != tc.cred.ExternalID || eks.HasAccessKey != (tc.cred.AccessKey != "") {
				t.Errorf("kubeconfig.ParseEKS = %+v", eks)
			}
			// client-go turns it into an exec provider, with no other credential.
			rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, "", &clientcmd.ConfigOverrides{}, nil).ClientConfig()
			if err != nil || rc.ExecProvider == nil || rc.BearerToken != "" || rc.CertData != nil {
				t.Errorf("rest config %+v %v", rc, err)
			}
		})
	}

	for name, c := range map[string]EKSCluster{
		"http endpoint": {Name: "c", Region: "r", Endpoint: "http://x", CACertificate: string(ca)},
		"no CA":         {Name: "c", Region: "r", Endpoint: "https://x", CACertificate: base64.StdEncoding.EncodeToString([]byte("hello"))},
		"garbage CA":    {Name: "c", Region: "r", Endpoint: "https://x", CACertificate: "%%%"},
		"no name":       {Region: "r", Endpoint: "https://x", CACertificate: string(ca)},
		// Terraform's outputs come from state in the tenant's account: a cluster_name that would
		// become a flag of the helper, an endpoint with a path, a region that is no region.
		"a cluster name that is a flag": {Name: "--region", Region: "eu-north-1", Endpoint: "https://x", CACertificate: string(ca)},
		"a cluster name with spaces":    {Name: "c 1", Region: "eu-north-1", Endpoint: "https://x", CACertificate: string(ca)},
		"an endpoint with a path":       {Name: "c-1", Region: "eu-north-1", Endpoint: "https://x/api", CACertificate: string(ca)},
		"a region that is a URL":        {Name: "c-1", Region: "https://attacker.example", Endpoint: "https://x", CACertificate: string(ca)},
	} {
		if _, err := EKSKubeconfig(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// parameters answers GetParameter from a script, one answer per call (the last repeats).
type parameters struct {
	answers []func() (*ssm.GetParameterOutput, error)
	calls   int
}

func (p *parameters) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	if !aws.ToBool(in.WithDecryption) {
		return nil, errors.New("read without decryption")
	}
	i := min(p.calls, len(p.answers)-1)
	p.calls++
	return p.answers[i]()
}

func value(v string) func() (*ssm.GetParameterOutput, error) {
	return func() (*ssm.GetParameterOutput, error) {
		return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Value: aws.String(v)}}, nil
	}
}

func failure(err error) func() (*ssm.GetParameterOutput, error) {
	return func() (*ssm.GetParameterOutput, error) { return nil, err }
}

// adminConf is the shape of kubeadm's admin.conf: one cluster with inline CA data, a user with an
// inline client certificate and key, its context current. "s3cr3t" marks what no error may quote.
const adminConf = `apiVersion: v1
kind: Config
clusters:
- name: kubernetes
  cluster:
    server: https://10.0.1.10:6443
    certificate-authority-data: czNjcjN0LWNh
contexts:
- name: kubernetes-admin@kubernetes
  context: {cluster: kubernetes, user: kubernetes-admin}
current-context: kubernetes-admin@kubernetes
users:
- name: kubernetes-admin
  user:
    client-certificate-data: czNjcjN0LWNlcnQ=
    client-key-data: czNjcjN0LWtleQ==
`

func TestWaitForAdminKubeconfig(t *testing.T) {
	admin := adminConf
	published := base64.StdEncoding.EncodeToString([]byte(admin))
	// hostile is what a tenant who controls the account can write into the parameter instead.
	hostile := func(user string) func() (*ssm.GetParameterOutput, error) {
		return value(base64.StdEncoding.EncodeToString([]byte(strings.Replace(admin, "    client-certificate-data: czNjcjN0LWNlcnQ=\n    client-key-data: czNjcjN0LWtleQ==\n", user, 1))))
	}
	for name, tc := range map[string]struct {
		answers []func() (*ssm.GetParameterOutput, error)
		calls   int
		err     string
	}{
		"pending, then published": {answers: []func() (*ssm.GetParameterOutput, error){value("PENDING"), value("PENDING"), value(published)}, calls: 3},
		"not visible yet, throttled": {answers: []func() (*ssm.GetParameterOutput, error){
			failure(&ssmtypes.ParameterNotFound{}), failure(&smithy.GenericAPIError{Code: "ThrottlingException"}), value(published),
		}, calls: 3},
		"never published":        {answers: []func() (*ssm.GetParameterOutput, error){value("PENDING")}, err: "did not publish its admin kubeconfig within 300ms (SSM parameter /c/admin is still PENDING)"},
		"access denied":          {answers: []func() (*ssm.GetParameterOutput, error){failure(&smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no"})}, calls: 1, err: "AccessDeniedException"},
		"not base64":             {answers: []func() (*ssm.GetParameterOutput, error){value("apiVersion: v1")}, calls: 1, err: "does not hold a base64 kubeconfig"},
		"not a kubeconfig":       {answers: []func() (*ssm.GetParameterOutput, error){value(base64.StdEncoding.EncodeToString([]byte("hello: [")))}, calls: 1, err: "holds a kubeconfig the platform refuses: kubeconfig is not valid YAML"},
		"kubeconfig, no cluster": {answers: []func() (*ssm.GetParameterOutput, error){value(base64.StdEncoding.EncodeToString([]byte("apiVersion: v1\nkind: Config\n")))}, calls: 1, err: "holds a kubeconfig the platform refuses: kubeconfig has no clusters"},
		"an exec plugin with a hostile env": {answers: []func() (*ssm.GetParameterOutput, error){hostile(`    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: /eks-token-helper
      args: [--cluster-name, c-1, --region, eu-north-1]
      env:
      - {name: AWS_WEB_IDENTITY_TOKEN_FILE, value: /etc/kcp/s3cr3t}
      - {name: AWS_ENDPOINT_URL_STS, value: "https://s3cr3t.attacker.example"}
`)}, calls: 1, err: `holds a kubeconfig the platform refuses: kubeconfig's user "kubernetes-admin": exec plugins are not allowed`},
		"an exec plugin of another program": {answers: []func() (*ssm.GetParameterOutput, error){hostile(`    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: /bin/s3cr3t
`)}, calls: 1, err: "exec plugins are not allowed"},
		"an auth-provider": {answers: []func() (*ssm.GetParameterOutput, error){hostile("    auth-provider: {name: oidc, config: {idp-issuer-url: 'https://s3cr3t.example'}}\n")}, calls: 1, err: "auth-provider plugins are not allowed"},
		"a token file":     {answers: []func() (*ssm.GetParameterOutput, error){hostile("    tokenFile: /var/run/secrets/s3cr3t\n")}, calls: 1, err: "tokenFile (a file path) is not allowed"},
		"a proxy": {answers: []func() (*ssm.GetParameterOutput, error){value(base64.StdEncoding.EncodeToString([]byte(strings.Replace(admin,
			"    server: https://10.0.1.10:6443\n", "    server: https://10.0.1.10:6443\n    proxy-url: http://s3cr3t.attacker.example\n", 1))))}, calls: 1, err: "proxy-url is not allowed"},
	} {
		t.Run(name, func(t *testing.T) {
			p := &parameters{answers: tc.answers}
			got, err := WaitForAdminKubeconfig(t.Context(), p, "/c/admin", 10*time.Millisecond, 300*time.Millisecond)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error %q quotes the parameter's content", err)
				}
			} else if err != nil || string(got) != admin {
				t.Fatalf("got %q %v", got, err)
			}
			if tc.calls != 0 && p.calls != tc.calls {
				t.Errorf("%d GetParameter calls, want %d", p.calls, tc.calls)
			}
		})
	}
}
