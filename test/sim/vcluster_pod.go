//go:build linux

package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// vCluster v0.21.0 (github.com/loft-sh/vcluster, the module hack/tools/vcluster pins) is cited
// below as "vcluster <path>:<line>"; its chart as "chart/<path>"; the kubelet as in kubelet.go
// (k8s.io/kubernetes v1.36.3).

const (
	// vclusterSyncInterval is how often VClusterPods looks at the StatefulSets.
	vclusterSyncInterval = 500 * time.Millisecond
	// vclusterTokenTTL is how long the ServiceAccount token a Pod runs with is valid; the kubelet
	// would rotate it, VClusterPods does not.
	vclusterTokenTTL = 7 * 24 * time.Hour
	// vclusterMaxGrace bounds the terminationGracePeriodSeconds VClusterPods honours when it
	// stops a container (the chart sets 10: chart/templates/statefulset.yaml).
	vclusterMaxGrace = 10 * time.Second
	// vclusterStartTimeout bounds a Pod's sandbox set-up and each of its init containers.
	vclusterStartTimeout = 2 * time.Minute
	// serviceAccountDir is where the kubelet mounts the kube-api-access volume, which the
	// ServiceAccount admission plugin adds to every Pod that automounts a token
	// (plugin/pkg/admission/serviceaccount/admission.go, DefaultAPITokenMountPath).
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// podKubeconfigPath is where, inside a container, the token kubeconfig (writePodKubeconfig)
	// lies: the one file of a container's file system that no Pod has.
	podKubeconfigPath = "/var/run/secrets/kubeconfig"
	// imagePath is the PATH of the images VClusterPods runs: alpine's, which the vCluster image
	// is built on (vcluster Dockerfile.release: FROM alpine:3.20), and Docker's default.
	imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// vclusterImage is an image VClusterPods can run: the files it has (path in the image -> binary
// in BinDir) and its entrypoint.
type vclusterImage struct {
	files      map[string]string
	entrypoint []string
}

// vclusterImages are the images of the chart's Pod by repository (registry and tag left out:
// the binaries built here stand for every tag).
//   - loft-sh/vcluster-pro (the chart's default, chart/values.yaml controlPlane.statefulSet.image)
//     and loft-sh/vcluster-oss: /vcluster and kine at /usr/local/bin/kine, entrypoint
//     ["/vcluster", "start"] (vcluster Dockerfile.release). Built here is the open-source
//     cmd/vcluster, which is what the pro image runs without a licence.
//   - kube-apiserver and kube-controller-manager (registry.k8s.io): the binary at
//     /usr/local/bin/<name>, as the chart's init containers copy it from there
//     (chart/templates/_init-containers.tpl, vcluster.k8s.initContainers). The tag the chart
//     picks (the host's version) is not honoured: _tools/bin has one version of each.
//
// An image's files lie on the host's root file system (/usr, /etc; ro), which stands for the
// image's base layer: the binaries built here are linked against its C library.
var vclusterImages = map[string]vclusterImage{
	"loft-sh/vcluster-pro":    {files: map[string]string{"/vcluster": "vcluster", "/usr/local/bin/kine": "kine"}, entrypoint: []string{"/vcluster", "start"}},
	"loft-sh/vcluster-oss":    {files: map[string]string{"/vcluster": "vcluster", "/usr/local/bin/kine": "kine"}, entrypoint: []string{"/vcluster", "start"}},
	"kube-apiserver":          {files: map[string]string{"/usr/local/bin/kube-apiserver": "kube-apiserver"}},
	"kube-controller-manager": {files: map[string]string{"/usr/local/bin/kube-controller-manager": "kube-controller-manager"}},
}

// VClusterPods plays the kubelet for the vCluster StatefulSet's Pod: for every StatefulSet
// labelled app=vcluster (chart/templates/statefulset.yaml) in any namespace of the host cluster
// it runs Pod <statefulset>-0 (the StatefulSet controller's name for ordinal 0,
// pkg/controller/statefulset/stateful_set_utils.go getPodName) of the current template, as the
// kubelet runs a Pod:
//
//   - Sandbox: the Pod gets its own network namespace (loopback up and the Pod's IP, from
//     podNetwork, on it: the CNI plugin's part) and mount namespace, made by unshare(1) and held
//     by a sleeping process (the pause container's part). Everything of the Pod dies with it.
//   - Volumes: emptyDir, secret and configMap volumes as directories (a Secret's or ConfigMap's
//     keys as files; the Pod waits, as the kubelet's volume manager does, until they exist), the
//     StatefulSet's volumeClaimTemplates as a directory per claim (<template>-<pod>) that
//     outlives the Pod (the volume a provisioner would bind), and the kube-api-access volume
//     (token, ca.crt, namespace) that the ServiceAccount admission plugin adds to the Pod. Its
//     token is a TokenRequest of the Pod's ServiceAccount (writePodKubeconfig) that also goes,
//     as a kubeconfig, into KUBECONFIG: the host API server is not at the address of the
//     kubernetes Service here (see below). vCluster reads its namespace from that volume
//     (vcluster pkg/util/clienthelper/helper.go:28) and its host cluster through
//     controller-runtime's GetConfigOrDie, which honours KUBECONFIG (vcluster
//     pkg/pro/remote.go:18).
//   - Containers: the init containers one after the other, each to a zero exit, then the
//     container; each in its own PID namespace (unshare --pid --fork --kill-child: when its
//     first process ends, everything it started ends) and root directory (chroot): the image's
//     files (vclusterImages) over the host's /usr and /etc (read-only), its own /proc, /dev and
//     /sys, and its volumeMounts. command/args as the kubelet takes them (command replaces the
//     entrypoint; $(VAR) expanded: expandVars), env with the fieldRefs the chart uses
//     (metadata.name, metadata.namespace, status.podIP, spec.nodeName; vclusterEnv), HOSTNAME
//     the Pod's name and HOME /root as the runtime sets them. A container that exits is started
//     again after the kubelet's back-off (10 s doubling to 300 s; restartPolicy Always).
//   - Network: inside the Pod's network namespace, the host API server's address (a loopback
//     address here) is a forwarder to the host API server, so the token kubeconfig works from
//     the Pod as it does from the host. ServiceAddress plays kube-proxy for a Service whose
//     selector matches a running Pod: a host loopback address that reaches the Pod's IP and
//     the Service port's targetPort.
//   - Stop: SIGTERM to the container's first process, SIGKILL to all its processes after the
//     Pod's grace period (at most 10 s) (stopContainer's order), then the sandbox.
//
// What vCluster reads of the host, besides its configuration Secret vc-config-<release>
// (mounted at /var/vcluster: vcluster pkg/constants/constants.go:9): the Secret again, to
// annotate it with the distro and store (vcluster pkg/setup/config.go:134-185); its Service
// <release> in its namespace, as the owner of what it writes (config.go:218) and for the
// proxy certificate's SANs (ClusterIP, load-balancer ingress IPs and host names,
// pkg/server/cert/syncer.go:99-200); the Service CIDR, by creating a Service with an invalid
// ClusterIP (pkg/util/servicecidr); the Service's Endpoints, which it copies into the virtual
// default/kubernetes Endpoints when they exist (pkg/controllers/k8sdefaultendpoint/k8sdefaultendpoint.go:105-118;
// nothing here writes them: no endpoints controller runs on the host); POD_IP for the proxy
// certificate (cert/syncer.go:143) and NODE_NAME (pkg/controllers/resources/nodes/
// translate.go:109). None of these needs more than the host API server.
//
// What it does not play: Pod objects and the StatefulSet's status (nothing here reads them),
// more than one replica, probes, resource limits, securityContext, service links' environment,
// envFrom, subPath, image pulls (an image it has no files for stops the Pod with an error),
// token rotation, and StatefulSets not labelled app=vcluster.
type VClusterPods struct {
	// Host is the admin config of the host cluster: VClusterPods reads StatefulSets, Secrets,
	// ConfigMaps and Services with it and requests the Pods' tokens.
	Host *rest.Config
	// BinDir holds the binaries of the images (_tools/bin: vcluster, kine, kube-apiserver,
	// kube-controller-manager).
	BinDir string
	// WorkDir holds the Pods' directories; created when missing.
	WorkDir string
	// Log receives the containers' output, each line prefixed with namespace/pod/container, and
	// what VClusterPods does; nil discards.
	Log io.Writer
	// Processes records the processes it starts; nil records nothing. They die with this process
	// either way (devenv.Processes).
	Processes *devenv.Processes
	// Schedule says whether the Pod of StatefulSet namespace/name may run on this node yet (a
	// test that checks what a Tenant shows while its vCluster is not up lets it run later, as a
	// scheduler would place it); nil runs every one.
	Schedule func(namespace, name string) bool

	mu       sync.Mutex
	cs       kubernetes.Interface
	pods     map[string]*vclusterPod // by namespace/statefulset
	seq      int
	logs     *lineWriter
	services map[string]*serviceProxy // by namespace/service/port
}

// vclusterPod is the one Pod of a StatefulSet.
type vclusterPod struct {
	namespace, name string // the Pod's
	statefulSet     string
	template        string // hash of the Pod template it runs
	labels          map[string]string
	ip              string
	dir             string
	spec            corev1.PodSpec

	sandbox  *devenv.Child
	netns    string        // /proc/<sandbox>/ns/net
	apiProxy *serviceProxy // the host API server's address inside the Pod

	volumes    map[string]string // volume name -> directory, once the init containers ran
	kubeconfig string            // the token kubeconfig; "" without a token
	main       *podContainer
	started    int // containers started, numbering their root directories
	restarts   int
	nextRun    time.Time
}

// podContainer is a running container: unshare's parent process, whose child is the
// container's first process (PID 1 of its namespace).
type podContainer struct {
	name  string
	child *devenv.Child
}

// Run plays the kubelet until ctx is done, then stops every Pod it started and returns nil. It
// returns an error only when it cannot start.
func (v *VClusterPods) Run(ctx context.Context) error {
	if v.Host == nil || v.BinDir == "" || v.WorkDir == "" {
		return errors.New("VClusterPods needs Host, BinDir and WorkDir")
	}
	if os.Geteuid() != 0 {
		return errors.New("VClusterPods makes network and mount namespaces and mounts: it must run as root")
	}
	for _, tool := range []string{"unshare", "nsenter", "ip", "mount", "chroot", "sleep", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("VClusterPods needs %s (util-linux, iproute2, coreutils): %w", tool, err)
		}
	}
	cs, err := kubernetes.NewForConfig(v.Host)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(v.WorkDir, 0o755); err != nil {
		return err
	}
	out := v.Log
	if out == nil {
		out = io.Discard
	}
	v.mu.Lock()
	v.cs = cs
	v.pods = map[string]*vclusterPod{}
	v.logs = &lineWriter{out: out}
	v.mu.Unlock()
	defer v.stopAll()

	ticker := time.NewTicker(vclusterSyncInterval)
	defer ticker.Stop()
	for {
		if err := v.sync(ctx); err != nil && ctx.Err() == nil {
			v.logf("sync: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (v *VClusterPods) logf(format string, args ...any) {
	v.logs.line("vcluster-pods", fmt.Sprintf(format, args...))
}

// sync runs the Pods of the StatefulSets labelled app=vcluster.
func (v *VClusterPods) sync(ctx context.Context) error {
	list, err := v.cs.AppsV1().StatefulSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "app=vcluster"})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range list.Items {
		s := &list.Items[i]
		key := s.Namespace + "/" + s.Name
		if s.DeletionTimestamp != nil || ptr.Deref(s.Spec.Replicas, 1) == 0 || (v.Schedule != nil && !v.Schedule(s.Namespace, s.Name)) {
			continue
		}
		seen[key] = true
		v.runPod(ctx, s)
	}
	v.mu.Lock()
	var gone []*vclusterPod
	for key, p := range v.pods {
		if !seen[key] {
			gone = append(gone, p)
			delete(v.pods, key)
		}
	}
	v.mu.Unlock()
	for _, p := range gone {
		v.logf("StatefulSet %s/%s deleted or scaled to zero: deleting Pod %s", p.namespace, p.statefulSet, p.name)
		v.deletePod(p)
	}
	return nil
}

// runPod makes Pod <s>-0 run s's current template.
func (v *VClusterPods) runPod(ctx context.Context, s *appsv1.StatefulSet) {
	key := s.Namespace + "/" + s.Name
	hash := templateHash(&s.Spec.Template)
	v.mu.Lock()
	p := v.pods[key]
	v.mu.Unlock()
	if p != nil && p.template != hash {
		// The StatefulSet controller's rolling update deletes the Pod and creates it again with
		// the new template (same name).
		v.logf("StatefulSet %s has a new Pod template: deleting Pod %s", key, p.name)
		v.deletePod(p)
		p = nil
	}
	if p == nil {
		v.mu.Lock()
		v.seq++
		name := s.Name + "-0"
		p = &vclusterPod{namespace: s.Namespace, name: name, statefulSet: s.Name, template: hash,
			labels: s.Spec.Template.Labels, spec: *s.Spec.Template.Spec.DeepCopy(),
			ip:  podIP(v.seq),
			dir: filepath.Join(v.WorkDir, fmt.Sprintf("%s.%s-%d", s.Namespace, name, v.seq))}
		v.pods[key] = p
		v.mu.Unlock()
	}
	if time.Now().Before(p.nextRun) {
		return
	}
	if p.main != nil {
		select {
		case <-p.main.child.Done():
		default:
			return // running
		}
		err := p.main.child.Wait()
		p.restarts++
		p.nextRun = time.Now().Add(restartBackoff(p.restarts))
		v.logf("Pod %s/%s: container %s exited (code %d): restarting it after %s", p.namespace, p.name, p.main.name, exitCode(err), time.Until(p.nextRun).Round(time.Second))
		v.setMain(p, nil)
		return
	}
	if err := v.startPod(ctx, s, p); err != nil {
		p.restarts++
		p.nextRun = time.Now().Add(restartBackoff(p.restarts))
		v.logf("Pod %s/%s does not start (trying again after %s): %v", p.namespace, p.name, time.Until(p.nextRun).Round(time.Second), err)
	}
}

// restartBackoff is the kubelet's container restart back-off after n restarts: 10 s doubling,
// at most 300 s (see fluxRestartBackoff).
func restartBackoff(n int) time.Duration {
	d := fluxRestartBackoff
	for i := 1; i < n && d < fluxMaxRestartBackoff; i++ {
		d *= 2
	}
	return min(d, fluxMaxRestartBackoff)
}

// podNetwork is the range the Pods' IPs come from (what a CNI plugin's IPAM would hand out;
// kubeadm's documentation uses it as the pod network CIDR of its examples). The address lives
// only on the loopback device of the Pod's own network namespace.
const podNetwork = "10.244.0.0/16"

// podIP is the IP of the n-th Pod (n from 1).
func podIP(n int) string {
	return fmt.Sprintf("10.244.%d.%d", (n/250)%256, n%250+2)
}

// startPod sets up p's sandbox and volumes, runs its init containers and starts its container;
// whatever was set up is torn down again on an error.
func (v *VClusterPods) startPod(ctx context.Context, s *appsv1.StatefulSet, p *vclusterPod) (err error) {
	spec := &p.spec
	if len(spec.Containers) != 1 {
		return fmt.Errorf("the template has %d containers; one is played", len(spec.Containers))
	}
	if p.sandbox == nil {
		if err := v.startSandbox(ctx, p); err != nil {
			return err
		}
		defer func() {
			if err != nil {
				v.stopSandbox(p)
			}
		}()
		volumes, err := v.volumes(ctx, s, p)
		if err != nil {
			return err
		}
		for i := range spec.InitContainers {
			c := &spec.InitContainers[i]
			child, err := v.startContainer(p, c, volumes)
			if err != nil {
				return fmt.Errorf("init container %s: %w", c.Name, err)
			}
			select {
			case <-child.Done():
			case <-time.After(vclusterStartTimeout):
				v.stopContainer(p, &podContainer{name: c.Name, child: child})
				return fmt.Errorf("init container %s did not finish within %s", c.Name, vclusterStartTimeout)
			case <-ctx.Done():
				v.stopContainer(p, &podContainer{name: c.Name, child: child})
				return ctx.Err()
			}
			if err := child.Wait(); err != nil {
				return fmt.Errorf("init container %s exited with code %d", c.Name, exitCode(err))
			}
		}
		p.volumes = volumes
	}
	c := &spec.Containers[0]
	child, err := v.startContainer(p, c, p.volumes)
	if err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	v.setMain(p, &podContainer{name: c.Name, child: child})
	v.logf("Pod %s/%s (IP %s) runs container %s", p.namespace, p.name, p.ip, c.Name)
	return nil
}

// startSandbox makes p's network and mount namespaces, held by a sleeping process, and the
// forwarder to the host API server inside them.
func (v *VClusterPods) startSandbox(ctx context.Context, p *vclusterPod) error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	u, err := url.Parse(v.Host.Host)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the host API server's address %q is no URL", v.Host.Host)
	}
	apiAddr := u.Host
	if u.Port() == "" {
		apiAddr = net.JoinHostPort(u.Hostname(), "443")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command("unshare", "--net", "--mount", "--propagation", "private", "--",
		"sh", "-c", `ip link set lo up && ip addr add "$1/32" dev lo && echo ready && exec sleep infinity`, "sandbox", p.ip)
	cmd.Stdout, cmd.Stderr = w, v.logs.writer(p.namespace+"/"+p.name+"/sandbox")
	child, err := v.Processes.Start(p.namespace+"."+p.name+"-sandbox", cmd)
	_ = w.Close()
	if err != nil {
		return fmt.Errorf("failed to make the Pod's namespaces: %w", err)
	}
	p.sandbox = child
	v.mu.Lock()
	p.netns = fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)
	v.mu.Unlock()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case l := <-line:
		if l != "ready" {
			v.stopSandbox(p)
			return fmt.Errorf("the Pod's network did not come up (exit code %d)", exitCode(child.Wait()))
		}
	case <-time.After(vclusterStartTimeout):
		v.stopSandbox(p)
		return errors.New("the Pod's network did not come up in time")
	case <-ctx.Done():
		v.stopSandbox(p)
		return ctx.Err()
	}
	ln, err := listenIn(p.netns, apiAddr)
	if err != nil {
		v.stopSandbox(p)
		return fmt.Errorf("failed to listen on %s in the Pod: %w", apiAddr, err)
	}
	p.apiProxy = newServiceProxy(ln, func() (net.Conn, error) { return net.DialTimeout("tcp", apiAddr, 10*time.Second) })
	return nil
}

