package kubeconfig

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Every secret and every refused value in these kubeconfigs contains "s3cr3t": no error may.
const secret = "s3cr3t"

// untrustedBase is a valid kubeconfig: one cluster with inline CA data, one user with a token.
func untrustedBase() *clientcmdapi.Config {
	return &clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			"prod": {Server: "https://api.example.com:6443", CertificateAuthorityData: []byte("s3cr3t-ca")},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			"admin": {Token: "s3cr3t-token"},
		},
		Contexts: map[string]*clientcmdapi.Context{
			"prod": {Cluster: "prod", AuthInfo: "admin"},
		},
		CurrentContext: "prod",
	}
}

// untrustedYAML serialises the base kubeconfig after mutate.
func untrustedYAML(t *testing.T, mutate func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg := untrustedBase()
	if mutate != nil {
		mutate(cfg)
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseUntrustedRefuses(t *testing.T) {
	admin := func(f func(*clientcmdapi.AuthInfo)) func(*clientcmdapi.Config) {
		return func(c *clientcmdapi.Config) { f(c.AuthInfos["admin"]) }
	}
	prod := func(f func(*clientcmdapi.Cluster)) func(*clientcmdapi.Config) {
		return func(c *clientcmdapi.Config) { f(c.Clusters["prod"]) }
	}
	server := func(s string) func(*clientcmdapi.Config) {
		return prod(func(c *clientcmdapi.Cluster) { c.Server = s })
	}
	tests := map[string]struct {
		raw    []byte // used when set
		mutate func(*clientcmdapi.Config)
		want   string
	}{
		"empty":      {raw: []byte{}, want: "kubeconfig is empty"},
		"whitespace": {raw: []byte(" \n\t\n"), want: "kubeconfig is empty"},
		"too large":  {raw: []byte("# " + strings.Repeat("x", 1<<20)), want: "kubeconfig is larger than 1 MiB"},
		"not YAML": {raw: []byte("token: s3cr3t\n\t{{ s3cr3t"),
			want: "kubeconfig is not valid YAML or JSON"},
		"not a kubeconfig": {raw: []byte("- s3cr3t\n- list\n"),
			want: "kubeconfig is not a valid kubeconfig"},
		"duplicate names": {
			// client-go's error would print the whole list of users, tokens included.
			raw: []byte(`apiVersion: v1
kind: Config
clusters: [{name: prod, cluster: {server: "https://api.example.com"}}]
users:
- {name: admin, user: {token: s3cr3t-1}}
- {name: admin, user: {token: s3cr3t-2}}
contexts: [{name: prod, context: {cluster: prod, user: admin}}]
current-context: prod
`),
			want: "kubeconfig is not a valid kubeconfig",
		},
		"bad base64": {
			raw: []byte(`apiVersion: v1
kind: Config
clusters: [{name: prod, cluster: {server: "https://api.example.com", certificate-authority-data: "s3cr3t!!"}}]
`),
			want: "kubeconfig is not a valid kubeconfig",
		},
		"no clusters": {raw: []byte("apiVersion: v1\nkind: Config\n"), want: "kubeconfig has no clusters"},
		"exec plugin": {
			mutate: admin(func(u *clientcmdapi.AuthInfo) {
				u.Token = ""
				u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/s3cr3t", Args: []string{"s3cr3t"},
					APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			}),
			want: `kubeconfig's user "admin": exec plugins are not allowed`,
		},
		"exec plugin of a user no context uses": {
			mutate: func(c *clientcmdapi.Config) {
				c.AuthInfos["spare"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "s3cr3t",
					APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
			},
			want: `kubeconfig's user "spare": exec plugins are not allowed`,
		},
		"auth-provider": {
			mutate: admin(func(u *clientcmdapi.AuthInfo) {
				u.Token = ""
				u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": "s3cr3t"}}
			}),
			want: `kubeconfig's user "admin": auth-provider plugins are not allowed`,
		},
		"tokenFile": {
			mutate: admin(func(u *clientcmdapi.AuthInfo) { u.Token, u.TokenFile = "", "/var/run/s3cr3t/token" }),
			want:   `kubeconfig's user "admin": tokenFile (a file path) is not allowed, use token`,
		},
		"client-certificate": {
			mutate: admin(func(u *clientcmdapi.AuthInfo) {
				u.Token, u.ClientCertificate, u.ClientKeyData = "", "/etc/s3cr3t.crt", []byte("s3cr3t-key")
			}),
			want: `kubeconfig's user "admin": client-certificate (a file path) is not allowed, use client-certificate-data`,
		},
		"client-key": {
			mutate: admin(func(u *clientcmdapi.AuthInfo) {
				u.Token, u.ClientCertificateData, u.ClientKey = "", []byte("s3cr3t-cert"), "/etc/s3cr3t.key"
			}),
			want: `kubeconfig's user "admin": client-key (a file path) is not allowed, use client-key-data`,
		},
		"certificate-authority": {
			mutate: prod(func(c *clientcmdapi.Cluster) {
				c.CertificateAuthorityData, c.CertificateAuthority = nil, "/etc/s3cr3t-ca.crt"
			}),
			want: `kubeconfig's cluster "prod": certificate-authority (a file path) is not allowed, use certificate-authority-data`,
		},
		"proxy-url": {
			mutate: prod(func(c *clientcmdapi.Cluster) { c.ProxyURL = "http://s3cr3t-proxy:3128" }),
			want:   `kubeconfig's cluster "prod": proxy-url is not allowed`,
		},
		"socks5 proxy-url": {
			mutate: prod(func(c *clientcmdapi.Cluster) { c.ProxyURL = "socks5://s3cr3t:1080" }),
			want:   `kubeconfig's cluster "prod": proxy-url is not allowed`,
		},
		"no server": {mutate: server(""), want: `kubeconfig's cluster "prod" has no server`},
		"file server": {mutate: server("file:///etc/s3cr3t"),
			want: `kubeconfig's cluster "prod": server must be an http or https URL with a host`},
		"unix server": {mutate: server("unix:///var/run/s3cr3t.sock"),
			want: `kubeconfig's cluster "prod": server must be an http or https URL with a host`},
		"server without scheme": {mutate: server("s3cr3t.example.com:6443"),
			want: `kubeconfig's cluster "prod": server must be an http or https URL with a host`},
		"server without host": {mutate: server("https:///s3cr3t"),
			want: `kubeconfig's cluster "prod": server must be an http or https URL with a host`},
		"server with only a port": {mutate: server("https://:6443/s3cr3t"),
			want: `kubeconfig's cluster "prod": server must be an http or https URL with a host`},
		"unparsable server": {mutate: server("https://[s3cr3t:6443/"),
			want: `kubeconfig's cluster "prod": server must be an http or https URL with a host`},
		"server with credentials": {mutate: server("https://admin:s3cr3t@api.example.com"),
			want: `kubeconfig's cluster "prod": server must not carry credentials`},
		"server with a query": {mutate: server("https://api.example.com/?token=s3cr3t"),
			want: `kubeconfig's cluster "prod": server must not have a query or fragment`},
		"server with a fragment": {mutate: server("https://api.example.com/#s3cr3t"),
			want: `kubeconfig's cluster "prod": server must not have a query or fragment`},
		"no current-context": {mutate: func(c *clientcmdapi.Config) { c.CurrentContext = "" },
			want: "kubeconfig has no current-context"},
		"current-context missing": {mutate: func(c *clientcmdapi.Config) { c.CurrentContext = "staging" },
			want: `kubeconfig's current-context "staging" names no context in the kubeconfig`},
		"context without cluster": {mutate: func(c *clientcmdapi.Config) { c.Contexts["prod"].Cluster = "" },
			want: `kubeconfig's context "prod" names no cluster`},
		"context naming a missing cluster": {mutate: func(c *clientcmdapi.Config) { c.Contexts["prod"].Cluster = "gone" },
			want: `kubeconfig's context "prod" names cluster "gone", which is not in the kubeconfig`},
		"context without user": {mutate: func(c *clientcmdapi.Config) { c.Contexts["prod"].AuthInfo = "" },
			want: `kubeconfig's context "prod" names no user`},
		"context naming a missing user": {mutate: func(c *clientcmdapi.Config) { c.Contexts["prod"].AuthInfo = "gone" },
			want: `kubeconfig's context "prod" names user "gone", which is not in the kubeconfig`},
		"two authentication methods": {
			// client-go's own validation: its message names the user and the methods only.
			mutate: admin(func(u *clientcmdapi.AuthInfo) { u.Username, u.Password = "admin", "s3cr3t-password" }),
			want:   "kubeconfig is not usable: ",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw := tc.raw
			if raw == nil {
				raw = untrustedYAML(t, tc.mutate)
			}
			cfg, err := ParseUntrusted(raw)
			if err == nil {
				t.Fatalf("ParseUntrusted() = %+v, want error %q", cfg, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error = %q, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q leaks the input", err)
			}
		})
	}
}

func TestParseUntrusted(t *testing.T) {
	// The manager's environment names a proxy; the returned config must not use it.
	t.Setenv("HTTPS_PROXY", "http://proxy.example.com:3128")
	t.Setenv("HTTP_PROXY", "http://proxy.example.com:3128")

	tests := map[string]struct {
		raw    []byte // used when set
		mutate func(*clientcmdapi.Config)
		check  func(*rest.Config) error
	}{
		"bearer token": {
			check: func(c *rest.Config) error {
				if c.BearerToken != "s3cr3t-token" || string(c.CAData) != "s3cr3t-ca" {
					return fmt.Errorf("token or CA data not kept")
				}
				return nil
			},
		},
		"inline certificate data": {
			mutate: func(c *clientcmdapi.Config) {
				c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("s3cr3t-cert"), ClientKeyData: []byte("s3cr3t-key")}
			},
			check: func(c *rest.Config) error {
				if string(c.CertData) != "s3cr3t-cert" || string(c.KeyData) != "s3cr3t-key" || string(c.CAData) != "s3cr3t-ca" || c.BearerToken != "" {
					return fmt.Errorf("certificate data not kept")
				}
				return nil
			},
		},
		"basic auth": {
			mutate: func(c *clientcmdapi.Config) {
				c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Username: "admin", Password: "s3cr3t-password"}
			},
			check: func(c *rest.Config) error {
				if c.Username != "admin" || c.Password != "s3cr3t-password" {
					return fmt.Errorf("basic auth not kept")
				}
				return nil
			},
		},
		"insecure-skip-tls-verify and tls-server-name": {
			mutate: func(c *clientcmdapi.Config) {
				c.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443", InsecureSkipTLSVerify: true, TLSServerName: "api.internal"}
			},
			check: func(c *rest.Config) error {
				if !c.Insecure || c.ServerName != "api.internal" {
					return fmt.Errorf("TLS settings not kept")
				}
				return nil
			},
		},
		"server with a path kept as supplied": {
			mutate: func(c *clientcmdapi.Config) {
				c.Clusters["prod"].Server = "https://rancher.example.com/k8s/clusters/c-m-abc"
			},
		},
		"plain http": {
			mutate: func(c *clientcmdapi.Config) {
				c.Clusters["prod"] = &clientcmdapi.Cluster{Server: "http://127.0.0.1:8080"}
			},
			check: func(c *rest.Config) error {
				if c.BearerToken != "" {
					return fmt.Errorf("client-go sends no credentials over http, yet a token is set")
				}
				return nil
			},
		},
		"impersonation": {
			mutate: func(c *clientcmdapi.Config) {
				c.AuthInfos["admin"].Impersonate = "system:serviceaccount:kube-system:deployer"
				c.AuthInfos["admin"].ImpersonateGroups = []string{"system:masters"}
			},
			check: func(c *rest.Config) error {
				if c.Impersonate.UserName != "system:serviceaccount:kube-system:deployer" {
					return fmt.Errorf("impersonation not kept")
				}
				return nil
			},
		},
		"other contexts and clusters": {
			mutate: func(c *clientcmdapi.Config) {
				c.Clusters["staging"] = &clientcmdapi.Cluster{Server: "https://staging.example.com"}
				c.Contexts["staging"] = &clientcmdapi.Context{Cluster: "staging", AuthInfo: "admin"}
			},
		},
		"extensions and preferences ignored": {
			raw: []byte(`apiVersion: v1
kind: Config
preferences: {colors: true}
clusters:
- name: prod
  cluster:
    server: https://api.example.com:6443
    certificate-authority-data: czNjcjN0LWNh
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {command: /bin/sh}
users:
- name: admin
  user:
    token: s3cr3t-token
contexts:
- name: prod
  context: {cluster: prod, user: admin, extensions: [{name: x, extension: {a: b}}]}
current-context: prod
`),
			check: func(c *rest.Config) error {
				if c.BearerToken != "s3cr3t-token" || string(c.CAData) != "s3cr3t-ca" {
					return fmt.Errorf("token or CA data not kept")
				}
				return nil
			},
		},
		"JSON": {
			raw: []byte(`{"apiVersion":"v1","kind":"Config","current-context":"prod",
"clusters":[{"name":"prod","cluster":{"server":"https://api.example.com:6443"}}],
"users":[{"name":"admin","user":{"token":"s3cr3t-token"}}],
"contexts":[{"name":"prod","context":{"cluster":"prod","user":"admin"}}]}`),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw := tc.raw
			if raw == nil {
				raw = untrustedYAML(t, tc.mutate)
			}
			want, err := clientcmd.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ParseUntrusted(raw)
			if err != nil {
				t.Fatalf("ParseUntrusted() error: %v", err)
			}
			if server := want.Clusters[want.Contexts[want.CurrentContext].Cluster].Server; cfg.Host != server {
				t.Errorf("Host = %q, want the server as supplied, %q", cfg.Host, server)
			}
			if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.AuthConfigPersister != nil {
				t.Error("config has a plugin")
			}
			if cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.BearerTokenFile != "" {
				t.Error("config names a file")
			}
			if cfg.Timeout != UntrustedTimeout {
				t.Errorf("Timeout = %v, want %v", cfg.Timeout, UntrustedTimeout)
			}
			if cfg.Proxy == nil {
				t.Fatal("Proxy is nil: client-go would use the environment's proxy")
			}
			for _, u := range []string{"https://api.example.com:6443/version", "http://api.example.com/version"} {
				req, _ := http.NewRequest(http.MethodGet, u, nil)
				if proxy, err := cfg.Proxy(req); proxy != nil || err != nil {
					t.Errorf("Proxy(%s) = %v, %v; want no proxy", u, proxy, err)
				}
			}
			if tc.check != nil {
				if err := tc.check(cfg); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestParseUntrustedConnects uses the config against a TLS server: the CA data and the token
// are what client-go uses.
func TestParseUntrustedConnects(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cr3t-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"major":"1","minor":"35","gitVersion":"v1.35.1"}`)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	raw := untrustedYAML(t, func(c *clientcmdapi.Config) {
		c.Clusters["prod"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: ca}
	})
	cfg, err := ParseUntrusted(raw)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.35.1" {
		t.Errorf("GitVersion = %q", v.GitVersion)
	}
}
