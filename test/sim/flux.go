package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// FluxNamespace is where FluxPods runs Flux's controllers: flux-system, where the Flux chart,
// `flux install` and `flux bootstrap` put them.
const FluxNamespace = "flux-system"

const (
	// fluxSyncInterval is how often FluxPods looks at the Deployments when nothing happened.
	fluxSyncInterval = 500 * time.Millisecond
	// fluxProbeInterval is how often a started controller's readiness probe is tried until it
	// passes (see FluxPods).
	fluxProbeInterval = 250 * time.Millisecond
	// Container restart back-off of the kubelet: 10s, doubled after every restart, at most 300s
	// (k8s.io/kubernetes v1.36.3 pkg/kubelet/kubelet.go: initialCrashLoopBackOff line 173,
	// MaxCrashLoopBackOff = MaxContainerBackOff line 166, newCrashLoopBackOff lines 350-366;
	// KubeletCrashLoopBackOffMax, Beta and on by default, takes the maximum from
	// crashLoopBackOff.maxContainerRestartPeriod, which defaults to MaxContainerBackOff:
	// pkg/kubelet/apis/config/v1beta1/defaults.go lines 47, 316-317).
	fluxRestartBackoff    = 10 * time.Second
	fluxMaxRestartBackoff = 300 * time.Second
	// fluxTokenTTL is how long the ServiceAccount token a controller runs with is valid; the
	// kubelet would rotate it, FluxPods does not.
	fluxTokenTTL = 7 * 24 * time.Hour
	// fluxMaxGrace bounds the terminationGracePeriodSeconds FluxPods honours when it stops.
	fluxMaxGrace = 10 * time.Second
)

// fluxBinary is a controller FluxPods can run: its binary is the image's repository name
// (ghcr.io/fluxcd/source-controller -> BinDir/source-controller,
// docker.io/bitnami/sealed-secrets-controller -> BinDir/sealed-secrets-controller), built by
// hack/build-tools.sh.
type fluxBinary struct {
	// ports maps the container ports the controller listens on by default to the flags that set
	// them (defaults in source-controller v1.9.6 main.go lines 122-126 and fluxcd/pkg/artifact
	// v0.18.1 config/flags.go: --metrics-addr :8080, --health-addr :9440, --storage-addr :9090;
	// kustomize-controller v1.9.6 main.go lines 111-113; helm-controller v1.4.3 main.go lines
	// 112-116: --metrics-addr :8080, --health-addr :9440; sealed-secrets v0.32.2
	// pkg/controller/server.go lines 21-22: --listen-addr :8080, --listen-metrics-addr :8081).
	ports map[int32]string
	// storage: the controller serves artifacts (--storage-path, --storage-adv-addr).
	storage bool
	// flux: a Flux controller, with Flux's --enable-leader-election and --events-addr flags
	// (fluxcd/pkg/runtime leaderelection and events options), run only in flux-system. Others
	// run in whichever namespace their Deployment is.
	flux bool
	// podNetwork: the Pod gets a network namespace and an address of its own (podNet) and the
	// controller listens on its container ports at that address; FluxPods writes the Pod object
	// (status.podIPs) and the Endpoints of the Services that select it, so that the target API
	// server's service proxy reaches it.
	podNetwork bool
	// inCluster: the controller finds its API server only as rest.InClusterConfig does
	// (sealed-secrets v0.32.2 pkg/controller/main.go line 208): from KUBERNETES_SERVICE_HOST and
	// KUBERNETES_SERVICE_PORT and the kube-api-access volume's files at
	// /var/run/secrets/kubernetes.io/serviceaccount (client-go rest/config.go InClusterConfig),
	// so it runs in a mount namespace of its own where that volume is mounted (KUBECONFIG does
	// nothing for it).
	inCluster bool
}

var fluxBinaries = map[string]fluxBinary{
	"source-controller":    {ports: map[int32]string{8080: "metrics-addr", 9440: "health-addr", 9090: "storage-addr"}, storage: true, flux: true},
	"kustomize-controller": {ports: map[int32]string{8080: "metrics-addr", 9440: "health-addr"}, flux: true},
	"helm-controller":      {ports: map[int32]string{8080: "metrics-addr", 9440: "health-addr"}, flux: true},
	// The sealed-secrets chart's Deployment (helm/sealed-secrets/templates/deployment.yaml:
	// image bitnami/sealed-secrets-controller, container ports http 8080 and metrics 8081), in
	// the namespace its release installs it (kubeseal's default: kube-system).
	"sealed-secrets-controller": {ports: map[int32]string{8080: "listen-addr", 8081: "listen-metrics-addr"}, podNetwork: true, inCluster: true},
}

