package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
}

// serviceRange is the backend's Service IP range.
const serviceRange = "10.0.0.0/16"

// Backend is a running backend cluster: a real kube-apiserver with etcd, and a real
// kube-controller-manager running the namespace and garbage-collector controllers (so deleted
// namespaces really go away). There is no kubelet: Pods never run.
type Backend struct {
	env    *envtest.Environment
	kcm    *exec.Cmd
	kcmOut chan struct{}
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
	// Every vCluster release has a Service; envtest's default range (a /24) holds about 250, a
	// real backend's far more.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", serviceRange)
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
			return nil, err
		}
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: opts.DataDir}
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to start the backend kube-apiserver: %w", err)
	}
	b := &Backend{env: env, Config: cfg, KubeconfigPath: opts.KubeconfigPath}
	if err := WriteKubeconfig(cfg, opts.KubeconfigPath, "backend"); err != nil {
		b.Stop()
		return nil, err
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	b.kcm = exec.Command(filepath.Join(opts.BinDir, "kube-controller-manager"),
		"--kubeconfig", opts.KubeconfigPath,
		"--controllers", "namespace,garbagecollector",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-namespace-syncs=4",
	)
	b.kcm.Stdout, b.kcm.Stderr = out, out
	b.kcm.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.kcm.Start(); err != nil {
		b.Stop()
		return nil, fmt.Errorf("failed to start kube-controller-manager: %w", err)
	}
	b.kcmOut = make(chan struct{})
	go func() { _ = b.kcm.Wait(); close(b.kcmOut) }()
	return b, nil
}

// Stop stops kube-controller-manager, kube-apiserver and etcd.
func (b *Backend) Stop() {
	if b == nil {
		return
	}
	if b.kcm != nil && b.kcm.Process != nil {
		StopProcessGroup(b.kcm, b.kcmOut, 10*time.Second)
	}
	_ = b.env.Stop()
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
