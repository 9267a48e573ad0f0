package kubeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// maxUntrustedSize is the largest kubeconfig ParseUntrusted reads: a Secret's data is at most
// 1 MiB anyway.
const maxUntrustedSize = 1 << 20

// UntrustedTimeout is the Timeout of the rest.Config ParseUntrusted returns: the whole of one
// request, so a target that accepts a connection and never answers cannot hold a worker. It also
// ends watches and log streams; a caller that needs those copies the config and clears it.
const UntrustedTimeout = 15 * time.Second

// ParseUntrusted parses raw, refuses anything that would make the process run a program, read a
// local file or use a proxy, and returns a *rest.Config for the current context.
//
// raw is a tenant's kubeconfig: untrusted input. Refused, naming the field and the entry (never
// a value):
//   - users[].user.exec and auth-provider: they run a program or call out to a token issuer;
//   - users[].user.tokenFile, client-certificate and client-key, clusters[].cluster
//     certificate-authority: paths of the manager's own files (the *-data forms and token are
//     fine);
//   - clusters[].cluster.proxy-url: the manager's traffic goes straight to the server;
//   - a server that is not an http(s) URL with a host, or carries credentials, a query or a
//     fragment. The server is otherwise kept exactly as supplied (it is not rewritten: a
//     connected cluster is reached the way its admin exposes it). Over plain http client-go sends
//     no credentials at all.
//
// Every cluster and user entry is checked, not only the current context's, so a stored
// kubeconfig is safe whichever context is later used. Allowed: token, basic auth
// (username/password), inline certificate data, insecure-skip-tls-verify, tls-server-name,
// disable-compression and impersonation (as, as-groups, ...: it asks the target's own RBAC for
// more, and gives nothing on the manager's side). extensions and preferences are ignored by
// client-go except the exec plugin's cluster extension, which is unused since exec is refused.
// LocationOfOrigin cannot be set from the input (it is json:"-"; only clientcmd's file loader
// sets it, and it is never read to load anything).
//
// Why no file is read and nothing runs once the checks pass (client-go v0.35.1,
// tools/clientcmd): Load only decodes bytes (loader.go). The client config is built with
// NewNonInteractiveClientConfig, no fallback reader (no prompting on stdin) and no ConfigAccess
// (no persister that could write a kubeconfig file). Its ClientConfig (client_config.go) reads a
// file only for tokenFile (os.ReadFile), and its validation (validation.go) opens
// certificate-authority, client-certificate and client-key; all refused above. It copies exec and
// auth-provider into the rest.Config, where the transport would run or call them; refused above,
// and checked again on the result. The default server (KUBERNETES_MASTER) is read only by the
// deprecated DefaultClientConfig, not here.
//
// Errors never quote the input: the parser's errors can (a duplicate name error prints the whole
// list, secrets included), so they are replaced by fixed messages.
func ParseUntrusted(raw []byte) (*rest.Config, error) {
	return parse(raw)
}

// loadUntrusted decodes raw, an untrusted kubeconfig, with fixed error messages that never quote
// it (the parser's own errors can: a duplicate name error prints the whole list).
func loadUntrusted(raw []byte) (*clientcmdapi.Config, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("kubeconfig is empty")
	}
	if len(raw) > maxUntrustedSize {
		return nil, errors.New("kubeconfig is larger than 1 MiB")
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, errors.New("kubeconfig is not valid YAML or JSON")
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, errors.New("kubeconfig is not a valid kubeconfig: check apiVersion v1, kind Config, the base64 of the *-data fields and that names are unique")
	}
	return cfg, nil
}

func parse(raw []byte) (*rest.Config, error) {
	cfg, err := loadUntrusted(raw)
	if err != nil {
		return nil, err
	}
	if err := checkUntrusted(cfg); err != nil {
		return nil, err
	}

	rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, cfg.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		// With files, exec and proxies refused, client-go's remaining errors name entries and
		// methods, never values (e.g. "more than one authentication method found for %v").
		return nil, fmt.Errorf("kubeconfig is not usable: %w", err)
	}
	if rc.ExecProvider != nil || rc.AuthProvider != nil || rc.AuthConfigPersister != nil ||
		rc.CAFile != "" || rc.CertFile != "" || rc.KeyFile != "" || rc.BearerTokenFile != "" {
		// Unreachable after checkUntrusted; kept in case a client-go upgrade adds a way.
		return nil, errors.New("kubeconfig refers to a plugin or a local file")
	}
	// client-go's transport uses http.ProxyFromEnvironment when Proxy is nil (transport/cache.go),
	// so the manager's HTTP(S)_PROXY would carry the tenant's traffic: a function returning no
	// proxy turns that off. client-go does not share transports between configs with a Proxy
	// function (tlsCacheKey), so build one client per target and reuse it.
	rc.Proxy = noProxy
	rc.Timeout = UntrustedTimeout
	return rc, nil
}