// overridden says whether FluxPods replaces the container's flag name, because a process on
// this machine cannot honour it as a Pod would: the listen addresses (a Pod has its own network
// namespace; a Flux controller's process here shares this machine's, so each gets free
// localhost ports, and a podNetwork controller listens at its Pod's address), the storage path
// and advertised address (a Pod has its emptyDir volume and its Service's DNS name; here a
// work directory and the localhost address stand in for them), leader election
// (controller-runtime finds its lease namespace only in a Pod; FluxPods runs one process per
// Deployment, so there is nothing to elect) and the events address (notification-controller's
// Service DNS name does not resolve here).
func (b fluxBinary) overridden(name string) bool {
	for _, flag := range b.ports {
		if flag == name {
			return true
		}
	}
	switch name {
	case "storage-path", "storage-adv-addr":
		return b.storage
	case "enable-leader-election", "events-addr":
		return b.flux
	}
	return false
}

// FluxPods plays the kubelet, and kube-controller-manager's Deployment controller, for Flux's
// Deployments in namespace flux-system of a target cluster whose API server has no nodes, and
// for the Deployments of the other controllers in fluxBinaries (the sealed-secrets controller
// that Flux's helm-controller installs from its chart) in any namespace: what it plays, as those
// components do it:
//
//   - Kubelet: for each Deployment it runs one Pod of the current template: the container named
//     "manager" (else the first) whose image is a controller it has a binary for
//     (source-controller, kustomize-controller, helm-controller, sealed-secrets-controller in
//     BinDir) runs as a process with the container's args ($(VAR) expanded: expandVars; the
//     image's entrypoint stands for command) and env (containerEnv; anything else there is not
//     played and the Pod never starts), a Flux controller with a token of the Pod's
//     ServiceAccount as KUBECONFIG (writePodKubeconfig; none with
//     automountServiceAccountToken: false), in a fresh work
//     directory (podSandbox; its emptyDir volumes). The flags fluxBinary.overridden names are
//     replaced (see there). A controller marked podNetwork gets, as from a CNI plugin, a network
//     namespace and address of its own (podNet: 10.244.128.0/17 over a veth pair; needs root)
//     and listens at that address on its container ports; FluxPods then also writes its Pod
//     object (createPodObject, as the ReplicaSet controller would; also for an inCluster one,
//     whose token is bound to it) and its status as the kubelet does (podStatus: Running,
//     podIP(s), Ready once the probe passes, restartCount) and, as kube-controller-manager's
//     endpoints controller does, the
//     Endpoints of each Service of the namespace whose selector matches the Pod (syncEndpoints),
//     which is what the API server's service proxy reads. A controller marked inCluster gets the
//     kube-api-access volume (token bound to the Pod, ca.crt, namespace) mounted at
//     /var/run/secrets/kubernetes.io/serviceaccount in a mount namespace of its own, and
//     KUBERNETES_SERVICE_HOST/PORT naming the API server (the kubelet's env for the kubernetes
//     Service; kube-proxy's part, the Service's cluster IP, is the API server's own address here,
//     forwarded inside the Pod's network namespace). The Pod is ready
//     once its readinessProbe (an httpGet on a named or numbered container port) answers 2xx or
//     3xx (pkg/probe/http/http.go:111; timeoutSeconds' default 1 s), or once it runs when there
//     is no probe. A process that exits makes its Pod not ready and is restarted with the
//     kubelet's back-off (10s doubling to 300s). A deleted Pod's process is stopped
//     (stopContainer, grace). A changed template is a new Pod: the old process stops, a new one
//     starts. Images it has no binary for (e.g. notification-controller) never start.
//   - Deployment controller: it writes the Deployment's status as calculateStatus does
//     (k8s.io/kubernetes v1.36.3 pkg/controller/deployment/sync.go lines 494-533):
//     observedGeneration, replicas, updatedReplicas, readyReplicas, availableReplicas,
//     unavailableReplicas, and Available=True/MinimumReplicasAvailable ("Deployment has minimum
//     availability.") when availableReplicas >= replicas - maxUnavailable, else
//     Available=False/MinimumReplicasUnavailable; and Progressing as progress.go lines 47-70 do
//     it: left as it is once the rollout is complete, else True/NewReplicaSetAvailable
//     ("ReplicaSet %q has successfully progressed.") once every replica is updated and
//     available, else True/ReplicaSetUpdated ("ReplicaSet %q is progressing."). The reason
//     constants are deploymentutil's (pkg/controller/deployment/util/deployment_util.go lines
//     73-100). And the Deployment's ReplicaSet object with the status the ReplicaSet controller
//     reports (writeReplicaSet), which Helm's install --wait reads.
//
// What it does not play: Pod objects of Flux's controllers, more than one
// replica (one Pod runs;
// further replicas stay pending, so the Deployment is available only when maxUnavailable allows
// it), rolling updates (a new template is played as Recreate), ProgressDeadlineExceeded and
// NewReplicaSetCreated, liveness probes, probe periods (the readiness probe is tried every 250ms
// until it first passes, rather than every periodSeconds, to keep tests quick; afterwards only an
// exit makes the Pod unready), minReadySeconds, token rotation (Flux's controllers get
// unbound tokens of a week; inCluster ones a Pod-bound token of 3607 s, never refreshed), service
// links, securityContext (users, read-only root), resources (beyond resourceFieldRef env), a Pod
// object deleted by someone else, EndpointSlices, and Deployments outside flux-system whose
// image is not a controller of fluxBinaries.
type FluxPods struct {
	// Target is the admin config of the target cluster: FluxPods reads Deployments and writes
	// their status with it, and requests the ServiceAccount tokens the Pods run with.
	Target *rest.Config
	// KubeconfigPath, when set, is a kubeconfig every Flux controller runs with instead of a
	// token of its Pod's ServiceAccount (e.g. the target's admin kubeconfig); an inCluster
	// controller (sealed-secrets) reads no kubeconfig and always gets its ServiceAccount's token.
	KubeconfigPath string
	// BinDir holds the controllers' binaries (_tools/bin).
	BinDir string
	// WorkDir holds the Pods' directories (storage, tmp, kubeconfig); created when missing.
	WorkDir string
	// Log receives the controllers' output, each line prefixed with its Deployment's name, and
	// what FluxPods does; nil discards.
	Log io.Writer
	// Processes records each controller by its Deployment's name; nil records nothing. The
	// controllers die with this process either way (devenv.Processes).
	Processes *devenv.Processes

	mu        sync.Mutex
	pods      map[string]*fluxPod // by podKey of the Deployment
	seq       int                 // numbers the Pods' work directories
	logs      *lineWriter
	poke      chan struct{}
	endpoints map[string]bool // namespace/name of the Endpoints written
}

