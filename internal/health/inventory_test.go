package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

// TestRead reads the inventory of a real kube-apiserver. There is no kubelet: the test writes the
// nodes' and pods' status the way kubelets would.
func TestRead(t *testing.T) {
	b := framework.StartBackend(t)
	cs := kubernetes.NewForConfigOrDie(b.Config)
	ctx := t.Context()

	// Pages of 2 objects, so the test walks the continue tokens.
	defer func(size int64) { listPageSize = size }(listPageSize)
	listPageSize = 2

	t.Run("empty cluster", func(t *testing.T) {
		got, err := Read(ctx, cs, readlimit.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got.KubernetesVersion, "v") {
			t.Errorf("KubernetesVersion = %q", got.KubernetesVersion)
		}
		got.KubernetesVersion = ""
		want := Inventory{
			Provider: "unknown",
			// No nodes: use unknown. No control-plane pods, but the API server's /readyz
			// answered that every check passed: a control plane known to be healthy.
			Facts: Facts{ControlPlane: ControlPlaneFacts{Known: true, APIServerHealthy: true}},
			Score: Score{Value: 100, Band: BandGreen},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Read() mismatch (-want +got):\n%s", diff)
		}
	})

	// Nodes: 4+4+2 CPUs, 3×8Gi memory allocatable.
	// node-a has the well-known instance-type label, node-c only its deprecated beta name,
	// node-b none.
	createNode(t, cs, "node-a", "aws:///eu-north-1a/i-0abc", "4", "8Gi", nil, map[string]string{InstanceTypeLabel: "m5.xlarge"})
	createNode(t, cs, "node-b", "", "4", "8Gi", map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeReady: corev1.ConditionFalse, corev1.NodeMemoryPressure: corev1.ConditionTrue,
	}, nil)
	createNode(t, cs, "node-c", "aws:///eu-north-1b/i-0def", "2", "8Gi", nil, map[string]string{"beta.kubernetes.io/instance-type": "c5.large"})

	// Workloads: CPU requests 6 + 1.5 + 0.5 (sidecar) + 0.5 (API server) = 8.5 of 10 (85%);
	// memory 4Gi + 2Gi of 24Gi (25%).
	createNamespace(t, cs, "apps")
	createPod(t, cs, pod{ns: "apps", name: "web-1", phase: corev1.PodRunning, ready: true,
		cpu: "6", memory: "4Gi"})
	createPod(t, cs, pod{ns: "apps", name: "web-2", phase: corev1.PodRunning, crashLooping: true,
		restarts: 5, lastRestart: time.Now().Add(-2 * time.Minute), cpu: "1500m", memory: "2Gi", sidecarCPU: "500m"})
	// Restarted three times, the last one two hours ago: not restarting now.
	createPod(t, cs, pod{ns: "apps", name: "settled", phase: corev1.PodRunning, ready: true,
		restarts: 3, lastRestart: time.Now().Add(-2 * time.Hour)})
	createPod(t, cs, pod{ns: "apps", name: "job-1", phase: corev1.PodFailed, cpu: "2", memory: "1Gi"})
	createPod(t, cs, pod{ns: "apps", name: "unscheduled", phase: corev1.PodPending, cpu: "64", memory: "64Gi"})
	// kubeadm's static control-plane pods: etcd is not Ready.
	for _, c := range []struct {
		component string
		ready     bool
		cpu       string
	}{
		{"kube-apiserver", true, "500m"},
		{"kube-controller-manager", true, ""},
		{"kube-scheduler", true, ""},
		{"etcd", false, ""},
	} {
		createPod(t, cs, pod{ns: "kube-system", name: c.component + "-node-a", phase: corev1.PodRunning,
			ready: c.ready, cpu: c.cpu, labels: map[string]string{"tier": "control-plane", "component": c.component}})
	}
	// Not a control-plane pod: a tier=control-plane label outside kube-system.
	createPod(t, cs, pod{ns: "apps", name: "impostor", phase: corev1.PodRunning,
		labels: map[string]string{"tier": "control-plane", "component": "etcd"}})

	got, err := Read(ctx, cs, readlimit.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got.KubernetesVersion = ""
	want := Inventory{
		NodeCount:      3,
		ReadyNodeCount: 2,
		Provider:       "aws",
		Region:         "eu-north-1",
		// No metrics API on this cluster (yet): requests over allocatable.
		UsageSource:   UsageRequests,
		InstanceTypes: map[string]int32{"m5.xlarge": 1, "": 1, "c5.large": 1},
		Facts: Facts{
			Nodes: []NodeFacts{
				{Name: "node-a", Ready: true},
				{Name: "node-b", MemoryPressure: true},
				{Name: "node-c", Ready: true},
			},
			FailedPods:       1,
			CrashLoopingPods: 1,
			RestartingPods:   1,
			ControlPlane:     ControlPlaneFacts{Known: true, APIServerHealthy: true, Unhealthy: []string{"etcd"}},
			CPUPercent:       pct(85),
			MemoryPercent:    pct(25),
		},
		// 100 − 5 − 3 − 2 − 2.5 − 30 − 8 − 5 = 44.5, rounded half up.
		Score: Score{Value: 45, Band: BandRed, Penalties: []Penalty{
			{Reason: "NodeNotReady", Detail: "node node-b is not Ready", Points: 5},
			{Reason: "NodeMemoryPressure", Detail: "node node-b is under memory pressure", Points: 3},
			{Reason: "PodsFailed", Detail: "1 pod failed", Points: 2},
			{Reason: "PodsCrashLooping", Detail: "1 pod crash-looping", Points: 2.5},
			{Reason: "ControlPlaneUnhealthy", Detail: "control plane is not fully healthy: etcd", Points: 30},
			{Reason: "ControlPlaneComponentUnhealthy", Detail: "control-plane component etcd is unhealthy", Points: 8},
			{Reason: "CPUHigh", Detail: "cluster CPU use is 85.0% (80% or more)", Points: 5},
		}},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Read() mismatch (-want +got):\n%s", diff)
	}

	t.Run("nodes only", func(t *testing.T) {
		got, err := ReadNodes(ctx, cs, readlimit.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got.KubernetesVersion = ""
		want := Inventory{
			NodeCount: 3, ReadyNodeCount: 2, Provider: "aws", Region: "eu-north-1", InstanceTypes: want.InstanceTypes,
			Facts: Facts{Nodes: want.Facts.Nodes},
			// Only the node penalties: the failed, crash-looping and control-plane pods and the
			// CPU use are not read.
			Score: Score{Value: 92, Band: BandGreen, Penalties: want.Score.Penalties[:2]},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ReadNodes() mismatch (-want +got):\n%s", diff)
		}
	})

	// Pages of 2: the 3 nodes take 2 pages, the 9 pods (4 in apps, the impostor, 4 control-plane
	// pods) 5.
	t.Run("caps", func(t *testing.T) {
		for _, tc := range []struct {
			limits readlimit.Limits
			want   string
		}{
			{readlimit.Limits{MaxListItems: 2}, "failed to list nodes: the cluster's node list exceeded 2 items"},
			{readlimit.Limits{MaxListPages: 1}, "failed to list nodes: the cluster's node list exceeded 1 pages"},
			{readlimit.Limits{MaxListPages: 5, MaxListItems: 9}, "failed to list pods: the cluster's pod list exceeded 9 items"},
			{readlimit.Limits{MaxListPages: 3, MaxListItems: 100}, "failed to list pods: the cluster's pod list exceeded 3 pages"},
		} {
			_, err := Read(ctx, cs, tc.limits)
			if _, ok := readlimit.As(err); !ok || err.Error() != tc.want {
				t.Errorf("Read() with %+v: got %v, want %q", tc.limits, err, tc.want)
			}
		}
		if _, err := Read(ctx, cs, readlimit.Limits{MaxListPages: 5, MaxListItems: 10}); err != nil {
			t.Errorf("Read() with caps the cluster fits exactly: %v", err)
		}
	})

	// Last, as it changes what Read reads: the cluster serves the metrics API (the metrics-server
	// actor behind the real API server's aggregation layer).
	t.Run("usage from the metrics API when the cluster serves it", func(t *testing.T) {
		ms := sim.StartMetricsServer(t)
		// node-a uses 3 of its 4 CPUs and 4Gi of 8Gi; node-c 1 of 2 CPUs and 2Gi of 8Gi; node-b
		// (not Ready) has no metrics: (3+1)/(4+2) CPU = 66.7%, (4+2)/(8+8) memory = 37.5%, of the
		// nodes reported only.
		ms.SetUsage("node-a", sim.NodeUsage{NanoCores: 3e9, MemoryBytes: 4 << 30})
		ms.SetUsage("node-c", sim.NodeUsage{NanoCores: 1e9, MemoryBytes: 2 << 30})
		// A node the cluster does not list: left out.
		ms.SetUsage("node-gone", sim.NodeUsage{NanoCores: 64e9, MemoryBytes: 64 << 30})
		ms.Register(t, b.Config)
		got, err := Read(ctx, cs, readlimit.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if got.UsageSource != UsageMetricsAPI {
			t.Fatalf("UsageSource = %q, want %q", got.UsageSource, UsageMetricsAPI)
		}
		if diff := cmp.Diff([]*float64{pct(400.0 / 6), pct(37.5)}, []*float64{got.Facts.CPUPercent, got.Facts.MemoryPercent}, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
			t.Errorf("CPU and memory from the metrics API (-want +got):\n%s", diff)
		}
		// The requests-based 85% CPU cost 5 points; the consumed 66.7% costs none.
		if slices.ContainsFunc(got.Score.Penalties, func(p Penalty) bool { return p.Reason == ReasonCPUHigh }) {
			t.Errorf("penalties %v: CPUHigh from the requests, not the usage", got.Score.Penalties)
		}

		t.Run("a kubeconfig that may not read the metrics API: requests", func(t *testing.T) {
			// An identity allowed what Read needs besides (version, readyz, nodes, pods), not
			// nodes.metrics.k8s.io: the 403 is no usable answer.
			rbac := cs.RbacV1()
			if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: "inventory-without-metrics"},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"list"}},
				},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "inventory-without-metrics"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "inventory-without-metrics"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "inventory-reader"}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cfg := rest.CopyConfig(b.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: "inventory-reader", Groups: []string{"system:authenticated"}}
			limited := kubernetes.NewForConfigOrDie(cfg)
			if _, err := limited.Discovery().RESTClient().Get().AbsPath(NodeMetricsPath).Do(ctx).Raw(); !apierrors.IsForbidden(err) {
				t.Fatalf("the limited identity reads the node metrics (%v): the test does not test a 403", err)
			}
			got, err := Read(ctx, limited, readlimit.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if got.UsageSource != UsageRequests || got.Facts.CPUPercent == nil || *got.Facts.CPUPercent < 84.9 {
				t.Errorf("UsageSource %q, CPU %v; want Requests and the requests' 85%%", got.UsageSource, got.Facts.CPUPercent)
			}
		})

		t.Run("more node metrics than the item cap", func(t *testing.T) {
			nodes := map[string]resources{"node-a": {cpu: 4, memory: 8 << 30}}
			_, _, err := readMetricsUsage(ctx, cs, nodes, readlimit.Limits{MaxListItems: 2})
			if le, ok := readlimit.As(err); !ok || le.Error() != "the cluster's node metrics list exceeded 2 items" {
				t.Errorf("3 node metrics over a cap of 2: %v, want the item cap", err)
			}
		})

		t.Run("metrics-server gone: 503 from the aggregator, requests again", func(t *testing.T) {
			ms.Stop()
			framework.Eventually(t, time.Minute, "Read falls back to the requests", func() (bool, string) {
				got, err := Read(ctx, cs, readlimit.Limits{})
				if err != nil {
					return false, err.Error()
				}
				return got.UsageSource == UsageRequests && got.Facts.CPUPercent != nil && *got.Facts.CPUPercent > 84.9, fmt.Sprintf("source %s cpu %v", got.UsageSource, ptr.Deref(got.Facts.CPUPercent, -1))
			})
			_, err := cs.Discovery().RESTClient().Get().AbsPath(NodeMetricsPath).Do(ctx).Raw()
			if !apierrors.IsServiceUnavailable(err) {
				t.Errorf("the aggregator answers %v for a stopped metrics-server, want 503: the test does not test the 503 path", err)
			}
		})
	})

	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := Read(ctx, cs, readlimit.Limits{}); err == nil || !strings.Contains(err.Error(), "failed to list nodes") {
			t.Errorf("Read() with a canceled context: got %v, want a failed list", err)
		}
	})
}

