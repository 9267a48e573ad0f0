package sim

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// MetricsServer plays metrics-server (kubernetes-sigs/metrics-server) behind a real
// kube-apiserver's aggregation layer: the metrics.k8s.io/v1beta1 group's discovery and its node
// metrics list, which is what `kubectl top nodes` and the fleet inventory read. It serves HTTPS
// on 127.0.0.1 with a self-signed certificate, as metrics-server does by default (its manifests'
// APIService sets insecureSkipTLSVerify: true), and is registered the way kwok registers a
// metrics-server running outside the cluster: APIService v1beta1.metrics.k8s.io pointing at
// Service kube-system/metrics-server of type ExternalName (here: localhost), the port in the
// APIService. It does not scrape kubelets: the usage it reports is what SetUsage says.
//
// Answers, as metrics-server's apiserver gives them (pkg/api/node.go, k8s.io/metrics
// pkg/apis/metrics/v1beta1 types.go): GET /apis/metrics.k8s.io/v1beta1 is an APIResourceList
// with nodes (NodeMetrics, cluster-scoped) and pods (PodMetrics, namespaced), verbs get and
// list; GET /apis/metrics.k8s.io/v1beta1/nodes is a NodeMetricsList whose items carry
// metadata.name, timestamp, window and usage (cpu in nanocores, memory the working set in bytes,
// binary SI). Nodes without a usage set are left out, as metrics-server leaves out nodes it has
// no metrics for yet.
type MetricsServer struct {
	srv *httptest.Server

	mu    sync.Mutex
	usage map[string]NodeUsage
}

// NodeUsage is one node's usage as metrics-server reports it.
type NodeUsage struct {
	// NanoCores is the CPU in use, in billionths of a core.
	NanoCores int64
	// MemoryBytes is the memory working set.
	MemoryBytes int64
}

// MetricsAPIService is the APIService metrics-server registers.
const MetricsAPIService = "v1beta1.metrics.k8s.io"

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// StartMetricsServer starts the metrics-server actor on loopback; it stops when t ends.
func StartMetricsServer(t testing.TB) *MetricsServer {
	t.Helper()
	m := &MetricsServer{usage: map[string]NodeUsage{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/metrics.k8s.io/v1beta1", m.discovery)
	mux.HandleFunc("GET /apis/metrics.k8s.io/v1beta1/nodes", m.nodes)
	m.srv = httptest.NewUnstartedServer(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.srv.Listener = ln
	m.srv.StartTLS()
	t.Cleanup(m.srv.Close)
	return m
}

// SetUsage sets the usage the actor reports for node.
func (m *MetricsServer) SetUsage(node string, u NodeUsage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage[node] = u
}

// Stop stops the actor: its APIService stays registered and the aggregator answers 503 for it,
// as for a metrics-server whose Pod is gone.
func (m *MetricsServer) Stop() { m.srv.Close() }

// Register registers the actor with the kube-apiserver of admin (Service kube-system/
// metrics-server of type ExternalName localhost, APIService v1beta1.metrics.k8s.io with its
// port), and waits until the aggregator reports the APIService Available.
func (m *MetricsServer) Register(t testing.TB, admin *rest.Config) {
	t.Helper()
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(admin)
	_, err := cs.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: metav1.NamespaceSystem, Labels: map[string]string{"k8s-app": "metrics-server"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(m.srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	dc := dynamic.NewForConfigOrDie(admin)
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": MetricsAPIService, "labels": map[string]any{"k8s-app": "metrics-server"}},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"name": "metrics-server", "namespace": metav1.NamespaceSystem, "port": int64(port)},
		},
	}}
	if _, err := dc.Resource(apiServiceGVR).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := dc.Resource(apiServiceGVR).Get(ctx, MetricsAPIService, metav1.GetOptions{})
		if err == nil && apiServiceAvailable(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("APIService %s not Available within a minute: %v %v", MetricsAPIService, err, got)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func apiServiceAvailable(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func (m *MetricsServer) discovery(w http.ResponseWriter, _ *http.Request) {
	kubeJSON(w, http.StatusOK, metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: "metrics.k8s.io/v1beta1",
		APIResources: []metav1.APIResource{
			{Name: "nodes", Namespaced: false, Kind: "NodeMetrics", Verbs: metav1.Verbs{"get", "list"}},
			{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: metav1.Verbs{"get", "list"}},
		},
	})
}

func (m *MetricsServer) nodes(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	names := make([]string, 0, len(m.usage))
	for n := range m.usage {
		names = append(names, n)
	}
	slices.Sort(names)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	items := make([]map[string]any, 0, len(names))
	for _, n := range names {
		u := m.usage[n]
		items = append(items, map[string]any{
			"metadata":  map[string]any{"name": n, "creationTimestamp": now},
			"timestamp": now,
			"window":    "20.05s",
			"usage": corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewScaledQuantity(u.NanoCores, resource.Nano),
				corev1.ResourceMemory: *resource.NewQuantity(u.MemoryBytes, resource.BinarySI),
			},
		})
	}
	m.mu.Unlock()
	kubeJSON(w, http.StatusOK, map[string]any{
		"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
		"metadata": map[string]any{}, "items": items,
	})
}

// kubeJSON answers v as a Kubernetes API server does: application/json.
func kubeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