// fluxPod is the one Pod of a Deployment and its controller process.
type fluxPod struct {
	name      string // the Deployment's
	key       string // podKey of the Deployment
	namespace string // the Deployment's
	template  string // hash of the Pod template it runs
	rs        string // the ReplicaSet name it stands for: <deployment>-<template hash>
	binary    string // path of the binary; "" when the image cannot run here
	dir       string

	cmd      *exec.Cmd
	done     chan struct{} // closed when the process exited
	ready    bool
	restarts int
	nextRun  time.Time // when an exited process may be started again
	stopped  bool      // the Pod is being deleted: do not restart
	cancel   context.CancelFunc
	pid      int

	// The Pod's network (podNetwork), its Pod object (podNetwork or inCluster) and the status
	// last written to it.
	net       *podNet
	object    *corev1.Pod
	written   string
	startedAt metav1.Time
}

// Run plays the kubelet and the Deployment controller until ctx is done, then stops every
// controller it started (SIGTERM, then SIGKILL after the Pod's termination grace period, at most
// 10s) and returns nil. It returns an error only when it cannot start.
func (f *FluxPods) Run(ctx context.Context) error {
	if f.Target == nil || f.BinDir == "" || f.WorkDir == "" {
		return errors.New("FluxPods needs Target, BinDir and WorkDir")
	}
	// The endpoints controller's writes of v1 Endpoints draw the API server's deprecation warning
	// on every call; an actor's log is not the place for them.
	cfg := rest.CopyConfig(f.Target)
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.WorkDir, 0o755); err != nil {
		return err
	}
	out := f.Log
	if out == nil {
		out = io.Discard
	}
	f.mu.Lock()
	f.pods = map[string]*fluxPod{}
	f.endpoints = map[string]bool{}
	f.logs = &lineWriter{out: out}
	f.poke = make(chan struct{}, 1)
	f.mu.Unlock()
	defer f.stopAll(cs)

	ticker := time.NewTicker(fluxSyncInterval)
	defer ticker.Stop()
	for {
		if err := f.sync(ctx, cs); err != nil && ctx.Err() == nil {
			f.logf("sync: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-f.poke:
		}
	}
}

