package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/readlimit"
)

// Inventory are the facts read from a cluster, with its health score.
type Inventory struct {
	// KubernetesVersion is the API server's GitVersion, e.g. v1.35.1.
	KubernetesVersion string
	// NodeCount is the number of nodes; ReadyNodeCount those whose Ready condition is True.
	NodeCount, ReadyNodeCount int32
	// Provider and Region are read from the first node (by name) whose .spec.providerID
	// ParseProviderID recognises; UnknownProvider and "" when none does.
	Provider, Region string
	// UsageSource says where Facts.CPUPercent and MemoryPercent come from; "" while they are
	// unknown (no nodes).
	UsageSource UsageSource
	// InstanceTypes counts the nodes by instance type (the node.kubernetes.io/instance-type
	// label; "" for nodes without one), for the cost estimate (PriceTable.Estimate).
	InstanceTypes map[string]int32
	Facts         Facts
	Score         Score
}

// listPageSize is the page size of the node and pod lists, so a big cluster is read a page at a
// time and never held in memory whole; a page of 200 stays well inside readlimit's default
// response caps. A variable for the test of the paging.
var listPageSize int64 = 200

// kubeadm's labels on its control-plane static pods (kube-apiserver, kube-controller-manager,
// kube-scheduler, etcd) in kube-system.
const (
	controlPlaneNamespace = metav1.NamespaceSystem
	tierLabel             = "tier"
	tierControlPlane      = "control-plane"
	componentLabel        = "component"
)

// Read reads the inventory of the cluster cs talks to and computes its health score. It needs
// to get the server version and to list nodes and pods in all namespaces.
//
// Nodes: Ready, MemoryPressure, DiskPressure, PIDPressure and NetworkUnavailable conditions;
// a node without a Ready condition is not Ready.
//
// Pods: phase Failed; crash-looping when any container (init containers included) waits with
// reason CrashLoopBackOff; restarting when any container restarted within RestartWindow: its
// previous run (lastState.terminated, which the kubelet keeps for the run before the current one)
// ended less than RestartWindow ago. A pod whose containers restarted once, days ago, is not
// restarting now; restartCount alone, which never goes down, cannot tell.
//
// Control plane: the API server's own readiness checks (/readyz), for any control plane, managed
// ones included: a failed etcd check makes etcd unhealthy, any other failed check the API server;
// and kubeadm's static pods in kube-system labelled tier=control-plane, named by their component
// label, where they are visible: a component is unhealthy when any of its pods is not Ready (one
// of three etcd members down is a control plane not fully healthy). Only when neither answers is
// the control plane not Known (no points).
//
// CPU and memory use: what the nodes consume, from the metrics API (NodeMetricsPath, served by
// metrics-server or another adapter) over the allocatable of the nodes it reports, when the
// cluster serves it (UsageMetricsAPI). Otherwise (not served, not readable, unusable) the
// requests of the Running pods' containers (and sidecar init containers, plus pod overhead;
// pod-level requests when set) over the sum of the nodes' allocatable: what the scheduler has
// handed out, not what is consumed (UsageRequests). Unknown (nil) when there are no nodes or the
// allocatable is zero.
//
// Each list stops at lim's page and item caps (readlimit.List; zero fields: the defaults) with a
// *readlimit.Error, and so does a node metrics list with more items than lim.MaxListItems; the
// bytes and elements of each response are capped by the transport cs was built with
// (readlimit.Apply), when the cluster is not trusted.
func Read(ctx context.Context, cs kubernetes.Interface, lim readlimit.Limits) (Inventory, error) {
	now := time.Now()
	inv, alloc, err := readNodes(ctx, cs, lim)
	if err != nil {
		return Inventory{}, err
	}

	var requested resources
	components := map[string]bool{} // component -> healthy (all its pods Ready)
	err = readlimit.List(ctx, lim, "pod list", listPageSize, func(ctx context.Context, opts metav1.ListOptions) ([]corev1.Pod, string, error) {
		list, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return list.Items, list.Continue, nil
	}, func(p *corev1.Pod) {
		if p.Status.Phase == corev1.PodFailed {
			inv.Facts.FailedPods++
		}
		crashLooping, restarting := containerFacts(p, now)
		if crashLooping {
			inv.Facts.CrashLoopingPods++
		}
		if restarting {
			inv.Facts.RestartingPods++
		}
		if p.Status.Phase == corev1.PodRunning {
			requested = requested.add(podRequests(p))
		}
		if c := controlPlaneComponent(p); c != "" {
			healthy, seen := components[c]
			components[c] = (healthy || !seen) && podReady(p)
		}
	})
	if err != nil {
		return Inventory{}, fmt.Errorf("failed to list pods: %w", err)
	}

	// Any control plane, managed ones included: what the API server's own readiness checks say.
	if failed, answered := readyz(ctx, cs); answered {
		apiServer, seen := components[APIServerComponent]
		components[APIServerComponent] = (apiServer || !seen) && !slices.ContainsFunc(failed, isAPIServerCheck)
		if slices.ContainsFunc(failed, isEtcdCheck) {
			components[etcdComponent] = false
		}
	}
	inv.Facts.ControlPlane = controlPlaneFacts(components)
	if len(inv.Facts.Nodes) > 0 {
		used, served, err := readMetricsUsage(ctx, cs, alloc, lim)
		if err != nil {
			return Inventory{}, err
		}
		if served {
			inv.Facts.CPUPercent, inv.Facts.MemoryPercent, inv.UsageSource = used.cpu, used.memory, UsageMetricsAPI
		} else {
			var allocatable resources
			for _, a := range alloc {
				allocatable = allocatable.add(a)
			}
			inv.Facts.CPUPercent = percent(requested.cpu, allocatable.cpu)
			inv.Facts.MemoryPercent = percent(requested.memory, allocatable.memory)
			if inv.Facts.CPUPercent != nil || inv.Facts.MemoryPercent != nil {
				inv.UsageSource = UsageRequests
			}
		}
	}
	inv.Score = Compute(inv.Facts)
	return inv, nil
}