// noProxy is a rest.Config.Proxy that never uses a proxy.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// checkUntrusted refuses the fields of cfg that read files, run programs or use proxies, and a
// current context that does not resolve. Entries are checked in name order, so the error is
// deterministic.
func checkUntrusted(cfg *clientcmdapi.Config) error {
	if len(cfg.Clusters) == 0 {
		return errors.New("kubeconfig has no clusters")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		if err := checkCluster(name, cfg.Clusters[name]); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		if err := checkUser(name, cfg.AuthInfos[name]); err != nil {
			return err
		}
	}

	if cfg.CurrentContext == "" {
		return errors.New("kubeconfig has no current-context")
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || ctx == nil {
		return fmt.Errorf("kubeconfig's current-context %q names no context in the kubeconfig", cfg.CurrentContext)
	}
	switch _, ok := cfg.Clusters[ctx.Cluster]; {
	case ctx.Cluster == "":
		return fmt.Errorf("kubeconfig's context %q names no cluster", cfg.CurrentContext)
	case !ok:
		return fmt.Errorf("kubeconfig's context %q names cluster %q, which is not in the kubeconfig", cfg.CurrentContext, ctx.Cluster)
	}
	// A context without a user would connect anonymously: never what the manager needs to
	// install Flux and KubeOpera, so it is refused here rather than failing later.
	switch _, ok := cfg.AuthInfos[ctx.AuthInfo]; {
	case ctx.AuthInfo == "":
		return fmt.Errorf("kubeconfig's context %q names no user", cfg.CurrentContext)
	case !ok:
		return fmt.Errorf("kubeconfig's context %q names user %q, which is not in the kubeconfig", cfg.CurrentContext, ctx.AuthInfo)
	}
	return nil
}

func checkCluster(name string, c *clientcmdapi.Cluster) error {
	if c == nil {
		return fmt.Errorf("kubeconfig's cluster %q is empty", name)
	}
	if c.CertificateAuthority != "" {
		return fmt.Errorf("kubeconfig's cluster %q: certificate-authority (a file path) is not allowed, use certificate-authority-data", name)
	}
	if c.ProxyURL != "" {
		return fmt.Errorf("kubeconfig's cluster %q: proxy-url is not allowed", name)
	}
	if c.Server == "" {
		return fmt.Errorf("kubeconfig's cluster %q has no server", name)
	}
	// url.Parse's errors quote the URL; they are not passed on.
	u, err := url.Parse(c.Server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("kubeconfig's cluster %q: server must be an http or https URL with a host", name)
	}
	if u.User != nil {
		return fmt.Errorf("kubeconfig's cluster %q: server must not carry credentials", name)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return fmt.Errorf("kubeconfig's cluster %q: server must not have a query or fragment", name)
	}
	return nil
}

func checkUser(name string, u *clientcmdapi.AuthInfo) error {
	switch {
	case u == nil:
		return nil
	case u.Exec != nil:
		return fmt.Errorf("kubeconfig's user %q: exec plugins are not allowed", name)
	case u.AuthProvider != nil:
		return fmt.Errorf("kubeconfig's user %q: auth-provider plugins are not allowed", name)
	case u.TokenFile != "":
		return fmt.Errorf("kubeconfig's user %q: tokenFile (a file path) is not allowed, use token", name)
	case u.ClientCertificate != "":
		return fmt.Errorf("kubeconfig's user %q: client-certificate (a file path) is not allowed, use client-certificate-data", name)
	case u.ClientKey != "":
		return fmt.Errorf("kubeconfig's user %q: client-key (a file path) is not allowed, use client-key-data", name)
	}
	return nil
}