// PIDs returns the process IDs of the controllers running now, by Deployment name in
// flux-system and namespace/name elsewhere (podKey) (for tests that make a controller exit, as a
// crashing container would).
func (f *FluxPods) PIDs() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for name, p := range f.pods {
		if p.cmd != nil && p.pid != 0 {
			out[name] = p.pid
		}
	}
	return out
}

// wake makes Run sync now.
func (f *FluxPods) wake() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

func (f *FluxPods) logf(format string, args ...any) {
	f.logs.line("flux-pods", fmt.Sprintf(format, args...))
}

// played says whether FluxPods runs Deployment d: every Deployment in flux-system, and
// elsewhere those whose container's image is a controller in fluxBinaries that is not Flux's.
func played(d *appsv1.Deployment) bool {
	if d.Namespace == FluxNamespace {
		return true
	}
	c := manager(&d.Spec.Template.Spec)
	if c == nil {
		return false
	}
	b, ok := fluxBinaries[imageName(c.Image)]
	return ok && !b.flux
}

// podKey names d's Pod: its name in flux-system, namespace/name elsewhere.
func podKey(d *appsv1.Deployment) string {
	if d.Namespace == FluxNamespace {
		return d.Name
	}
	return d.Namespace + "/" + d.Name
}

// sync runs the Pods of the played Deployments and writes their status, their Pod objects and
// the Endpoints of the Services that select them.
func (f *FluxPods) sync(ctx context.Context, cs kubernetes.Interface) error {
	list, err := cs.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var errs []error
	for i := range list.Items {
		d := &list.Items[i]
		if !played(d) {
			continue
		}
		seen[podKey(d)] = true
		if d.DeletionTimestamp != nil {
			continue
		}
		p := f.runPod(ctx, cs, d)
		if err := writeReplicaSet(ctx, cs, d, p); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("ReplicaSet of Deployment %s: %w", podKey(d), err))
		}
		if err := f.writeStatus(ctx, cs, d, p); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("status of Deployment %s: %w", podKey(d), err))
		}
	}
	f.mu.Lock()
	var gone []*fluxPod
	for key, p := range f.pods {
		if !seen[key] {
			gone = append(gone, p)
			delete(f.pods, key)
		}
	}
	f.mu.Unlock()
	for _, p := range gone {
		f.logf("Deployment %s deleted: stopping its Pod", p.key)
		f.deletePod(ctx, cs, p, fluxMaxGrace)
	}
	if err := f.syncPodObjects(ctx, cs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// podState is what the Deployment controller sees of a Deployment's Pod.
type podState struct {
	rs    string
	ready bool
}

// runPod makes the Pod of d run its current template and returns its state.
func (f *FluxPods) runPod(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment) podState {
	hash := templateHash(&d.Spec.Template)
	key := podKey(d)
	f.mu.Lock()
	p := f.pods[key]
	f.mu.Unlock()
	if p != nil && (p.template != hash || replicas(d) == 0) {
		// A new template is a new ReplicaSet: its Pod replaces the old one. Scaled to zero, the
		// Pod is deleted.
		f.logf("Deployment %s has a new Pod template or no replicas: deleting its Pod", key)
		f.deletePod(ctx, cs, p, grace(&d.Spec.Template.Spec))
		f.mu.Lock()
		delete(f.pods, key)
		f.mu.Unlock()
		p = nil
	}
	if replicas(d) == 0 {
		return podState{rs: d.Name + "-" + hash}
	}
	if p == nil {
		f.mu.Lock()
		f.seq++
		p = &fluxPod{name: d.Name, key: key, namespace: d.Namespace, template: hash, rs: d.Name + "-" + hash,
			dir: filepath.Join(f.WorkDir, fmt.Sprintf("%s-%d", d.Name, f.seq))}
		f.pods[key] = p
		f.mu.Unlock()
		c := manager(&d.Spec.Template.Spec)
		if c != nil {
			if _, ok := fluxBinaries[imageName(c.Image)]; ok {
				p.binary = filepath.Join(f.BinDir, imageName(c.Image))
			}
		}
		if p.binary == "" {
			image := "no manager container"
			if c != nil {
				image = c.Image
			}
			f.logf("Deployment %s: no binary for image %s here: its Pod never starts", key, image)
		}
	}

	f.mu.Lock()
	running := p.cmd != nil
	ready := p.ready
	canStart := p.binary != "" && !running && !p.stopped && !time.Now().Before(p.nextRun)
	f.mu.Unlock()
	if canStart {
		if err := f.start(ctx, cs, d, p); err != nil {
			f.logf("Deployment %s: cannot start its Pod: %v", key, err)
			f.mu.Lock()
			p.nextRun = time.Now().Add(fluxRestartBackoff)
			f.mu.Unlock()
		}
	}
	return podState{rs: p.rs, ready: ready}
}

// start starts the controller of p for Deployment d.
func (f *FluxPods) start(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment, p *fluxPod) error {
	spec := &d.Spec.Template.Spec
	c := manager(spec)
	bin := fluxBinaries[imageName(c.Image)]
	if _, err := os.Stat(p.binary); err != nil {
		return fmt.Errorf("%s is missing: run `make tools`: %w", p.binary, err)
	}
	env, err := podSandbox(p.dir)
	if err == nil {
		err = os.MkdirAll(filepath.Join(p.dir, "data"), 0o755)
	}
	if err != nil {
		return err
	}
	cenv, err := containerEnv(c, d.Namespace)
	if err != nil {
		return fmt.Errorf("%v is not played", err)
	}
	maps.Copy(env, cenv)

	// The Pod's network and object, kept across restarts of its container (a restarted
	// container keeps its Pod's address).
	if bin.podNetwork && p.net == nil {
		n, err := startPodNet(ctx, f.Processes, strings.ReplaceAll(p.key, "/", "."), f.Target.Host)
		if err != nil {
			return err
		}
		f.mu.Lock()
		p.net = n
		f.mu.Unlock()
		f.logf("Deployment %s: its Pod's address is %s", p.key, n.ip)
	}
	if (bin.podNetwork || bin.inCluster) && p.object == nil {
		pod, err := createPodObject(ctx, cs, d, p)
		if err != nil {
			return err
		}
		f.mu.Lock()
		p.object = pod
		p.written = ""
		f.mu.Unlock()
	}

	switch {
	case bin.inCluster:
		// The kube-api-access volume, as the kubelet projects it (token bound to the Pod, the
		// cluster's CA, the namespace), and the kubernetes Service's env.
		if !ptr.Deref(spec.AutomountServiceAccountToken, true) {
			return errors.New("automountServiceAccountToken is false: the controller would find no in-cluster config")
		}
		if err := writeKubeAPIAccess(ctx, f.Target, d.Namespace, spec.ServiceAccountName, p.object, filepath.Join(p.dir, "kube-api-access")); err != nil {
			return err
		}
		host, port, err := apiServerHostPort(f.Target.Host)
		if err != nil {
			return err
		}
		env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"] = host, port
	case f.KubeconfigPath != "":
		env["KUBECONFIG"] = f.KubeconfigPath
	case ptr.Deref(spec.AutomountServiceAccountToken, true):
		// controller-runtime's config loader reads KUBECONFIG (sigs.k8s.io/controller-runtime
		// v0.24.1 pkg/client/config/config.go, loadConfig lines 115-155); Flux's flags have no
		// --kubeconfig. Without a token (automountServiceAccountToken: false) there is none,
		// and the controller fails to find a config as it would in a Pod.
		env["KUBECONFIG"] = filepath.Join(p.dir, "kubeconfig")
		if err := writePodKubeconfig(ctx, f.Target, d.Namespace, spec.ServiceAccountName, nil, fluxTokenTTL, env["KUBECONFIG"]); err != nil {
			return err
		}
	}

	// The listeners: at the Pod's address on the container ports, else free localhost ports.
	flags := map[string]string{}
	local := map[int32]string{} // container port -> host:port the controller listens on
	containerPorts := make([]int32, 0, len(bin.ports))
	for cp := range bin.ports {
		containerPorts = append(containerPorts, cp)
	}
	sort.Slice(containerPorts, func(a, b int) bool { return containerPorts[a] < containerPorts[b] })
	if p.net != nil {
		for _, cp := range containerPorts {
			local[cp] = net.JoinHostPort(p.net.ip, strconv.Itoa(int(cp)))
			flags[bin.ports[cp]] = local[cp]
		}
	} else {
		ports, err := devenv.FreePorts(len(bin.ports))
		if err != nil {
			return err
		}
		for i, cp := range containerPorts {
			local[cp] = fmt.Sprintf("127.0.0.1:%d", ports[i])
			flags[bin.ports[cp]] = local[cp]
		}
	}
	if bin.storage {
		flags["storage-path"] = filepath.Join(p.dir, "data")
		// The Service source-controller (port 80 -> the container's http port) stands for this
		// address in a cluster.
		flags["storage-adv-addr"] = flags["storage-addr"]
	}

	args := []string{}
	for i := 0; i < len(c.Args); i++ {
		a := expandVars(c.Args[i], cenv)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "--") && bin.overridden(name) {
			// "--flag value": skip the value too (only enable-leader-election is a bool flag).
			if !hasValue && name != "enable-leader-election" && i+1 < len(c.Args) && !strings.HasPrefix(c.Args[i+1], "-") {
				i++
			}
			continue
		}
		args = append(args, a)
	}
	names := make([]string, 0, len(flags))
	for n := range flags {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		args = append(args, "--"+n+"="+flags[n])
	}
	if bin.flux {
		args = append(args, "--enable-leader-election=false")
	}

	cmd := exec.Command(p.binary, args...)
	if p.net != nil || bin.inCluster {
		cmd = podCommand(p, bin, args)
	}
	cmd.Env = environ(env)
	cmd.Dir = p.dir
	w := f.logs.writer(p.key)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := f.Processes.Start(p.key, cmd)
	if err != nil {
		return fmt.Errorf("failed to start %s: %w", p.binary, err)
	}
	f.logf("Deployment %s: started %s (pid %d) %s", p.key, filepath.Base(p.binary), cmd.Process.Pid, strings.Join(args, " "))

	done := make(chan struct{})
	probeCtx, cancel := context.WithCancel(context.Background())
	f.mu.Lock()
	p.cmd, p.done, p.ready, p.cancel, p.pid = cmd, done, false, cancel, cmd.Process.Pid
	p.startedAt = metav1.Now()
	f.mu.Unlock()

	go func() {
		err := proc.Wait()
		cancel()
		f.mu.Lock()
		p.cmd, p.ready, p.pid = nil, false, 0
		if !p.stopped {
			backoff := fluxRestartBackoff << min(p.restarts, 5)
			if backoff > fluxMaxRestartBackoff {
				backoff = fluxMaxRestartBackoff
			}
			p.restarts++
			p.nextRun = time.Now().Add(backoff)
			f.logs.line("flux-pods", fmt.Sprintf("Deployment %s: %s exited (%v); restarting in %s", p.key, filepath.Base(p.binary), err, backoff))
		}
		f.mu.Unlock()
		close(done)
		f.wake()
	}()
	go f.probe(probeCtx, p, c, local)
	return nil
}