func TestPodRequests(t *testing.T) {
	q := resource.MustParse
	requests := func(cpu, memory string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(memory),
		}}
	}
	tests := map[string]struct {
		spec        corev1.PodSpec
		cpu, memory string
	}{
		"containers summed": {
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "a", Resources: requests("100m", "64Mi")},
				{Name: "b", Resources: requests("200m", "64Mi")},
			}},
			cpu: "300m", memory: "128Mi",
		},
		"regular init containers have finished": {
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Resources: requests("4", "4Gi")}},
				Containers:     []corev1.Container{{Name: "a", Resources: requests("100m", "64Mi")}},
			},
			cpu: "100m", memory: "64Mi",
		},
		"sidecars and overhead count": {
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: requests("50m", "32Mi")}},
				Containers:     []corev1.Container{{Name: "a", Resources: requests("100m", "64Mi")}},
				Overhead:       corev1.ResourceList{corev1.ResourceCPU: q("10m"), corev1.ResourceMemory: q("1Mi")},
			},
			cpu: "160m", memory: "97Mi",
		},
		"pod-level requests win": {
			spec: corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}},
				Containers: []corev1.Container{{Name: "a", Resources: requests("100m", "64Mi")}},
			},
			cpu: "1", memory: "64Mi",
		},
		"no requests": {
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}},
			cpu:  "0", memory: "0",
		},
		// A hostile API server's values: exact arithmetic on 1e999999999 would build a number of
		// a billion digits; such a value, and a negative one, is not counted.
		"absurd and negative values are not counted": {
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "a", Resources: requests("1e999999999", "-64Mi")},
				{Name: "b", Resources: requests("100m", "64Mi")},
			}},
			cpu: "100m", memory: "64Mi",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := podRequests(&corev1.Pod{Spec: tc.spec})
			value := func(s string) float64 { v := q(s); return v.AsApproximateFloat64() }
			want := resources{cpu: value(tc.cpu), memory: value(tc.memory)}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(resources{}), cmpopts.EquateApprox(1e-12, 0)); diff != "" {
				t.Errorf("podRequests() (-want +got):\n%s", diff)
			}
		})
	}
}

