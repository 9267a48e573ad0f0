package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// BackendOptions configure StartBackend.
type BackendOptions struct {
	// BinDir holds kube-apiserver, etcd and kube-controller-manager.
	BinDir string
	// DataDir keeps etcd's data across restarts; empty uses a temporary directory.
	DataDir string
	// KubeconfigPath is where the backend's admin kubeconfig is written.
	KubeconfigPath string
	// Output receives kube-controller-manager's logs; nil discards them.
	Output io.Writer
	// Processes records etcd, kube-apiserver and kube-controller-manager under those names; nil
	// records nothing. They die with this process either way.
	Processes *Processes
}

// serviceRange is the backend's Service IP range.
const serviceRange = "10.0.0.0/16"

// Backend is a running backend cluster: a real kube-apiserver with etcd, and a real
// kube-controller-manager running the namespace and garbage-collector controllers (so deleted
// namespaces really go away). There is no kubelet: Pods never run.
type Backend struct {
	env   *envtest.Environment
	kcm   *Child
	procs *Processes
	// release lets the thread envtest started etcd and kube-apiserver from end (see Processes);
	// closed by Stop once they exited.
	release     chan struct{}
	releaseOnce sync.Once
	// removeScripts removes the scripts envtest runs etcd and kube-apiserver through.
	removeScripts []func()
	// Config is the admin config.
	Config *rest.Config
	// KubeconfigPath is the admin kubeconfig file.
	KubeconfigPath string
}

// StartBackend starts the backend cluster.
func StartBackend(ctx context.Context, opts BackendOptions) (*Backend, error) {
	for _, name := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil {
			return nil, fmt.Errorf("%s is missing from %s: run `make tools`: %w", name, opts.BinDir, err)
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: opts.BinDir}
	b := &Backend{env: env, procs: opts.Processes, KubeconfigPath: opts.KubeconfigPath, release: make(chan struct{})}
	// envtest starts etcd and kube-apiserver itself: through scripts that tie them to this
	// process (see Processes).
	apiserver := env.ControlPlane.GetAPIServer()
	etcd := &envtest.Etcd{DataDir: opts.DataDir}
	for _, s := range []struct {
		bin  string
		path *string
	}{{"etcd", &etcd.Path}, {"kube-apiserver", &apiserver.Path}} {
		script, remove, err := opts.Processes.tiedBinary(s.bin, filepath.Join(opts.BinDir, s.bin))
		if err != nil {
			b.Stop()
			return nil, fmt.Errorf("failed to prepare %s: %w", s.bin, err)
		}
		*s.path = script
		b.removeScripts = append(b.removeScripts, remove)
	}
	// Every vCluster release has a Service; envtest's default range (a /24) holds about 250, a
	// real backend's far more.
	apiserver.Configure().Set("service-cluster-ip-range", serviceRange)
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
			b.Stop()
			return nil, err
		}
	}
	env.ControlPlane.Etcd = etcd
	err := onOwnThread(func() (err error) {
		b.Config, err = env.Start()
		return err
	}, b.release)
	if err != nil {
		b.Stop()
		return nil, fmt.Errorf("failed to start the backend kube-apiserver: %w", err)
	}
	cfg := b.Config
	if err := WriteKubeconfig(cfg, opts.KubeconfigPath, "backend"); err != nil {
		b.Stop()
		return nil, err
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	kcm := exec.Command(filepath.Join(opts.BinDir, "kube-controller-manager"),
		"--kubeconfig", opts.KubeconfigPath,
		"--controllers", "namespace,garbagecollector",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-namespace-syncs=4",
	)
	kcm.Stdout, kcm.Stderr = out, out
	kcm.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if b.kcm, err = opts.Processes.Start("kube-controller-manager", kcm); err != nil {
		b.Stop()
		return nil, fmt.Errorf("failed to start kube-controller-manager: %w", err)
	}
	return b, nil
}

// Stop stops kube-controller-manager, kube-apiserver and etcd.
func (b *Backend) Stop() {
	if b == nil {
		return
	}
	if b.kcm != nil {
		StopProcessGroup(b.kcm.Cmd, b.kcm.Done(), 10*time.Second)
	}
	_ = b.env.Stop()
	b.releaseOnce.Do(func() { close(b.release) })
	for _, remove := range b.removeScripts {
		remove()
	}
	b.removeScripts = nil
	for _, name := range []string{"etcd", "kube-apiserver"} {
		b.procs.forgetExited(name)
	}
}

// WriteKubeconfig writes cfg (certificate or token credentials) as a kubeconfig file.
func WriteKubeconfig(cfg *rest.Config, path, name string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}