// podCommand runs the controller as a Pod's container: in the Pod's network namespace
// (podNetwork) and, for an inCluster controller, in a mount namespace of its own whose /var/run
// is a fresh tmpfs holding the kube-api-access volume at secrets/kubernetes.io/serviceaccount
// (the container's own filesystem does not have the host's /run either). nsenter, unshare and
// sh exec one another, so the process started is the controller's.
func podCommand(p *fluxPod, bin fluxBinary, args []string) *exec.Cmd {
	argv := []string{}
	if p.net != nil {
		argv = append(argv, "nsenter", "--net="+p.net.netns, "--")
	}
	if bin.inCluster {
		argv = append(argv, "unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
			`mount -t tmpfs -o mode=0755 tmpfs /var/run && mkdir -p /var/run/secrets/kubernetes.io/serviceaccount && `+
				`mount --bind -o ro "$1" /var/run/secrets/kubernetes.io/serviceaccount && shift && exec "$@"`,
			"pod", filepath.Join(p.dir, "kube-api-access"))
	}
	argv = append(argv, p.binary)
	argv = append(argv, args...)
	return exec.Command(argv[0], argv[1:]...)
}

// apiServerHostPort splits an API server URL into host and port (443 when it names none).
func apiServerHostPort(server string) (string, string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("the API server's address %q is no URL", server)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return u.Hostname(), port, nil
}

