package kubeconfig

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// eksBase is an EKS kubeconfig of the shape runner.EKSKubeconfig writes: a temporary access key
// assuming a role with an external ID. Every secret value contains "s3cr3t": no error may.
func eksBase() *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c-1"] = &clientcmdapi.Cluster{Server: "https://ABCDEF.gr7.eu-north-1.eks.amazonaws.com", CertificateAuthorityData: []byte("s3cr3t-ca")}
	cfg.AuthInfos["c-1"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: EKSExecAPIVersion,
		Command:    EKSTokenHelper,
		Args: []string{FlagClusterName, "c-1", FlagRegion, "eu-north-1",
			FlagRoleARN, "arn:aws:iam::123456789012:role/eks-admin", FlagExternalID, "kubeopera-0123abcd"},
		Env: []clientcmdapi.ExecEnvVar{
			{Name: EnvAccessKeyID, Value: "ASIAS3CR3TEXAMPLE000"},
			{Name: EnvSecretAccessKey, Value: "s3cr3t/secret/key"},
			{Name: EnvSessionToken, Value: "s3cr3t-session-token"},
		},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	cfg.Contexts["c-1"] = &clientcmdapi.Context{Cluster: "c-1", AuthInfo: "c-1"}
	cfg.CurrentContext = "c-1"
	return cfg
}

func eksYAML(t *testing.T, mutate func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg := eksBase()
	if mutate != nil {
		mutate(cfg)
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseEKS(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*clientcmdapi.Config)
		want   EKS
	}{
		"a role with an external id, a temporary key": {
			want: EKS{ClusterName: "c-1", Region: "eu-north-1", RoleARN: "arn:aws:iam::123456789012:role/eks-admin", ExternalID: "kubeopera-0123abcd", HasAccessKey: true,
				AccessKeyID: "ASIAS3CR3TEXAMPLE000", SecretAccessKey: "s3cr3t/secret/key", SessionToken: "s3cr3t-session-token"},
		},
		"an access key only": {
			mutate: func(c *clientcmdapi.Config) {
				e := c.AuthInfos["c-1"].Exec
				e.Args = e.Args[:4]
				e.Env = e.Env[:2]
			},
			want: EKS{ClusterName: "c-1", Region: "eu-north-1", HasAccessKey: true, AccessKeyID: "ASIAS3CR3TEXAMPLE000", SecretAccessKey: "s3cr3t/secret/key"},
		},
		"a role only, with a session name": {
			mutate: func(c *clientcmdapi.Config) {
				e := c.AuthInfos["c-1"].Exec
				e.Args = append(e.Args[:6], FlagSessionName, "kubeopera-eks-token")
				e.Env = nil
			},
			want: EKS{ClusterName: "c-1", Region: "eu-north-1", RoleARN: "arn:aws:iam::123456789012:role/eks-admin", SessionName: "kubeopera-eks-token"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseEKS(eksYAML(t, tc.mutate))
			if err != nil {
				t.Fatalf("ParseEKS: %v", err)
			}
			rc := got.Config
			got.Config = nil
			if *got != tc.want {
				t.Errorf("ParseEKS = %+v, want %+v", *got, tc.want)
			}
			if rc.Host != "https://ABCDEF.gr7.eu-north-1.eks.amazonaws.com" || string(rc.CAData) != "s3cr3t-ca" {
				t.Errorf("rest config: host %q, CA %q", rc.Host, rc.CAData)
			}
			// Nothing in the config runs a program or carries a credential: the caller adds the
			// token, minted in process.
			if rc.ExecProvider != nil || rc.AuthProvider != nil || rc.BearerToken != "" || rc.BearerTokenFile != "" ||
				rc.Username != "" || rc.CertData != nil || rc.KeyData != nil || rc.WrapTransport != nil || rc.Insecure {
				t.Errorf("rest config carries a credential or a plugin: %+v", rc)
			}
			if rc.Proxy == nil || rc.Timeout != UntrustedTimeout {
				t.Errorf("rest config: proxy func set %t, timeout %s", rc.Proxy != nil, rc.Timeout)
			}
		})
	}
}

