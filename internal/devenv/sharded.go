package devenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	"github.com/kcp-dev/sdk/testing/third_party/library-go/crypto"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeopera/kubeopera/workspaces"
)

// ShardedKCPOptions configure StartShardedKCP.
type ShardedKCPOptions struct {
	// BinDir holds kcp, kcp-front-proxy and cache-server (hack/build-tools.sh builds all three
	// from the kcp module).
	BinDir string
	// RootDir keeps every server's state and the shared certificates; StartShardedKCP expects it
	// empty or from an earlier run of the same topology.
	RootDir string
	// Shards is the number of shards, the root shard included (at least 2).
	Shards int
	// Output receives every server's logs, each line as the server wrote it; nil discards them.
	Output io.Writer
	// Processes records the servers as cache-server, kcp-<shard> and kcp-front-proxy; nil records
	// nothing. They die with this process either way.
	Processes *Processes
}

// Shard is one shard of a sharded kcp.
type Shard struct {
	// Name is the shard's name: "root", then "shard-1", "shard-2", ... Its Shard object in root
	// carries the label name=<Name>, which a Workspace's spec.location.selector matches.
	Name string
	// BaseURL is where the shard serves, its virtual workspaces included.
	BaseURL string
}

// shardedPKI is the topology's shared PKI: every shard, the front proxy and the cache server trust
// the same client CA; every serving certificate is signed by one serving CA, so one CA file
// validates every server; every shard signs and accepts ServiceAccount tokens with the same key.
type shardedPKI struct {
	dir                                 string
	client, requestHeader, serving, sas *crypto.CA
}