// probe marks p ready once the container's readiness probe passes.
func (f *FluxPods) probe(ctx context.Context, p *fluxPod, c *corev1.Container, local map[int32]string) {
	url := ""
	if rp := c.ReadinessProbe; rp != nil && rp.HTTPGet != nil {
		port := containerPort(c, rp.HTTPGet.Port)
		addr, ok := local[port]
		if !ok {
			f.logf("Deployment %s: readiness probe port %s is not a port the controller listens on: never ready", p.key, rp.HTTPGet.Port.String())
			return
		}
		path := rp.HTTPGet.Path
		if path == "" {
			path = "/"
		}
		url = fmt.Sprintf("http://%s%s", addr, path)
	}
	hc := &http.Client{Timeout: time.Second}
	for {
		ok := url == ""
		if !ok {
			if resp, err := hc.Get(url); err == nil {
				_ = resp.Body.Close()
				ok = resp.StatusCode >= 200 && resp.StatusCode < 400 // the kubelet's httpGet success
			}
		}
		if ok {
			f.mu.Lock()
			alive := p.cmd != nil && ctx.Err() == nil
			if alive {
				p.ready = true
			}
			f.mu.Unlock()
			if alive {
				f.logf("Deployment %s: Pod ready", p.key)
				f.wake()
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(fluxProbeInterval):
		}
	}
}

// stop stops Pod p's container: its process gets SIGTERM, then SIGKILL after grace; then its
// network goes.
func (f *FluxPods) stop(p *fluxPod, grace time.Duration) {
	f.mu.Lock()
	p.stopped = true
	cmd, done, cancel := p.cmd, p.done, p.cancel
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if cmd != nil && cmd.Process != nil {
		stopContainer(cmd, done, grace)
	}
	f.mu.Lock()
	n := p.net
	p.net = nil
	f.mu.Unlock()
	if n != nil {
		n.stop()
	}
}

// deletePod stops Pod p and deletes its Pod object, as the kubelet finishes a Pod's deletion.
func (f *FluxPods) deletePod(ctx context.Context, cs kubernetes.Interface, p *fluxPod, grace time.Duration) {
	f.stop(p, grace)
	f.mu.Lock()
	obj := p.object
	p.object = nil
	f.mu.Unlock()
	if obj != nil {
		if err := cs.CoreV1().Pods(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil && !apierrors.IsNotFound(err) {
			f.logf("Deployment %s: failed to delete Pod %s: %v", p.key, obj.Name, err)
		}
	}
}

// stopAll stops every Pod and, best effort, deletes the Pod objects it wrote (the API server may
// be gone already).
func (f *FluxPods) stopAll(cs kubernetes.Interface) {
	f.mu.Lock()
	pods := make([]*fluxPod, 0, len(f.pods))
	for _, p := range f.pods {
		pods = append(pods, p)
	}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() { defer wg.Done(); f.deletePod(ctx, cs, p, fluxMaxGrace) }()
	}
	wg.Wait()
}

// writeStatus writes d's status as the Deployment controller would for its one Pod p.
func (f *FluxPods) writeStatus(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment, p podState) error {
	want := deploymentStatus(d, p, time.Now())
	if statusEqual(d.Status, want) {
		return nil
	}
	d = d.DeepCopy()
	d.Status = want
	_, err := cs.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}

// deploymentStatus is the status calculateStatus and syncRolloutStatus give Deployment d whose
// ReplicaSet p.rs has replicas(d) Pods of which one runs here (ready or not) and the rest never
// start.
func deploymentStatus(d *appsv1.Deployment, p podState, now time.Time) appsv1.DeploymentStatus {
	want := replicas(d)
	var available int32
	if p.ready && want > 0 {
		available = 1
	}
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            want,
		UpdatedReplicas:     want,
		ReadyReplicas:       available,
		AvailableReplicas:   available,
		UnavailableReplicas: max(want-available, 0),
		CollisionCount:      d.Status.CollisionCount,
		Conditions:          append([]appsv1.DeploymentCondition(nil), d.Status.Conditions...),
	}
	if available >= want-maxUnavailable(d) {
		setDeploymentCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.", now)
	} else {
		setDeploymentCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", now)
	}
	// A complete rollout's Progressing is left as it is (progress.go:47-51). A new ReplicaSet would
	// have replaced the condition (NewReplicaSetCreated, sync.go:289-293, not played), so only a
	// NewReplicaSetAvailable of this ReplicaSet counts.
	done := fmt.Sprintf("ReplicaSet %q has successfully progressed.", p.rs)
	cur := slices.IndexFunc(d.Status.Conditions, func(c appsv1.DeploymentCondition) bool {
		return c.Type == appsv1.DeploymentProgressing && c.Reason == "NewReplicaSetAvailable" && c.Message == done
	})
	switch {
	case st.Replicas == st.UpdatedReplicas && cur >= 0:
	case st.UpdatedReplicas == want && st.AvailableReplicas == want:
		setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", done, now)
	default:
		setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", fmt.Sprintf("ReplicaSet %q is progressing.", p.rs), now)
	}
	return st
}

