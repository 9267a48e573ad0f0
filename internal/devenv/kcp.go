// Package devenv starts the servers of the local environment: a kcp server (built by
// hack/build-tools.sh) and a backend kube-apiserver with etcd (the envtest binaries). `make run`
// and the e2e suite use it, so both run on the same real servers. Every process it starts dies
// with the process that started it, and `make run` records them to stop what a killed run left
// (Processes).
package devenv

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KCPOptions configure StartKCP.
type KCPOptions struct {
	// Binary is the kcp binary.
	Binary string
	// RootDir keeps kcp's state (etcd data, certificates, admin.kubeconfig). Reusing it keeps
	// workspaces across restarts.
	RootDir string
	// SecurePort is the API port; 0 picks a free port.
	SecurePort int
	// Output receives kcp's logs; nil discards them.
	Output io.Writer
	// Processes records kcp as "kcp"; nil records nothing. kcp dies with this process either way.
	Processes *Processes
}

// KCP is a running kcp: one server (StartKCP), or shards behind a front proxy
// (StartShardedKCP).
type KCP struct {
	// procs are its processes, in the order they started.
	procs []*Child
	// KubeconfigPath is kcp's admin kubeconfig (contexts root, base, system:admin, user).
	KubeconfigPath string
	// Config is the admin config of the root workspace.
	Config *rest.Config
	// FrontProxyURL is where a sharded kcp's front proxy serves; empty for one server.
	FrontProxyURL string
	// Shards are a sharded kcp's shards, root first; empty for one server.
	Shards []Shard
}

// StartKCP starts kcp bound to 127.0.0.1, so every URL it advertises (workspaces, virtual
// workspaces) is a loopback one, and waits until it is ready.
func StartKCP(ctx context.Context, opts KCPOptions) (*KCP, error) {
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("kcp binary %s is missing: run `make tools`: %w", opts.Binary, err)
	}
	if err := os.MkdirAll(opts.RootDir, 0o755); err != nil {
		return nil, err
	}
	port := opts.SecurePort
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	if port == 0 {
		port = ports[0]
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	cmd := exec.Command(opts.Binary, "start",
		"--root-directory", opts.RootDir,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--embedded-etcd-client-port", strconv.Itoa(ports[1]),
		"--embedded-etcd-peer-port", strconv.Itoa(ports[2]),
		"--batteries-included", "admin,workspace-types,user",
	)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := opts.Processes.Start("kcp", cmd)
	if err != nil {
		return nil, fmt.Errorf("failed to start kcp: %w", err)
	}
	k := &KCP{procs: []*Child{proc}, KubeconfigPath: filepath.Join(opts.RootDir, "admin.kubeconfig")}

	if err := k.waitReady(ctx, port); err != nil {
		k.Stop()
		return nil, err
	}
	return k, nil
}

func (k *KCP) waitReady(ctx context.Context, port int) error {
	if err := waitFile(ctx, k.procs[0], "kcp", k.KubeconfigPath); err != nil {
		return err
	}
	if err := waitReadyz(ctx, k.procs[0], "kcp", fmt.Sprintf("https://127.0.0.1:%d/readyz", port)); err != nil {
		return err
	}
	cfg, err := k.ContextConfig("root")
	if err != nil {
		return fmt.Errorf("failed to load %s: %w", k.KubeconfigPath, err)
	}
	k.Config = cfg
	// The root workspace is usable once its default namespace exists.
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return false, err
		}
		_, err = cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// ContextConfig returns the config of a context of kcp's admin kubeconfig, e.g. "system:admin"
// (the shard admin, which may read LogicalClusters in every workspace).
func (k *KCP) ContextConfig(context string) (*rest.Config, error) {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: k.KubeconfigPath},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}

// Stop terminates kcp's processes, the last started first, and waits for them to exit.
func (k *KCP) Stop() {
	if k == nil {
		return
	}
	for _, p := range slices.Backward(k.procs) {
		StopProcessGroup(p.Cmd, p.Done(), 30*time.Second)
	}
}

// StopProcessGroup sends SIGTERM to cmd's process group (started with Setpgid), waits until done
// is closed, and sends SIGKILL when that takes longer than grace.
func StopProcessGroup(cmd *exec.Cmd, done <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1 for servers started later, from below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range): a port from inside it, as ":0"
// gives, can be taken by any process's outgoing connection before the server binds it, which
// on a busy machine running several suites at once it sometimes was. It never returns a port of
// ReservedPorts' band.
func FreePorts(n int) ([]int, error) {
	return freePortsIn(n, reservedHi, ephemeralLow(), nil)
}

// reservedLo and reservedHi bound ReservedPorts' band, which FreePorts never picks from.
const reservedLo, reservedHi = 10000, 10500

// handedOut are the ports ReservedPorts gave in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// ReservedPorts is FreePorts for a server bound long after the ports were chosen (a test
// starting bin/devenv, whose git server binds a minute later): from a band FreePorts never
// returns, so the many servers other suites start meanwhile cannot take them, and never a port it
// gave before in this process.
func ReservedPorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	ports, err := freePortsIn(n, reservedLo, reservedHi, func(p int) bool { return handedOut.ports[p] })
	for _, p := range ports {
		handedOut.ports[p] = true
	}
	return ports, err
}

// freePortsIn returns n distinct free ports of [lo, hi) on 127.0.0.1, none for which skip says so.
func freePortsIn(n, lo, hi int, skip func(int) bool) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("found only %d free ports in %d-%d on 127.0.0.1, want %d", len(ports), lo, hi-1, n)
		}
		p := lo + rand.IntN(hi-lo)
		if skip != nil && skip(p) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// /proc/sys/net/ipv4/ip_local_port_range; 32768 where it cannot be read).
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				return v
			}
		}
	}
	return 32768
}