// ReadNodes reads what Read reads from the API server's version and the nodes only, and scores
// the node conditions alone: pods, the control plane and CPU and memory use are not looked at
// (Facts says nothing of them, so they cost no points). For a cluster whose pods the reader may
// not list, such as the platform's own backend. It needs to get the server version and list nodes.
// The node list stops at lim's caps, as in Read.
func ReadNodes(ctx context.Context, cs kubernetes.Interface, lim readlimit.Limits) (Inventory, error) {
	inv, _, err := readNodes(ctx, cs, lim)
	if err != nil {
		return Inventory{}, err
	}
	inv.Score = Compute(inv.Facts)
	return inv, nil
}

// readNodes reads the version and the nodes into an Inventory and returns each node's
// allocatable by name.
func readNodes(ctx context.Context, cs kubernetes.Interface, lim readlimit.Limits) (inv Inventory, alloc map[string]resources, err error) {
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return Inventory{}, nil, fmt.Errorf("failed to get the server version: %w", err)
	}
	inv = Inventory{KubernetesVersion: v.GitVersion, Provider: UnknownProvider}
	alloc = map[string]resources{}
	err = EachNode(ctx, cs, listPageSize, lim, func(n *corev1.Node) {
		facts := nodeFacts(n)
		inv.Facts.Nodes = append(inv.Facts.Nodes, facts)
		if facts.Ready {
			inv.ReadyNodeCount++
		}
		if inv.Provider == UnknownProvider {
			inv.Provider, inv.Region = ParseProviderID(n.Spec.ProviderID)
		}
		if inv.InstanceTypes == nil {
			inv.InstanceTypes = map[string]int32{}
		}
		inv.InstanceTypes[instanceType(n.Labels)]++
		alloc[n.Name] = resourcesOf(n.Status.Allocatable)
	})
	if err != nil {
		return Inventory{}, nil, fmt.Errorf("failed to list nodes: %w", err)
	}
	inv.NodeCount = int32(len(inv.Facts.Nodes))
	return inv, alloc, nil
}

// EachNode calls fn with every node of the cluster cs talks to, in the API server's order (by
// name), listing pageSize nodes at a time so a big cluster is never held in memory whole. It
// stops with a *readlimit.Error once the list takes more pages or holds more nodes than lim
// allows (zero fields: the defaults), before fn sees a node past the cap.
func EachNode(ctx context.Context, cs kubernetes.Interface, pageSize int64, lim readlimit.Limits, fn func(*corev1.Node)) error {
	return readlimit.List(ctx, lim, "node list", pageSize, func(ctx context.Context, opts metav1.ListOptions) ([]corev1.Node, string, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return list.Items, list.Continue, nil
	}, fn)
}

// NodeReady reports whether n's Ready condition is True; a node without one is not Ready.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeFacts(n *corev1.Node) NodeFacts {
	f := NodeFacts{Name: n.Name}
	for _, c := range n.Status.Conditions {
		isTrue := c.Status == corev1.ConditionTrue
		switch c.Type {
		case corev1.NodeReady:
			f.Ready = isTrue
		case corev1.NodeMemoryPressure:
			f.MemoryPressure = isTrue
		case corev1.NodeDiskPressure:
			f.DiskPressure = isTrue
		case corev1.NodePIDPressure:
			f.PIDPressure = isTrue
		case corev1.NodeNetworkUnavailable:
			f.NetworkUnavailable = isTrue
		}
	}
	return f
}

// RestartWindow is how recent a container's last restart must be for its pod to count as
// restarting.
const RestartWindow = time.Hour