// setDeploymentCondition sets a condition as deploymentutil.SetDeploymentCondition does: kept as it
// is when status and reason are unchanged (here also the message), lastTransitionTime kept when
// only the reason changes.
func setDeploymentCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) {
	c := appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: message,
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	for i := range st.Conditions {
		cur := &st.Conditions[i]
		if cur.Type != t {
			continue
		}
		if cur.Status == status && cur.Reason == reason && cur.Message == message {
			return
		}
		if cur.Status == status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		st.Conditions[i] = c
		return
	}
	st.Conditions = append(st.Conditions, c)
}

// statusEqual compares the fields deploymentStatus sets, conditions without their times.
func statusEqual(a, b appsv1.DeploymentStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Replicas != b.Replicas || a.UpdatedReplicas != b.UpdatedReplicas ||
		a.ReadyReplicas != b.ReadyReplicas || a.AvailableReplicas != b.AvailableReplicas ||
		a.UnavailableReplicas != b.UnavailableReplicas || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

// replicas is d's spec.replicas (1 when unset, as the API server defaults it).
func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// maxUnavailable is deploymentutil.MaxUnavailable (deployment_util.go lines 447-458, with
// ResolveFenceposts): 0 for Recreate or no replicas; else spec.strategy.rollingUpdate
// maxUnavailable scaled down from a percentage (default 25%), 1 when it and maxSurge (scaled up,
// default 25%) are both 0, at most replicas.
func maxUnavailable(d *appsv1.Deployment) int32 {
	n := replicas(d)
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType || n == 0 {
		return 0
	}
	def := intstr.FromString("25%")
	mu, ms := &def, &def
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxUnavailable != nil {
			mu = ru.MaxUnavailable
		}
		if ru.MaxSurge != nil {
			ms = ru.MaxSurge
		}
	}
	surge, err1 := intstr.GetScaledValueFromIntOrPercent(ms, int(n), true)
	unavailable, err2 := intstr.GetScaledValueFromIntOrPercent(mu, int(n), false)
	if err1 != nil || err2 != nil {
		return 0
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return min(int32(unavailable), n)
}

// manager returns the Pod's "manager" container (Flux's controllers' name for it), or its first.
func manager(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == "manager" {
			return &spec.Containers[i]
		}
	}
	if len(spec.Containers) > 0 {
		return &spec.Containers[0]
	}
	return nil
}