// TestParseEKSRefuses: every way a hostile kubeconfig (written back from a tenant's cloud account)
// could make its user run a program, talk to another STS, read a file or reach something else is
// refused, with a message naming the field and never a value.
func TestParseEKSRefuses(t *testing.T) {
	exec := func(f func(*clientcmdapi.ExecConfig)) func(*clientcmdapi.Config) {
		return func(c *clientcmdapi.Config) { f(c.AuthInfos["c-1"].Exec) }
	}
	user := func(f func(*clientcmdapi.AuthInfo)) func(*clientcmdapi.Config) {
		return func(c *clientcmdapi.Config) { f(c.AuthInfos["c-1"]) }
	}
	cluster := func(f func(*clientcmdapi.Cluster)) func(*clientcmdapi.Config) {
		return func(c *clientcmdapi.Config) { f(c.Clusters["c-1"]) }
	}
	addEnv := func(name, value string) func(*clientcmdapi.Config) {
		return exec(func(e *clientcmdapi.ExecConfig) {
			e.Env = append(e.Env, clientcmdapi.ExecEnvVar{Name: name, Value: value})
		})
	}
	setArg := func(flag, value string) func(*clientcmdapi.Config) {
		return exec(func(e *clientcmdapi.ExecConfig) {
			for i := 0; i < len(e.Args); i += 2 {
				if e.Args[i] == flag {
					e.Args[i+1] = value
				}
			}
		})
	}
	tests := map[string]struct {
		mutate func(*clientcmdapi.Config)
		raw    string
		want   string
	}{
		// The exec entry's env: only the access key the runner writes.
		"env AWS_WEB_IDENTITY_TOKEN_FILE":        {mutate: addEnv("AWS_WEB_IDENTITY_TOKEN_FILE", "/etc/kcp/kubeconfig-s3cr3t"), want: "exec env: entry 4 is not one of"},
		"env AWS_ROLE_ARN":                       {mutate: addEnv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/s3cr3t"), want: "exec env: entry 4"},
		"env AWS_ENDPOINT_URL_STS":               {mutate: addEnv("AWS_ENDPOINT_URL_STS", "https://s3cr3t.attacker.example"), want: "exec env: entry 4"},
		"env AWS_ENDPOINT_URL":                   {mutate: addEnv("AWS_ENDPOINT_URL", "https://s3cr3t.attacker.example"), want: "exec env: entry 4"},
		"env AWS_PROFILE":                        {mutate: addEnv("AWS_PROFILE", "s3cr3t"), want: "exec env: entry 4"},
		"env AWS_CONFIG_FILE":                    {mutate: addEnv("AWS_CONFIG_FILE", "/tmp/s3cr3t"), want: "exec env: entry 4"},
		"env AWS_SHARED_CREDENTIALS_FILE":        {mutate: addEnv("AWS_SHARED_CREDENTIALS_FILE", "/tmp/s3cr3t"), want: "exec env: entry 4"},
		"env AWS_CONTAINER_CREDENTIALS_FULL_URI": {mutate: addEnv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.170.2/s3cr3t"), want: "exec env: entry 4"},
		"env HTTPS_PROXY":                        {mutate: addEnv("HTTPS_PROXY", "http://s3cr3t.attacker.example"), want: "exec env: entry 4"},
		"env PATH":                               {mutate: addEnv("PATH", "/tmp/s3cr3t"), want: "exec env: entry 4"},
		"env access key twice":                   {mutate: addEnv(EnvAccessKeyID, "AKIAS3CR3TOTHER00000"), want: "AWS_ACCESS_KEY_ID is given twice"},
		"env secret without key":                 {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Env = e.Env[1:2] }), want: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together"},
		"env session token without key":          {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Env = e.Env[2:] }), want: "AWS_SESSION_TOKEN needs AWS_ACCESS_KEY_ID"},
		"env empty value":                        {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Env[1].Value = "" }), want: "AWS_SECRET_ACCESS_KEY is empty"},
		"env value with a newline":               {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Env[1].Value = "s3cr3t\nAWS_PROFILE=x" }), want: "AWS_SECRET_ACCESS_KEY is empty, too long or holds spaces"},
		// The args: only the helper's own flags, values checked.
		"an extra argument":             {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = append(e.Args, "s3cr3t") }), want: "--flag value pairs"},
		"another flag":                  {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = append(e.Args, "--foo", "s3cr3t") }), want: "argument 9 is not one of the helper's flags"},
		"a flag with = form":            {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = append(e.Args, "--region=s3cr3t", "x") }), want: "argument 9 is not one of the helper's flags"},
		"a positional argument first":   {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = append([]string{"token", "s3cr3t"}, e.Args...) }), want: "argument 1 is not one"},
		"a flag twice":                  {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = append(e.Args, FlagRegion, "us-east-1") }), want: "--region is given twice"},
		"no cluster name":               {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = e.Args[2:] }), want: "need --cluster-name and --region"},
		"no region":                     {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = append(e.Args[:2], e.Args[4:]...) }), want: "need --cluster-name and --region"},
		"external id without a role":    {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = append(e.Args[:4], e.Args[6:]...) }), want: "need --role-arn"},
		"a cluster name that is a flag": {mutate: setArg(FlagClusterName, "--s3cr3t"), want: "the value of --cluster-name is not an EKS cluster name"},
		"a cluster name with a slash":   {mutate: setArg(FlagClusterName, "c/s3cr3t"), want: "the value of --cluster-name"},
		"a region that is a URL":        {mutate: setArg(FlagRegion, "https://s3cr3t.example"), want: "the value of --region is not an AWS region"},
		"a region with a host in it":    {mutate: setArg(FlagRegion, "s3cr3t.attacker.example/eu-north-1"), want: "the value of --region"},
		"a role that is not a role ARN": {mutate: setArg(FlagRoleARN, "arn:aws:iam::123456789012:user/s3cr3t"), want: "the value of --role-arn is not an IAM role ARN"},
		"an external id with a space":   {mutate: setArg(FlagExternalID, "s3cr3t id"), want: "the value of --external-id"},
		"an external id too long":       {mutate: setArg(FlagExternalID, "s3cr3t"+strings.Repeat("x", 1224)), want: "the value of --external-id"},
		"a session name with a slash":   {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Args = append(e.Args, FlagSessionName, "a/s3cr3t") }), want: "the value of --session-name"},
		// The exec entry itself.
		"another command":                       {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Command = "/bin/sh" }), want: "exec command must be /eks-token-helper"},
		"the helper by a relative name":         {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Command = "eks-token-helper" }), want: "exec command must be"},
		"a look-alike path":                     {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Command = "/tmp/s3cr3t/eks-token-helper" }), want: "exec command must be"},
		"a path through the helper's directory": {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.Command = "/eks-token-helper/../bin/sh" }), want: "exec command must be"},
		"another exec API":                      {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.APIVersion = "client.authentication.k8s.io/v1" }), want: "exec apiVersion must be"},
		"interactiveMode IfAvailable":           {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.InteractiveMode = clientcmdapi.IfAvailableExecInteractiveMode }), want: "interactiveMode must be Never"},
		"interactiveMode Always":                {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.InteractiveMode = clientcmdapi.AlwaysExecInteractiveMode }), want: "interactiveMode must be Never"},
		"provideClusterInfo":                    {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.ProvideClusterInfo = true }), want: "provideClusterInfo"},
		"installHint":                           {mutate: exec(func(e *clientcmdapi.ExecConfig) { e.InstallHint = "curl s3cr3t | sh" }), want: "installHint"},
		// The user: nothing but the exec entry.
		"auth-provider":              {mutate: user(func(u *clientcmdapi.AuthInfo) { u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "gcp"} }), want: "auth-provider plugins are not allowed"},
		"no exec":                    {mutate: user(func(u *clientcmdapi.AuthInfo) { u.Exec = nil; u.Token = "s3cr3t" }), want: "has no exec entry"},
		"a token next to the exec":   {mutate: user(func(u *clientcmdapi.AuthInfo) { u.Token = "s3cr3t" }), want: "has only an exec entry"},
		"tokenFile next to the exec": {mutate: user(func(u *clientcmdapi.AuthInfo) { u.TokenFile = "/var/run/secrets/s3cr3t" }), want: "has only an exec entry"},
		"client-key file":            {mutate: user(func(u *clientcmdapi.AuthInfo) { u.ClientKey = "/etc/s3cr3t.key" }), want: "has only an exec entry"},
		"impersonation":              {mutate: user(func(u *clientcmdapi.AuthInfo) { u.Impersonate = "system:s3cr3t" }), want: "has only an exec entry"},
		// The cluster entry.
		"certificate-authority file": {mutate: cluster(func(c *clientcmdapi.Cluster) { c.CertificateAuthority = "/etc/s3cr3t.crt" }), want: "certificate-authority (a file path) is not allowed"},
		"proxy-url":                  {mutate: cluster(func(c *clientcmdapi.Cluster) { c.ProxyURL = "http://s3cr3t.attacker.example" }), want: "proxy-url is not allowed"},
		"insecure-skip-tls-verify":   {mutate: cluster(func(c *clientcmdapi.Cluster) { c.InsecureSkipTLSVerify = true; c.CertificateAuthorityData = nil }), want: "insecure-skip-tls-verify is not allowed"},
		"tls-server-name":            {mutate: cluster(func(c *clientcmdapi.Cluster) { c.TLSServerName = "s3cr3t.example" }), want: "has only server and certificate-authority-data"},
		"no CA":                      {mutate: cluster(func(c *clientcmdapi.Cluster) { c.CertificateAuthorityData = nil }), want: "has no certificate-authority-data"},
		"an http server":             {mutate: cluster(func(c *clientcmdapi.Cluster) { c.Server = "http://s3cr3t.example" }), want: "server must be an https URL"},
		"a server with credentials":  {mutate: cluster(func(c *clientcmdapi.Cluster) { c.Server = "https://user:s3cr3t@x.example" }), want: "server must not carry credentials"},
		"a server with a path":       {mutate: cluster(func(c *clientcmdapi.Cluster) { c.Server = "https://x.example/s3cr3t" }), want: "no path, query or fragment"},
		// The layout: exactly the runner's one cluster, user and context.
		"two users": {mutate: func(c *clientcmdapi.Config) { c.AuthInfos["other"] = &clientcmdapi.AuthInfo{Token: "s3cr3t"} }, want: "exactly one user, not 2"},
		"two clusters": {mutate: func(c *clientcmdapi.Config) {
			c.Clusters["other"] = &clientcmdapi.Cluster{Server: "https://s3cr3t.example"}
		}, want: "exactly one cluster, not 2"},
		"two contexts": {mutate: func(c *clientcmdapi.Config) {
			c.Contexts["other"] = &clientcmdapi.Context{Cluster: "c-1", AuthInfo: "c-1"}
		}, want: "exactly one context, not 2"},
		"a context naming another user": {mutate: func(c *clientcmdapi.Config) {
			c.AuthInfos["u"] = c.AuthInfos["c-1"]
			delete(c.AuthInfos, "c-1")
			c.Contexts["c-1"].AuthInfo = "u"
		}, want: "names its cluster and user by the context's name"},
		"a namespace":                      {mutate: func(c *clientcmdapi.Config) { c.Contexts["c-1"].Namespace = "s3cr3t" }, want: "no namespace or extensions"},
		"no current context":               {mutate: func(c *clientcmdapi.Config) { c.CurrentContext = "" }, want: "no current-context"},
		"a current context naming nothing": {mutate: func(c *clientcmdapi.Config) { c.CurrentContext = "s3cr3t" }, want: "names no context"},
		"not YAML":                         {raw: "{s3cr3t", want: "not valid YAML"},
		"empty":                            {raw: " \n", want: "kubeconfig is empty"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw := []byte(tc.raw)
			if tc.raw == "" {
				raw = eksYAML(t, tc.mutate)
			}
			got, err := ParseEKS(raw)
			if err == nil {
				t.Fatalf("ParseEKS accepted it: %+v", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q quotes a value", err)
			}
		})
	}
}

// TestParseUntrustedRefusesTheEKSHelper: the helper is allowed nowhere but in ParseEKS; a
// tenant's or a vanilla cluster's kubeconfig naming it is refused like any exec plugin.
func TestParseUntrustedRefusesTheEKSHelper(t *testing.T) {
	if _, err := ParseUntrusted(eksYAML(t, nil)); err == nil || !strings.Contains(err.Error(), "exec plugins are not allowed") {
		t.Errorf("ParseUntrusted(an EKS kubeconfig) = %v, want exec plugins refused", err)
	}
}
