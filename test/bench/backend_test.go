package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
)

// serviceRange is the backend's Service IP range. Every vCluster release has a Service, and
// envtest's default range (10.0.0.0/24) holds about 250: the installs of a 500-workspace run
// failed with "failed to allocate a serviceIP: range is full". A real backend has a /16 or
// larger.
const serviceRange = "10.0.0.0/16"

// backend is the backend cluster as devenv.StartBackend starts it (kube-apiserver and etcd,
// kube-controller-manager with the namespace and garbage-collector controllers, no kubelet),
// with room for the bench's Services; devenv.BackendOptions has no setting for the range.
type backend struct {
	env     *envtest.Environment
	kcm     *exec.Cmd
	kcmDone chan struct{}
	// Config is the admin config; KubeconfigPath the same as a file.
	Config         *rest.Config
	KubeconfigPath string
}

// startBackend starts the backend with its kubeconfig (backend.kubeconfig) and
// kube-controller-manager's log (kcm.log) in dir.
func startBackend(dir string) (*backend, error) {
	bin := framework.ToolsBin()
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", serviceRange)
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("failed to start the backend kube-apiserver: %w", err)
	}
	b := &backend{env: env, Config: cfg, KubeconfigPath: filepath.Join(dir, "backend.kubeconfig")}
	if err := devenv.WriteKubeconfig(cfg, b.KubeconfigPath, "backend"); err != nil {
		b.stop()
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "kcm.log"))
	if err != nil {
		b.stop()
		return nil, err
	}
	b.kcm = exec.Command(filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig", b.KubeconfigPath,
		"--controllers", "namespace,garbagecollector",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-namespace-syncs=4",
	)
	b.kcm.Stdout, b.kcm.Stderr = log, log
	b.kcm.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.kcm.Start(); err != nil {
		_ = log.Close()
		b.kcm = nil
		b.stop()
		return nil, fmt.Errorf("failed to start kube-controller-manager: %w", err)
	}
	b.kcmDone = make(chan struct{})
	go func() { _ = b.kcm.Wait(); _ = log.Close(); close(b.kcmDone) }()
	return b, nil
}

// stop stops kube-controller-manager, kube-apiserver and etcd.
func (b *backend) stop() {
	if b.kcm != nil {
		devenv.StopProcessGroup(b.kcm, b.kcmDone, 10*time.Second)
	}
	_ = b.env.Stop()
}