// createNode creates a node and writes its status as a kubelet would: Ready unless conditions
// say otherwise, and allocatable cpu and memory.
func createNode(t *testing.T, cs kubernetes.Interface, name, providerID, cpu, memory string, conditions map[corev1.NodeConditionType]corev1.ConditionStatus, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeReady:              corev1.ConditionTrue,
		corev1.NodeMemoryPressure:     corev1.ConditionFalse,
		corev1.NodeDiskPressure:       corev1.ConditionFalse,
		corev1.NodePIDPressure:        corev1.ConditionFalse,
		corev1.NodeNetworkUnavailable: corev1.ConditionFalse,
	}
	for k, v := range conditions {
		status[k] = v
	}
	for _, k := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: k, Status: status[k], Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		})
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	n.Status.Capacity, n.Status.Allocatable = resources, resources
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createNamespace creates a namespace.
func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

type pod struct {
	ns, name     string
	labels       map[string]string
	phase        corev1.PodPhase
	ready        bool
	crashLooping bool
	restarts     int32
	// lastRestart is when the container's previous run ended (lastState.terminated.finishedAt),
	// with restarts > 0.
	lastRestart time.Time
	cpu, memory string // requests of the container; "" none
	sidecarCPU  string // a sidecar init container with this CPU request; "" none
}

