package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
)

// Fleet targets: plain kube-apiservers standing in for connected clusters, each with nodes whose
// conditions a kubelet would have written, so the HostCluster controller reads a known health
// score from each: 100 − 5 per NotReady node (docs/fleet.md#health-score). Their pods (written the
// way the scheduler and a kubelet would: bound, Running) request a known share of the CPU and
// memory. No Flux runs there, so their HostClusters stay in BootstrappingFlux once the inventory
// is read: the overview shows clusters on their way as well.
type fleetTarget struct {
	// prefix names the target's nodes (<prefix>-<i>), so a leak of one cluster's facts into
	// another workspace is recognisable.
	prefix     string
	score      int32
	cpuPercent int32
	config     *rest.Config
	kubeconfig []byte
}

// fleetTargetSpecs are the targets: scores 85, 70 and 40 fall in the green, amber and red bands.
// Their nodes' instance types (the node.kubernetes.io/instance-type label a cloud controller
// manager sets) against fleetPriceTable: n85's four m5.large are priced, n70's six t3.medium are
// and its last node's x9.exotic is not (a partial estimate), n40's c5.xlarge are not (none).
var fleetTargetSpecs = []struct {
	prefix              string
	nodes, notReady     int
	cpuPercent, memPct  int32
	wantScore           int32
	allocCPU, allocMemG int64
	// instanceType labels every node but the last, lastType the last one.
	instanceType, lastType string
}{
	{prefix: "n85", nodes: 4, notReady: 3, cpuPercent: 50, memPct: 30, wantScore: 85, allocCPU: 4, allocMemG: 16, instanceType: "m5.large", lastType: "m5.large"},
	{prefix: "n70", nodes: 7, notReady: 6, cpuPercent: 25, memPct: 60, wantScore: 70, allocCPU: 4, allocMemG: 16, instanceType: "t3.medium", lastType: "x9.exotic"},
	{prefix: "n40", nodes: 13, notReady: 12, cpuPercent: 75, memPct: 45, wantScore: 40, allocCPU: 4, allocMemG: 16, instanceType: "c5.xlarge", lastType: "c5.xlarge"},
}

// fleetPriceTable is the platform admin's price table the suite's manager reads
// (--fleet-price-table): hourly prices in USD.
const fleetPriceTable = `currency: USD
hourly:
  m5.large: 0.096
  t3.medium: 0.0416
`

var fleetTargets lazy[map[int32]*fleetTarget]

// fleetTargetsFor returns the suite's fleet targets by score, starting them at the first call.
func (e *env) fleetTargetsFor(t *testing.T) map[int32]*fleetTarget {
	t.Helper()
	return fleetTargets.get(t, e, "the fleet targets", e.startFleetTargets)
}

func (e *env) startFleetTargets() (targets map[int32]*fleetTarget, stop func(), err error) {
	var envs []*envtest.Environment
	stop = func() {
		for _, env := range envs {
			_ = env.Stop()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	targets = map[int32]*fleetTarget{}
	for _, spec := range fleetTargetSpecs {
		env := &envtest.Environment{BinaryAssetsDirectory: framework.ToolsBin()}
		cfg, err := env.Start()
		envs = append(envs, env)
		if err != nil {
			return nil, nil, fmt.Errorf("target %s: %w", spec.prefix, err)
		}
		path := filepath.Join(e.dir, "fleet-"+spec.prefix+".kubeconfig")
		if err := devenv.WriteKubeconfig(cfg, path, spec.prefix); err != nil {
			return nil, nil, err
		}
		kc, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		if err := populateTarget(cfg, spec.prefix, spec.nodes, spec.notReady, spec.allocCPU, spec.allocMemG, spec.cpuPercent, spec.memPct, spec.instanceType, spec.lastType); err != nil {
			return nil, nil, fmt.Errorf("target %s: %w", spec.prefix, err)
		}
		targets[spec.wantScore] = &fleetTarget{prefix: spec.prefix, score: spec.wantScore, cpuPercent: spec.cpuPercent, config: cfg, kubeconfig: kc}
	}
	return targets, stop, nil
}

// populateTarget writes nodes as kubelets register them (allocatable, a Ready condition, True or
// False; the instance-type label, instanceType on all but the last, lastType on the last, as the
// cloud controller manager labels them), and one Running pod bound to the first node requesting
// cpuPct and memPct of the cluster's allocatable (spec.nodeName set at creation, phase Running as
// its kubelet reports it).
func populateTarget(cfg *rest.Config, prefix string, nodes, notReady int, cpu, memG int64, cpuPct, memPct int32, instanceType, lastType string) error {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i := range nodes {
		// The kubelet's Ready condition reasons (kubernetes pkg/kubelet/nodestatus/setters.go,
		// ReadyCondition): KubeletReady when ready, KubeletNotReady when not.
		ready, reason := corev1.ConditionTrue, "KubeletReady"
		if i >= nodes-notReady {
			ready, reason = corev1.ConditionFalse, "KubeletNotReady"
		}
		it := instanceType
		if i == nodes-1 {
			it = lastType
		}
		n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", prefix, i), Labels: map[string]string{"node.kubernetes.io/instance-type": it},
		}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		n.Status = corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(memG<<30, resource.BinarySI),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: reason, LastHeartbeatTime: metav1.Now()}},
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	cpuMilli := int64(nodes) * cpu * 1000 * int64(cpuPct) / 100
	memBytes := int64(nodes) * (memG << 30) * int64(memPct) / 100
	p, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "workload"},
		Spec: corev1.PodSpec{NodeName: prefix + "-0", Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI),
			}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	p.Status.Phase = corev1.PodRunning
	_, err = cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// connectFleetCluster connects a HostCluster named name (clusterID id) in the workspace of c to