// stopSandbox ends p's sandbox process (and so its namespaces, once no container holds them).
func (v *VClusterPods) stopSandbox(p *vclusterPod) {
	if p.apiProxy != nil {
		p.apiProxy.close()
		p.apiProxy = nil
	}
	if p.sandbox != nil {
		_ = p.sandbox.Cmd.Process.Kill()
		_ = p.sandbox.Wait()
		p.sandbox = nil
	}
	v.mu.Lock()
	p.netns = ""
	v.mu.Unlock()
	p.volumes = nil
}

// volumes makes the directories of p's volumes, by volume name (see VClusterPods).
func (v *VClusterPods) volumes(ctx context.Context, s *appsv1.StatefulSet, p *vclusterPod) (map[string]string, error) {
	base := filepath.Join(p.dir, "volumes")
	vols := map[string]string{}
	for _, vol := range p.spec.Volumes {
		dir := filepath.Join(base, vol.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		switch {
		case vol.EmptyDir != nil:
		case vol.Secret != nil:
			if len(vol.Secret.Items) > 0 {
				return nil, fmt.Errorf("volume %s: secret items are not played", vol.Name)
			}
			sec, err := v.cs.CoreV1().Secrets(p.namespace).Get(ctx, vol.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				if ptr.Deref(vol.Secret.Optional, false) {
					break
				}
				return nil, fmt.Errorf("volume %s: waiting for Secret %s: %w", vol.Name, vol.Secret.SecretName, err)
			}
			if err := writeKeys(dir, sec.Data); err != nil {
				return nil, err
			}
		case vol.ConfigMap != nil:
			if len(vol.ConfigMap.Items) > 0 {
				return nil, fmt.Errorf("volume %s: configMap items are not played", vol.Name)
			}
			cm, err := v.cs.CoreV1().ConfigMaps(p.namespace).Get(ctx, vol.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				if ptr.Deref(vol.ConfigMap.Optional, false) {
					break
				}
				return nil, fmt.Errorf("volume %s: waiting for ConfigMap %s: %w", vol.Name, vol.ConfigMap.Name, err)
			}
			data := map[string][]byte{}
			for k, val := range cm.Data {
				data[k] = []byte(val)
			}
			for k, val := range cm.BinaryData {
				data[k] = val
			}
			if err := writeKeys(dir, data); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("volume %s is of a kind not played (emptyDir, secret and configMap are)", vol.Name)
		}
		vols[vol.Name] = dir
	}
	// The claims of the volumeClaimTemplates (<template>-<pod>, stateful_set_utils.go
	// getPersistentVolumeClaimName) keep their data when the Pod goes.
	for _, t := range s.Spec.VolumeClaimTemplates {
		dir := filepath.Join(v.WorkDir, "claims", p.namespace, t.Name+"-"+p.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		vols[t.Name] = dir
	}
	p.kubeconfig = ""
	if ptr.Deref(p.spec.AutomountServiceAccountToken, true) {
		dir := filepath.Join(base, "kube-api-access")
		kc := filepath.Join(p.dir, "kubeconfig")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := writePodKubeconfig(ctx, v.Host, p.namespace, p.spec.ServiceAccountName, nil, vclusterTokenTTL, kc); err != nil {
			return nil, err
		}
		cfg, err := clientcmd.LoadFromFile(kc)
		if err != nil {
			return nil, err
		}
		auth := cfg.AuthInfos["pod"]
		cluster := cfg.Clusters["cluster"]
		if auth == nil || cluster == nil {
			return nil, errors.New("the token kubeconfig has no user pod or cluster cluster")
		}
		if err := writeKeys(dir, map[string][]byte{"token": []byte(auth.Token), "ca.crt": cluster.CertificateAuthorityData, "namespace": []byte(p.namespace)}); err != nil {
			return nil, err
		}
		vols[kubeAPIAccess] = dir
		p.kubeconfig = kc
	}
	return vols, nil
}

// kubeAPIAccess names the kube-api-access volume among a Pod's volumes; the admission plugin
// names it kube-api-access-<random suffix>.
const kubeAPIAccess = "kube-api-access"

// writeKeys writes each key of data as a file of dir with mode 0644 (a secret or configMap
// volume's defaultMode, 420).
func writeKeys(dir string, data map[string][]byte) error {
	for k, val := range data {
		if strings.Contains(k, "/") || k == "." || k == ".." {
			return fmt.Errorf("key %q is no file name", k)
		}
		if err := os.WriteFile(filepath.Join(dir, k), val, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startContainer starts container c of p in its own PID namespace and root directory (see
// VClusterPods).
func (v *VClusterPods) startContainer(p *vclusterPod, c *corev1.Container, vols map[string]string) (*devenv.Child, error) {
	img, ok := vclusterImages[imageRepository(c.Image)]
	if !ok {
		return nil, fmt.Errorf("no files for image %s here (an image pull that fails)", c.Image)
	}
	env, err := vclusterEnv(c, p)
	if err != nil {
		return nil, fmt.Errorf("%v is not played", err)
	}
	// command replaces the image's entrypoint; the vCluster and Kubernetes images have no CMD.
	argv := c.Command
	if len(argv) == 0 {
		argv = img.entrypoint
	}
	argv = append(append([]string{}, argv...), c.Args...)
	if len(argv) == 0 {
		return nil, errors.New("no command")
	}
	for i, a := range argv {
		argv[i] = expandVars(a, env)
	}

	p.started++
	root := filepath.Join(p.dir, "containers", fmt.Sprintf("%s-%d", c.Name, p.started), "root")
	for _, d := range []string{"usr", "etc", "dev", "proc", "sys", "root", "var/run/secrets"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	var script []string
	script = append(script, "set -e", "R="+shellQuote(root),
		// Private already (the sandbox's unshare --propagation private); said again so that no
		// mount below can ever reach the host's mount namespace.
		"mount --make-rprivate /",
		// The host's /usr and /etc stand for the image's base layer, read-only.
		`mount --rbind /usr "$R/usr"`, `mount -o remount,bind,ro "$R/usr"`,
		`mount --rbind /etc "$R/etc"`, `mount -o remount,bind,ro "$R/etc"`,
		`mount --rbind /dev "$R/dev"`,
		`mount -t proc proc "$R/proc"`,
		`mount -o bind,ro /sys "$R/sys"`)
	// The host's /bin, /lib... are links into /usr (merged /usr) or directories of their own.
	for _, name := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		fi, err := os.Lstat("/" + name)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink("/" + name)
			if err != nil {
				return nil, err
			}
			if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
				return nil, err
			}
		case fi.IsDir():
			if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
				return nil, err
			}
			script = append(script, fmt.Sprintf(`mount -o bind,ro /%s "$R/%s"`, name, name))
		}
	}
	// The image's files; those in /usr/local/bin replace the host's /usr/local/bin.
	paths := make([]string, 0, len(img.files))
	for f := range img.files {
		paths = append(paths, f)
	}
	sort.Strings(paths)
	localBin := false
	for _, f := range paths {
		bin := filepath.Join(v.BinDir, img.files[f])
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make tools`: %w", bin, err)
		}
		if path.Dir(f) == "/usr/local/bin" {
			if !localBin {
				script = append(script, `mount -t tmpfs -o mode=0755 tmpfs "$R/usr/local/bin"`)
				localBin = true
			}
		} else if !strings.HasPrefix(f, "/usr/") {
			if err := os.MkdirAll(filepath.Join(root, path.Dir(f)), 0o755); err != nil {
				return nil, err
			}
		} else {
			return nil, fmt.Errorf("image file %s: only /usr/local/bin is played under /usr", f)
		}
		script = append(script, fmt.Sprintf(`touch "$R%s"`, f), fmt.Sprintf(`mount -o bind,ro %s "$R%s"`, shellQuote(bin), f))
	}
	mounts := append([]corev1.VolumeMount{}, c.VolumeMounts...)
	if dir := vols[kubeAPIAccess]; dir != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: kubeAPIAccess, MountPath: serviceAccountDir, ReadOnly: true})
		raw, err := os.ReadFile(p.kubeconfig)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(root, podKubeconfigPath), raw, 0o600); err != nil {
			return nil, err
		}
	}
	for _, m := range mounts {
		src, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s names no volume", m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			return nil, fmt.Errorf("volumeMount %s: subPath is not played", m.Name)
		}
		mp := path.Clean("/" + m.MountPath)
		if mp == "/" || strings.HasPrefix(mp, "/usr/") || strings.HasPrefix(mp, "/etc/") || mp == "/usr" || mp == "/etc" {
			return nil, fmt.Errorf("volumeMount %s at %s is not played", m.Name, m.MountPath)
		}
		opts := "bind"
		if m.ReadOnly {
			opts += ",ro"
		}
		script = append(script, fmt.Sprintf(`mkdir -p "$R%s"`, mp), fmt.Sprintf(`mount -o %s %s "$R%s"`, opts, shellQuote(src), mp))
	}
	script = append(script, `exec chroot "$R" "$@"`)

	sandbox := strconv.Itoa(p.sandbox.Cmd.Process.Pid)
	args := append([]string{"--target", sandbox, "--net", "--mount", "--",
		"unshare", "--pid", "--fork", "--kill-child", "--",
		"sh", "-c", strings.Join(script, "\n"), "container"}, argv...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = environ(env)
	out := v.logs.writer(p.namespace + "/" + p.name + "/" + c.Name)
	cmd.Stdout, cmd.Stderr = out, out
	child, err := v.Processes.Start(p.namespace+"."+p.name+"-"+c.Name, cmd)
	if err != nil {
		return nil, err
	}
	v.logf("Pod %s/%s: started container %s: %s", p.namespace, p.name, c.Name, strings.Join(argv, " "))
	return child, nil
}

// stopContainer stops c as stopContainer (kubelet.go) does: SIGTERM to its first process, and
// SIGKILL to all its processes after the Pod's grace period, at most 10 s (unshare's parent:
// --kill-child kills the first process, and with it its PID namespace).
func (v *VClusterPods) stopContainer(p *vclusterPod, c *podContainer) {
	parent := c.child.Cmd.Process.Pid
	if first := firstChild(parent); first > 0 {
		_ = syscall.Kill(first, syscall.SIGTERM)
	}
	select {
	case <-c.child.Done():
	case <-time.After(min(killGrace(nil, &p.spec), vclusterMaxGrace)):
		_ = c.child.Cmd.Process.Kill()
		<-c.child.Done()
	}
}

// firstChild is the first child process of pid, 0 when it has none.
func firstChild(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(fields[0])
	return n
}

// deletePod stops p's container and sandbox.
func (v *VClusterPods) deletePod(p *vclusterPod) {
	if p.main != nil {
		start := time.Now()
		v.stopContainer(p, p.main)
		v.logf("Pod %s/%s: container %s stopped in %s (exit code %d)", p.namespace, p.name, p.main.name, time.Since(start).Round(100*time.Millisecond), exitCode(p.main.child.Wait()))
		v.setMain(p, nil)
	}
	v.stopSandbox(p)
}

// setMain records p's running container (nil: none). Run's goroutine alone changes a Pod; the
// lock is for ServiceAddress's connections, which read it.
func (v *VClusterPods) setMain(p *vclusterPod, c *podContainer) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p.main = c
}

// stopAll deletes every Pod and closes the Services' addresses.
func (v *VClusterPods) stopAll() {
	v.mu.Lock()
	pods := make([]*vclusterPod, 0, len(v.pods))
	for _, p := range v.pods {
		pods = append(pods, p)
	}
	v.pods = map[string]*vclusterPod{}
	services := v.services
	v.services = nil
	v.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() { defer wg.Done(); v.deletePod(p) }()
	}
	wg.Wait()
	for _, s := range services {
		s.close()
	}
}

// imageRepository is an image's repository without registry, tag and digest:
// ghcr.io/loft-sh/vcluster-pro:0.21.0 -> loft-sh/vcluster-pro, registry.k8s.io/kube-apiserver:v1.31.1
// -> kube-apiserver. The first path element is a registry when it has a dot or a colon or is
// localhost (the rule of github.com/distribution/reference, splitDockerDomain).
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	if first, rest, ok := strings.Cut(image, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		image = rest
	}
	return image
}

// vclusterEnv is the environment of container c of p: the image's PATH, HOSTNAME and HOME as
// the runtime sets them, KUBECONFIG (the token kubeconfig) and c.Env as makeEnvironmentVariables
// builds it (see containerEnv), with the fieldRefs the chart uses resolved as
// podFieldSelectorRuntimeValue does (kubelet_pods.go:989): metadata.name, metadata.namespace,
// status.podIP, spec.nodeName ("": no Node runs here) and spec.serviceAccountName.
func vclusterEnv(c *corev1.Container, p *vclusterPod) (map[string]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, errors.New("envFrom")
	}
	env := map[string]string{"PATH": imagePath, "HOSTNAME": p.name, "HOME": "/root"}
	if p.kubeconfig != "" {
		env["KUBECONFIG"] = podKubeconfigPath
	}
	vars := map[string]string{} // what $(VAR) may name: c.Env's entries before it
	for _, e := range c.Env {
		var val string
		switch {
		case e.ValueFrom == nil:
			val = expandVars(e.Value, vars)
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				val = p.name
			case "metadata.namespace":
				val = p.namespace
			case "status.podIP":
				val = p.ip
			case "spec.nodeName":
				val = ""
			case "spec.serviceAccountName":
				val = p.spec.ServiceAccountName
			default:
				return nil, fmt.Errorf("env %s from fieldRef %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		default:
			return nil, fmt.Errorf("env %s from a source other than a fieldRef", e.Name)
		}
		vars[e.Name] = val
		env[e.Name] = val
	}
	return env, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ServiceAddress plays kube-proxy for port of Service namespace/service: it returns a loopback
// address (host:port) on this machine whose connections reach the Service port through
// DialService, e.g. 443 -> 8443 of the vCluster's Service (chart/templates/service.yaml). The
// address stays the same for the life of Run; a connection made while no selected Pod runs is
// closed at once.
func (v *VClusterPods) ServiceAddress(namespace, service string, port int32) (string, error) {
	key := fmt.Sprintf("%s/%s/%d", namespace, service, port)
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.services[key]; s != nil {
		return s.ln.Addr().String(), nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	if v.services == nil {
		v.services = map[string]*serviceProxy{}
	}
	s := newServiceProxy(ln, func() (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return v.DialService(ctx, namespace, service, port)
	})
	v.services[key] = s
	return ln.Addr().String(), nil
}

// DialService plays kube-proxy for one connection (a ServiceDialer, for LoadBalancers and
// IngressController): it connects to the targetPort of port of Service namespace/name on a
// running Pod the Service selects, from inside that Pod's network namespace (a ClusterIP
// Service's rule, as kube-proxy writes it for the Service's endpoints). It fails while no
// selected Pod runs.
func (v *VClusterPods) DialService(ctx context.Context, namespace, name string, port int32) (net.Conn, error) {
	v.mu.Lock()
	cs := v.cs
	v.mu.Unlock()
	if cs == nil {
		return nil, errors.New("VClusterPods is not running")
	}
	svc, err := cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil || len(svc.Spec.Selector) == 0 {
		return nil, fmt.Errorf("Service %s/%s has no port %d or no selector", namespace, name, port)
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	v.mu.Lock()
	var pod *vclusterPod
	for _, p := range v.pods {
		if p.namespace == namespace && p.main != nil && p.netns != "" && sel.Matches(labels.Set(p.labels)) {
			pod = p
			break
		}
	}
	var netns, ip string
	var target int32
	if pod != nil {
		netns, ip = pod.netns, pod.ip
		target = targetPort(sp, &pod.spec)
	}
	v.mu.Unlock()
	if pod == nil {
		return nil, fmt.Errorf("no running Pod is selected by Service %s/%s", namespace, name)
	}
	if target == 0 {
		return nil, fmt.Errorf("Service %s/%s port %d: the Pod has no port %s", namespace, name, port, sp.TargetPort.String())
	}
	var conn net.Conn
	err = inNetns(netns, func() (err error) {
		d := net.Dialer{Timeout: 10 * time.Second}
		conn, err = d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(int(target))))
		return err
	})
	return conn, err
}

// targetPort resolves a Service port's targetPort (a number, a container port's name, or unset:
// the port itself) against a Pod's containers.
func targetPort(sp *corev1.ServicePort, spec *corev1.PodSpec) int32 {
	switch {
	case sp.TargetPort.IntValue() > 0:
		return int32(sp.TargetPort.IntValue())
	case sp.TargetPort.StrVal == "":
		return sp.Port
	}
	for _, c := range spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == sp.TargetPort.StrVal {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

// serviceProxy accepts connections on ln and pipes each to a connection dial makes.
type serviceProxy struct {
	ln   net.Listener
	dial func() (net.Conn, error)

	mu     sync.Mutex
	open   map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

func newServiceProxy(ln net.Listener, dial func() (net.Conn, error)) *serviceProxy {
	s := &serviceProxy{ln: ln, dial: dial, open: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.pipe(c) }()
		}
	}()
	return s
}

// pipe copies both ways between c and a new connection from dial.
func (s *serviceProxy) pipe(c net.Conn) {
	defer c.Close()
	d, err := s.dial()
	if err != nil {
		return
	}
	defer d.Close()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.open[c], s.open[d] = true, true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.open, c)
		delete(s.open, d)
		s.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(d, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, d); done <- struct{}{} }()
	<-done
}

// close closes the listener and every open connection, and waits for the pipes to end.
func (s *serviceProxy) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.open {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// listenIn listens on addr in the network namespace at netns (a /proc/<pid>/ns/net path).
func listenIn(netns, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetns(netns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// inNetns calls f on an OS thread switched into the network namespace at netns, and switches
// the thread back afterwards. A socket belongs to the namespace it was made in, whichever thread
// uses it later, so what f listens on or dials stays in netns. A thread that cannot switch back
// is never used again: its goroutine ends still locked to it, and Go ends the thread.
func inNetns(netns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open(netns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", netns, err)
			return
		}
		ferr := f()
		if err := setns(self); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("failed to switch back from %s: %w", netns, err))
			return // the thread stays locked and ends with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// setns moves the calling thread into the network namespace of ns (setns(2)).
func setns(ns *os.File) error {
	return unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET)
}