// createPod creates a pod on node-a and writes its status as the kubelet would.
func createPod(t *testing.T, cs kubernetes.Interface, p pod) {
	t.Helper()
	ctx := t.Context()
	requests := corev1.ResourceList{}
	if p.cpu != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(p.cpu)
	}
	if p.memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(p.memory)
	}
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, Labels: p.labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "main", Image: "example.com/main:1", Resources: corev1.ResourceRequirements{Requests: requests},
			}},
		},
	}
	if p.phase != corev1.PodPending {
		obj.Spec.NodeName = "node-a"
	}
	if p.sidecarCPU != "" {
		obj.Spec.InitContainers = []corev1.Container{{
			Name: "proxy", Image: "example.com/proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(p.sidecarCPU)}},
		}}
	}
	created, err := cs.CoreV1().Pods(p.ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := corev1.ConditionFalse
	if p.ready {
		ready = corev1.ConditionTrue
	}
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	if p.crashLooping {
		state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off restarting failed container"}}
	}
	if p.phase == corev1.PodFailed {
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
	}
	created.Status = corev1.PodStatus{
		Phase:      p.phase,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}},
	}
	if p.phase != corev1.PodPending {
		created.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "main", Image: "example.com/main:1", Ready: p.ready, RestartCount: p.restarts, State: state,
		}}
		if p.restarts > 0 {
			// The kubelet keeps the previous run's end in lastState (kubelet
			// kuberuntime_container.go, the container status's LastTerminationState).
			created.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", StartedAt: metav1.NewTime(p.lastRestart.Add(-time.Minute)), FinishedAt: metav1.NewTime(p.lastRestart)}}
		}
		if p.sidecarCPU != "" {
			created.Status.InitContainerStatuses = []corev1.ContainerStatus{{
				Name: "proxy", Image: "example.com/proxy:1", Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
			}}
		}
	}
	if _, err := cs.CoreV1().Pods(p.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestReadStopsAtAnEndlessList: a hostile API server answers every node list page with a new
// continue token; Read follows MaxListPages of them and stops with the limit named.
func TestReadStopsAtAnEndlessList(t *testing.T) {
	srv := sim.StartHostileCluster(t, sim.HostileOptions{Attack: sim.AttackEndlessContinue})
	cfg, err := kubeconfig.ParseUntrusted(srv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Read(t.Context(), kubernetes.NewForConfigOrDie(cfg), readlimit.Limits{MaxListPages: 50})
	le, ok := readlimit.As(err)
	if !ok || le.Error() != "the cluster's node list exceeded 50 pages" {
		t.Fatalf("Read() = %v, want the page cap", err)
	}
	if n := srv.NodeLists(); n != 50 {
		t.Errorf("the server was asked for %d pages, want 50", n)
	}
}

// TestRestartingMeansWithinTheWindow: a pod counts as restarting only when a container's previous
// run ended within RestartWindow.
func TestRestartingMeansWithinTheWindow(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	status := func(restarts int32, lastEnd time.Time, start time.Time) corev1.ContainerStatus {
		s := corev1.ContainerStatus{Name: "c", RestartCount: restarts}
		if !lastEnd.IsZero() || !start.IsZero() {
			s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(start), FinishedAt: metav1.NewTime(lastEnd)}
		}
		return s
	}
	for name, tc := range map[string]struct {
		s    corev1.ContainerStatus
		init bool
		want bool
	}{
		"never restarted":                  {status(0, time.Time{}, time.Time{}), false, false},
		"restarted a minute ago":           {status(4, now.Add(-time.Minute), time.Time{}), false, true},
		"restarted at the window's edge":   {status(1, now.Add(-RestartWindow), time.Time{}), false, true},
		"restarted just before the window": {status(1, now.Add(-RestartWindow-time.Second), time.Time{}), false, false},
		"restarted days ago":               {status(9, now.Add(-72*time.Hour), time.Time{}), false, false},
		"no finish time: its start counts": {status(2, time.Time{}, now.Add(-10*time.Minute)), false, true},
		"restart count without last state": {status(2, time.Time{}, time.Time{}), false, false},
		"an init container restarted":      {status(1, now.Add(-5*time.Minute), time.Time{}), true, true},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{}
			if tc.init {
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{tc.s}
			} else {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{tc.s}
			}
			if _, got := containerFacts(p, now); got != tc.want {
				t.Errorf("restarting = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestParseReadyz reads the API server's verbose readiness answers (k8s.io/apiserver
// pkg/server/healthz: "[+]name ok" / "[-]name failed: reason withheld" lines, then the verdict).
func TestParseReadyz(t *testing.T) {
	for name, tc := range map[string]struct {
		body       string
		wantFailed []string
		answered   bool
	}{
		"all ok":          {"[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]informer-sync ok\nreadyz check passed\n", nil, true},
		"etcd down":       {"[+]ping ok\n[-]etcd failed: reason withheld\n[+]informer-sync ok\nreadyz check failed\n", []string{"etcd"}, true},
		"a hook not done": {"[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: not finished\nreadyz check failed\n", []string{"poststarthook/rbac/bootstrap-roles"}, true},
		"shutting down":   {"[-]shutdown failed: reason withheld\n[-]etcd-readiness failed: reason withheld\nreadyz check failed", []string{"shutdown", "etcd-readiness"}, true},
		"not an answer":   {"<html>403 Forbidden</html>", nil, false},
		"nothing":         {"", nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			failed, answered := parseReadyz([]byte(tc.body))
			if answered != tc.answered || !slices.Equal(failed, tc.wantFailed) {
				t.Errorf("parseReadyz = %v, %v; want %v, %v", failed, answered, tc.wantFailed, tc.answered)
			}
		})
	}
	if !isEtcdCheck("etcd-readiness") || isAPIServerCheck("etcd") || !isAPIServerCheck("informer-sync") {
		t.Error("etcd's checks and the API server's are told apart wrongly")
	}
}