// target, as a tenant does: the kubeconfig and Git credentials Secrets, then the HostCluster.
func (e *env) connectFleetCluster(t *testing.T, c client.Client, name, id string, kubeconfig []byte) {
	t.Helper()
	hc := e.seedHostCluster(t, name, id, "fluxcd/clusters/"+name, false)
	e.connect(t, c, hc, kubeconfig)
}

// unreachableKubeconfig is a kubeconfig of an API server nobody listens on.
func unreachableKubeconfig(t *testing.T) []byte {
	t.Helper()
	ports, err := devenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: gone
  cluster:
    server: https://127.0.0.1:%d
    insecure-skip-tls-verify: true
users:
- name: gone
  user:
    token: not-a-real-token
contexts:
- name: gone
  context: {cluster: gone, user: gone}
current-context: gone
`, ports[0])
}

// waitInventory waits until HostCluster name's inventory was read and returns the HostCluster.
func waitInventory(t *testing.T, c client.Client, name string) *kov1alpha1.HostCluster {
	t.Helper()
	var hc *kov1alpha1.HostCluster
	framework.Eventually(t, 3*time.Minute, "HostCluster "+name+" inventory", func() (bool, string) {
		hc = getHostCluster(t, c, name)
		return hc.Status.Inventory != nil && hc.Status.Inventory.ObservedAt != nil, describeHC(hc)
	})
	return hc
}

// TestFleetNothingOfOneWorkspaceReachesAnother connects a cluster in each of two workspaces and
// reads, as each workspace's tenant (its admin), everything the workspace holds: HostClusters with
// their status, events of both APIs, Secrets (delivered and their own), ConfigMaps and namespaces.
// Nothing of the other workspace's cluster may be in there: not its name, clusterID, workspace,
// API server, kubeconfig Secret or the names of its nodes (which its health penalties name).
func TestFleetNothingOfOneWorkspaceReachesAnother(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	targets := e.fleetTargetsFor(t)
	type side struct {
		c       client.Client
		lc      string
		name    string
		id      string
		target  *fleetTarget
		secrets []string
	}
	p, q := &side{name: "leak-probe-p", id: "leakprobe-p", target: targets[85]}, &side{name: "leak-probe-q", id: "leakprobe-q", target: targets[70]}
	for _, s := range []*side{p, q} {
		s.c, s.lc, _ = e.tenantWorkspace(t, "fleet-leak")
		e.connectFleetCluster(t, s.c, s.name, s.id, s.target.kubeconfig)
	}
	for _, s := range []*side{p, q} {
		hc := waitInventory(t, s.c, s.name)
		if got := ptr.Deref(hc.Status.Inventory.HealthScore, -1); got != s.target.score {
			t.Errorf("%s: health score %d, want %d (its own target's)", s.name, got, s.target.score)
		}
		if !strings.Contains(fmt.Sprint(hc.Status.Inventory.HealthPenalties), s.target.prefix+"-") {
			t.Errorf("%s: penalties %v do not name its own nodes", s.name, hc.Status.Inventory.HealthPenalties)
		}
	}
	// Wait until the kubeconfig was delivered in both, so the delivered Secrets are there to read.
	for _, s := range []*side{p, q} {
		framework.Eventually(t, time.Minute, s.name+" kubeconfig delivered", func() (bool, string) {
			hc := getHostCluster(t, s.c, s.name)
			return hc.Status.KubeconfigSecret != "", describeHC(hc)
		})
	}

	for _, pair := range [][2]*side{{p, q}, {q, p}} {
		reader, other := pair[0], pair[1]
		everything := readWorkspace(t, reader.c)
		for _, secret := range []string{
			other.name, other.id, other.lc, other.target.config.Host, other.target.prefix + "-",
			"hostcluster-" + other.id + "-kubeconfig",
		} {
			if strings.Contains(everything, secret) {
				t.Errorf("workspace %s (%s) holds %q of the other workspace's cluster", reader.lc, reader.name, secret)
			}
		}
		// The reader's own facts are there: the test reads what it claims to read.
		for _, own := range []string{reader.name, reader.id, reader.target.prefix + "-", "hostcluster-" + reader.id + "-kubeconfig"} {
			if !strings.Contains(everything, own) {
				t.Errorf("workspace %s: %q not found in what its tenant reads: the probe reads too little", reader.lc, own)
			}
		}
	}
}

// readWorkspace returns, as one string, everything c reads in its workspace: HostClusters,
// Secrets (their data decoded), ConfigMaps, events (the core API lists those written through
// events.k8s.io too: one resource) and namespaces.
func readWorkspace(t *testing.T, c client.Client) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	hcs := &kov1alpha1.HostClusterList{}
	secrets := &corev1.SecretList{}
	cms := &corev1.ConfigMapList{}
	evs := &corev1.EventList{}
	nss := &corev1.NamespaceList{}
	for _, l := range []client.ObjectList{hcs, secrets, cms, evs, nss} {
		if err := c.List(ctx, l); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("list %T: %v", l, err)
		}
		raw, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
		b.WriteByte('\n')
	}
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			fmt.Fprintf(&b, "%s/%s %s=%s\n", s.Namespace, s.Name, k, v)
		}
	}
	return b.String()
}