// containerFacts says whether any container of p is in CrashLoopBackOff, and whether any
// restarted within RestartWindow before now.
func containerFacts(p *corev1.Pod, now time.Time) (crashLooping, restarting bool) {
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range statuses {
			if s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" {
				crashLooping = true
			}
			if s.RestartCount > 0 && restartedSince(s, now.Add(-RestartWindow)) {
				restarting = true
			}
		}
	}
	return crashLooping, restarting
}

// restartedSince says whether container status s shows a restart after since: its previous run
// ended then or later (lastState.terminated.finishedAt; a run that ended without a finish time
// counts by its start).
func restartedSince(s corev1.ContainerStatus, since time.Time) bool {
	t := s.LastTerminationState.Terminated
	if t == nil {
		return false
	}
	end := t.FinishedAt.Time
	if end.IsZero() {
		end = t.StartedAt.Time
	}
	return !end.Before(since)
}

// podRequests returns the CPU and memory a running pod holds: its pod-level requests where set,
// else the sum of its containers' and sidecar (restartable) init containers' requests; plus its
// overhead. Regular init containers have finished once a pod runs, so they hold nothing.
func podRequests(p *corev1.Pod) resources {
	var sum resources
	for _, c := range p.Spec.Containers {
		sum = sum.add(resourcesOf(c.Resources.Requests))
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum = sum.add(resourcesOf(c.Resources.Requests))
		}
	}
	if p.Spec.Resources != nil {
		podLevel := resourcesOf(p.Spec.Resources.Requests)
		if _, ok := p.Spec.Resources.Requests[corev1.ResourceCPU]; ok {
			sum.cpu = podLevel.cpu
		}
		if _, ok := p.Spec.Resources.Requests[corev1.ResourceMemory]; ok {
			sum.memory = podLevel.memory
		}
	}
	return sum.add(resourcesOf(p.Spec.Overhead))
}

// controlPlaneComponent returns the kubeadm control-plane component p runs, or "".
func controlPlaneComponent(p *corev1.Pod) string {
	if p.Namespace != controlPlaneNamespace || p.Labels[tierLabel] != tierControlPlane {
		return ""
	}
	return p.Labels[componentLabel]
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// etcdComponent is etcd's name among the control-plane components (kubeadm's component label).
const etcdComponent = "etcd"

// readyz asks the API server for its readiness checks (GET /readyz?verbose, which every caller
// may read: the system:public-info-viewer ClusterRole) and returns the names of those that
// failed. answered is false when it gave no such answer (a proxy in front, a refusal): then
// nothing is known from it.
func readyz(ctx context.Context, cs kubernetes.Interface) (failed []string, answered bool) {
	rc := cs.Discovery().RESTClient()
	if rc == nil {
		return nil, false
	}
	body, _ := rc.Get().AbsPath("/readyz").Param("verbose", "").Do(ctx).Raw()
	return parseReadyz(body)
}

// parseReadyz reads the verbose answer of /readyz (k8s.io/apiserver pkg/server/healthz,
// handleRootHealth): a line "[+]<check> ok" or "[-]<check> failed: ..." per check, then
// "readyz check passed" or "readyz check failed".
func parseReadyz(body []byte) (failed []string, answered bool) {
	for _, line := range strings.Split(string(body), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "[-]"):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "[-]"), " ")
			failed = append(failed, name)
		case line == "readyz check passed" || line == "readyz check failed":
			answered = true
		}
	}
	if !answered {
		return nil, false
	}
	return failed, true
}

// isEtcdCheck says whether a readiness check is about etcd ("etcd", "etcd-readiness").
func isEtcdCheck(name string) bool { return strings.HasPrefix(name, "etcd") }

// isAPIServerCheck says whether a failed readiness check is the API server's own (every check but
// etcd's: informers synced, post-start hooks, shutdown).
func isAPIServerCheck(name string) bool { return !isEtcdCheck(name) }

// controlPlaneFacts turns the components seen (name -> healthy) into ControlPlaneFacts. The API
// server is healthy unless a kube-apiserver pod is not Ready: it answered Read's calls.
func controlPlaneFacts(components map[string]bool) ControlPlaneFacts {
	if len(components) == 0 {
		return ControlPlaneFacts{}
	}
	cp := ControlPlaneFacts{Known: true, APIServerHealthy: true}
	for name, healthy := range components {
		if !healthy {
			cp.Unhealthy = append(cp.Unhealthy, name)
			if name == APIServerComponent {
				cp.APIServerHealthy = false
			}
		}
	}
	slices.Sort(cp.Unhealthy)
	return cp
}

// maxPercent caps a use in percent: use can exceed the allocatable (the metrics API counts
// what runs outside pods too), but a cluster's answer could make it any number.
const maxPercent = 10000

// percent returns used/total in percent, at most maxPercent; nil when total is zero.
func percent(used, total float64) *float64 {
	if total <= 0 {
		return nil
	}
	p := min(used/total*100, maxPercent)
	return &p
}