// imageName is the last path element of an image's repository: ghcr.io/fluxcd/x:v1 -> x.
func imageName(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	name := image[strings.LastIndex(image, "/")+1:]
	if i := strings.Index(name, ":"); i >= 0 {
		name = name[:i]
	}
	return name
}

// containerPort resolves a probe's port (a number or a port name) to the container port.
func containerPort(c *corev1.Container, port intstr.IntOrString) int32 {
	if port.Type == intstr.Int {
		return port.IntVal
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return p.ContainerPort
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return int32(n)
	}
	return 0
}

// grace is the Pod's termination grace period (killGrace), at most fluxMaxGrace.
func grace(spec *corev1.PodSpec) time.Duration {
	return min(killGrace(nil, spec), fluxMaxGrace)
}

// templateHash is a short hash of a Pod template: a new one is a new ReplicaSet.
func templateHash(t *corev1.PodTemplateSpec) string {
	raw, _ := json.Marshal(t)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:10]
}

// lineWriter writes whole lines, each prefixed with its source, to out.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
}

// line writes one line from source.
func (l *lineWriter) line(source, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "[%s] %s\n", source, strings.TrimRight(text, "\n"))
}

// writer returns a writer whose output goes line by line to l, prefixed with source.
func (l *lineWriter) writer(source string) io.Writer { return &prefixWriter{l: l, source: source} }

// prefixWriter buffers a partial line until its end.
type prefixWriter struct {
	l      *lineWriter
	source string
	mu     sync.Mutex
	buf    []byte
}

// Write implements io.Writer.
func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.l.line(w.source, string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64*1024 { // a very long line: write it as it is
		w.l.line(w.source, string(w.buf))
		w.buf = nil
	}
	return len(b), nil
}