// StartShardedKCP starts kcp as kcp's own sharded test topology runs it
// (kcp cmd/sharded-test-server, v0.31.2): a cache server replicating what every shard must see
// (APIExports, APIResourceSchemas, WorkspaceTypes, Shards, and the RBAC kcp annotates for
// replication), the root shard, further shards registering themselves in root, and the front
// proxy routing /clusters/<path> to the shard a workspace lives on. Everything binds 127.0.0.1.
//
// The returned KCP's KubeconfigPath names the front proxy with the contexts of a single kcp's
// admin kubeconfig: root and base (kcp-admin, group system:kcp:admin: the proxy drops
// system:masters), user (kcp's unprivileged "user", a certificate every shard accepts, so the
// virtual workspace URLs the shards publish work with it), and system:admin and shard-base (a
// system:masters certificate, pointed at the root shard itself: valid on every shard when its
// host is changed to that shard's).
func StartShardedKCP(ctx context.Context, opts ShardedKCPOptions) (k *KCP, err error) {
	if opts.Shards < 2 {
		return nil, fmt.Errorf("a sharded kcp needs at least 2 shards, not %d", opts.Shards)
	}
	for _, b := range []string{"kcp", "kcp-front-proxy", "cache-server"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make tools`: %w", filepath.Join(opts.BinDir, b), err)
		}
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	pki, err := newShardedPKI(filepath.Join(opts.RootDir, "pki"))
	if err != nil {
		return nil, err
	}
	// The cache server's etcd (2), each shard's port and etcd (3 each), the front proxy's.
	ports, err := FreePorts(3 + 3*opts.Shards + 1)
	if err != nil {
		return nil, err
	}
	cachePorts, proxyPort := ports[:3], ports[len(ports)-1]
	proxyURL := "https://127.0.0.1:" + strconv.Itoa(proxyPort)
	k = &KCP{FrontProxyURL: proxyURL}
	defer func() {
		if err != nil {
			k.Stop()
		}
	}()
	start := func(name string, cmd *exec.Cmd) error {
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		p, err := opts.Processes.Start(name, cmd)
		if err != nil {
			return fmt.Errorf("failed to start %s: %w", name, err)
		}
		k.procs = append(k.procs, p)
		return nil
	}

	// The cache server: it makes its own serving certificate (<dir>/apiserver.crt).
	cacheDir := filepath.Join(opts.RootDir, "cache")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	if err := start("cache-server", exec.Command(filepath.Join(opts.BinDir, "cache-server"),
		"--root-directory="+cacheDir, "--bind-address=127.0.0.1",
		"--embedded-etcd-client-port="+strconv.Itoa(cachePorts[1]), "--embedded-etcd-peer-port="+strconv.Itoa(cachePorts[2]),
		"--secure-port="+strconv.Itoa(cachePorts[0]), "--client-ca-file="+pki.path("client-ca.crt"))); err != nil {
		return nil, err
	}
	cacheKubeconfig, err := pki.cacheKubeconfig(ctx, k.procs[0], cacheDir, cachePorts[0])
	if err != nil {
		return nil, err
	}
	if err := waitReadyz(ctx, k.procs[0], "the cache server", "https://127.0.0.1:"+strconv.Itoa(cachePorts[0])+"/readyz"); err != nil {
		return nil, err
	}

	// The logical-cluster admin: each shard's workspace scheduler creates a LogicalCluster on the
	// shard it chose with it (the host replaced by that Shard's baseURL); the external one is how a
	// shard writes to objects on other shards through the proxy (APIExportEndpointSlice URLs).
	rootPort := ports[3]
	rootURL := "https://127.0.0.1:" + strconv.Itoa(rootPort)
	lcAdmin, err := pki.clientKubeconfig("logical-cluster-admin", rootURL, &user.DefaultInfo{Name: "logical-cluster-admin", Groups: []string{"system:kcp:logical-cluster-admin"}})
	if err != nil {
		return nil, err
	}
	extLCAdmin, err := pki.clientKubeconfig("external-logical-cluster-admin", proxyURL, &user.DefaultInfo{Name: "external-logical-cluster-admin", Groups: []string{"system:kcp:external-logical-cluster-admin"}})
	if err != nil {
		return nil, err
	}

	// The shards, root first: every other one reads the root shard's admin kubeconfig
	// (context shard-base) to register itself and resolve root's identities.
	rootAdmin := filepath.Join(opts.RootDir, "root", "admin.kubeconfig")
	for i := range opts.Shards {
		name := "root"
		if i > 0 {
			name = "shard-" + strconv.Itoa(i)
		}
		dir := filepath.Join(opts.RootDir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		port, etcd := ports[3+3*i], ports[4+3*i:6+3*i]
		base := "https://127.0.0.1:" + strconv.Itoa(port)
		if err := pki.servingCert(filepath.Join(dir, "apiserver")); err != nil {
			return nil, err
		}
		if _, err := pki.client.MakeClientCertificate(filepath.Join(dir, "shard-client.crt"), filepath.Join(dir, "shard-client.key"),
			&user.DefaultInfo{Name: "kcp-shard-" + name, Groups: []string{"system:masters"}}, 365); err != nil {
			return nil, err
		}
		args := []string{"start",
			"--root-directory=" + dir, "--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
			"--embedded-etcd-client-port=" + strconv.Itoa(etcd[0]), "--embedded-etcd-peer-port=" + strconv.Itoa(etcd[1]),
			"--batteries-included=admin,workspace-types,user",
			"--shard-base-url=" + base, "--shard-external-url=" + proxyURL,
			"--client-ca-file=" + pki.path("client-ca.crt"),
			"--requestheader-client-ca-file=" + pki.path("requestheader-ca.crt"),
			"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--service-account-key-file=" + pki.path("service-account.crt"),
			"--service-account-private-key-file=" + pki.path("service-account.key"),
			"--service-account-signing-key-file=" + pki.path("service-account.key"),
			"--tls-cert-file=" + filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file=" + filepath.Join(dir, "apiserver.key"),
			"--logical-cluster-admin-kubeconfig=" + lcAdmin,
			"--external-logical-cluster-admin-kubeconfig=" + extLCAdmin,
			"--shard-client-cert-file=" + filepath.Join(dir, "shard-client.crt"), "--shard-client-key-file=" + filepath.Join(dir, "shard-client.key"),
			"--shard-virtual-workspace-ca-file=" + pki.path("serving-ca.crt"),
			"--cache-kubeconfig=" + cacheKubeconfig,
		}
		if i > 0 {
			args = append(args, "--shard-name="+name, "--root-shard-kubeconfig-file="+rootAdmin)
		}
		if err := start("kcp-"+name, exec.Command(filepath.Join(opts.BinDir, "kcp"), args...)); err != nil {
			return nil, err
		}
		k.Shards = append(k.Shards, Shard{Name: name, BaseURL: base})
		if i == 0 {
			// The next shard needs the root shard's admin kubeconfig.
			if err := waitFile(ctx, k.procs[len(k.procs)-1], "the root shard", rootAdmin); err != nil {
				return nil, err
			}
		}
	}
	for i, s := range k.Shards {
		if err := waitReadyz(ctx, k.procs[1+i], "shard "+s.Name, s.BaseURL+"/readyz"); err != nil {
			return nil, err
		}
	}

	// The front proxy: /clusters/ goes to the shard the index says a workspace is on (the
	// mapping's backend is not used for it); /services/ to the root shard.
	proxyDir := filepath.Join(opts.RootDir, "front-proxy")
	if err := os.MkdirAll(proxyDir, 0o755); err != nil {
		return nil, err
	}
	if err := pki.servingCert(filepath.Join(proxyDir, "apiserver")); err != nil {
		return nil, err
	}
	if _, err := pki.requestHeader.MakeClientCertificate(filepath.Join(proxyDir, "requestheader.crt"), filepath.Join(proxyDir, "requestheader.key"),
		&user.DefaultInfo{Name: "kcp-front-proxy"}, 365); err != nil {
		return nil, err
	}
	mapping := func(path string) map[string]string {
		return map[string]string{"path": path, "backend": rootURL, "backend_server_ca": pki.path("serving-ca.crt"),
			"proxy_client_cert": filepath.Join(proxyDir, "requestheader.crt"), "proxy_client_key": filepath.Join(proxyDir, "requestheader.key")}
	}
	raw, err := yaml.Marshal([]map[string]string{mapping("/services/"), mapping("/clusters/")})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(proxyDir, "mapping.yaml"), raw, 0o600); err != nil {
		return nil, err
	}
	shardAdmin := &user.DefaultInfo{Name: "shard-admin", Groups: []string{"system:masters"}}
	rootKubeconfig, err := pki.clientKubeconfig("front-proxy-root", rootURL, shardAdmin)
	if err != nil {
		return nil, err
	}
	// shards.kubeconfig names no server: the proxy sets each Shard's baseURL.
	shardsKubeconfig, err := pki.clientKubeconfig("front-proxy-shards", "", shardAdmin)
	if err != nil {
		return nil, err
	}
	if err := start("kcp-front-proxy", exec.Command(filepath.Join(opts.BinDir, "kcp-front-proxy"),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(proxyPort),
		"--mapping-file="+filepath.Join(proxyDir, "mapping.yaml"), "--root-directory="+proxyDir,
		"--root-kubeconfig="+rootKubeconfig, "--shards-kubeconfig="+shardsKubeconfig,
		"--client-ca-file="+pki.path("client-ca.crt"),
		"--tls-cert-file="+filepath.Join(proxyDir, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(proxyDir, "apiserver.key"))); err != nil {
		return nil, err
	}
	if err := waitReadyz(ctx, k.procs[len(k.procs)-1], "the front proxy", proxyURL+"/readyz"); err != nil {
		return nil, err
	}

	// The admin kubeconfig, with a single kcp's contexts.
	if k.KubeconfigPath, err = pki.adminKubeconfig(filepath.Join(opts.RootDir, "admin.kubeconfig"), proxyURL, rootURL); err != nil {
		return nil, err
	}
	if k.Config, err = k.ContextConfig("root"); err != nil {
		return nil, err
	}
	// The proxy's readyz says only that it watches Shards: wait until it and root's scheduler
	// (which reads Shards replicated through the cache) know every shard.
	if err := k.waitShards(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// waitShards waits until root lists every shard through the front proxy.
func (k *KCP) waitShards(ctx context.Context) error {
	c, err := client.New(k.Config, client.Options{Scheme: workspaces.KCPScheme()})
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l := &corev1alpha1.ShardList{}
		if err := c.List(ctx, l); err != nil {
			last = err.Error()
			return false, nil
		}
		var names []string
		for _, s := range l.Items {
			names = append(names, s.Name)
		}
		last = fmt.Sprintf("shards %v", names)
		for _, s := range k.Shards {
			if !slices.Contains(names, s.Name) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("root never listed every shard through the front proxy: %w (%s)", err, last)
	}
	return nil
}

func newShardedPKI(dir string) (*shardedPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &shardedPKI{dir: dir}
	for _, ca := range []struct {
		into **crypto.CA
		name string
	}{{&p.client, "client-ca"}, {&p.requestHeader, "requestheader-ca"}, {&p.serving, "serving-ca"}, {&p.sas, "service-account"}} {
		c, _, err := crypto.EnsureCA(p.path(ca.name+".crt"), p.path(ca.name+".key"), p.path(ca.name+".serial"), "kcp-"+ca.name, 365)
		if err != nil {
			return nil, fmt.Errorf("failed to make the %s: %w", ca.name, err)
		}
		*ca.into = c
	}
	return p, nil
}

func (p *shardedPKI) path(name string) string { return filepath.Join(p.dir, name) }

// servingCert writes <prefix>.crt (with the serving CA) and <prefix>.key for 127.0.0.1 and
// localhost.
func (p *shardedPKI) servingCert(prefix string) error {
	c, err := p.serving.MakeServerCert(sets.New("localhost", "127.0.0.1"), 365)
	if err != nil {
		return err
	}
	return c.WriteCertConfigFile(prefix+".crt", prefix+".key")
}

// clientKubeconfig writes <dir>/<name>.kubeconfig: server (none when empty) verified with the
// serving CA, the user a certificate of the client CA.
func (p *shardedPKI) clientKubeconfig(name, server string, u user.Info) (string, error) {
	crt, key := p.path(name+".crt"), p.path(name+".key")
	if _, err := p.client.MakeClientCertificate(crt, key, u, 365); err != nil {
		return "", err
	}
	ca, err := os.ReadFile(p.path("serving-ca.crt"))
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kcp"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: crt, ClientKey: key}
	cfg.Contexts["shard-base"] = &clientcmdapi.Context{Cluster: "kcp", AuthInfo: name}
	cfg.CurrentContext = "shard-base"
	path := p.path(name + ".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// cacheKubeconfig writes the shards' kubeconfig of the cache server once it wrote its serving
// certificate: https://localhost:<port> (the shards add /services/cache), a system:masters
// certificate of the client CA.
func (p *shardedPKI) cacheKubeconfig(ctx context.Context, proc *Child, dir string, port int) (string, error) {
	servingCert := filepath.Join(dir, "apiserver.crt")
	if err := waitFile(ctx, proc, "the cache server", servingCert); err != nil {
		return "", err
	}
	ca, err := os.ReadFile(servingCert)
	if err != nil {
		return "", err
	}
	crt, key := filepath.Join(dir, "cache-client.crt"), filepath.Join(dir, "cache-client.key")
	if _, err := p.client.MakeClientCertificate(crt, key, &user.DefaultInfo{Name: "cache-client", Groups: []string{"system:masters"}}, 365); err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cache"] = &clientcmdapi.Cluster{Server: "https://localhost:" + strconv.Itoa(port), CertificateAuthorityData: ca}
	cfg.AuthInfos["cache"] = &clientcmdapi.AuthInfo{ClientCertificate: crt, ClientKey: key}
	cfg.Contexts["cache"] = &clientcmdapi.Context{Cluster: "cache", AuthInfo: "cache"}
	cfg.CurrentContext = "cache"
	path := filepath.Join(dir, "cache.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// adminKubeconfig writes the topology's admin kubeconfig to path (see StartShardedKCP).
func (p *shardedPKI) adminKubeconfig(path, proxyURL, rootShardURL string) (string, error) {
	ca, err := os.ReadFile(p.path("serving-ca.crt"))
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	for name, u := range map[string]user.Info{
		"kcp-admin":   &user.DefaultInfo{Name: "kcp-admin", Groups: []string{"system:kcp:admin"}},
		"shard-admin": &user.DefaultInfo{Name: "shard-admin", Groups: []string{"system:masters"}},
		"user":        &user.DefaultInfo{Name: "user"},
	} {
		crt, key := p.path(name+".crt"), p.path(name+".key")
		if _, err := p.client.MakeClientCertificate(crt, key, u, 365); err != nil {
			return "", err
		}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: crt, ClientKey: key}
	}
	for name, server := range map[string]string{"root": proxyURL + "/clusters/root", "base": proxyURL,
		"system:admin": rootShardURL + "/clusters/system:admin", "shard-base": rootShardURL} {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	}
	cfg.Contexts["root"] = &clientcmdapi.Context{Cluster: "root", AuthInfo: "kcp-admin"}
	cfg.Contexts["base"] = &clientcmdapi.Context{Cluster: "base", AuthInfo: "kcp-admin"}
	cfg.Contexts["user"] = &clientcmdapi.Context{Cluster: "root", AuthInfo: "user"}
	cfg.Contexts["system:admin"] = &clientcmdapi.Context{Cluster: "system:admin", AuthInfo: "shard-admin"}
	cfg.Contexts["shard-base"] = &clientcmdapi.Context{Cluster: "shard-base", AuthInfo: "shard-admin"}
	cfg.CurrentContext = "root"
	return path, clientcmd.WriteToFile(*cfg, path)
}

// waitFile waits until path exists, or fails when proc exits first.
func waitFile(ctx context.Context, proc *Child, what, path string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-proc.Done():
			return false, fmt.Errorf("%s exited before it wrote %s", what, path)
		default:
		}
		_, err := os.Stat(path)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not write %s: %w", what, path, err)
	}
	return nil
}

// waitReadyz waits until url answers (200, or 401/403 where anonymous requests are refused), or
// fails when proc exits first. The servers' certificates are checked by the callers' clients; the
// probe of our own loopback server skips it.
func waitReadyz(ctx context.Context, proc *Child, what, url string) error {
	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // readiness probe of our own local server
	}}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-proc.Done():
			return false, errors.New(what + " exited before it became ready")
		default:
		}
		resp, err := httpClient.Get(url)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_ = resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not become ready: %w (%s)", what, err, last)
	}
	return nil
}
