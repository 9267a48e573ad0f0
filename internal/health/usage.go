package health

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/readlimit"
)

// UsageSource is where a cluster's CPU and memory use were read from.
type UsageSource string

const (
	// UsageMetricsAPI: the nodes' usage from the metrics API (metrics.k8s.io/v1beta1
	// NodeMetrics, served by metrics-server or another adapter) over their allocatable.
	UsageMetricsAPI UsageSource = "MetricsAPI"
	// UsageRequests: the requests of running pods over the nodes' allocatable, when the cluster
	// does not serve the metrics API (or its answer cannot be used).
	UsageRequests UsageSource = "Requests"
)

// NodeMetricsPath is the metrics API's list of node metrics (metrics.k8s.io/v1beta1, resource
// nodes), as kubectl top nodes reads it.
const NodeMetricsPath = "/apis/metrics.k8s.io/v1beta1/nodes"

// nodeMetricsList is the part of a metrics.k8s.io/v1beta1 NodeMetricsList that Read uses
// (k8s.io/metrics pkg/apis/metrics/v1beta1: items[].metadata.name and items[].usage, a
// ResourceList whose memory is the node's working set), decoded without the module for these
// three fields.
type nodeMetricsList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Usage corev1.ResourceList `json:"usage"`
	} `json:"items"`
}

// resources is CPU (cores) and memory (bytes), summed as numbers: quantities from a cluster are
// its answer and so hostile, and resource.Quantity's exact arithmetic on a value such as
// "1e999999999" would build a number of a billion digits.
type resources struct {
	cpu, memory float64
}

// maxQuantity bounds one quantity read from a cluster: about 4.6e18, bytes or cores (no node has
// an exabyte of memory, nor a pod as many cores).
const maxQuantity = 1 << 62

// quantityValue is q as a number, 0 when it is negative, not finite or beyond maxQuantity: a
// value no real cluster has is not counted. AsApproximateFloat64 does not build the exact value.
func quantityValue(q resource.Quantity) float64 {
	if !countable(q) {
		return 0
	}
	return q.AsApproximateFloat64()
}

// resourcesOf returns the CPU and memory of rl (0 for what it lacks or cannot be counted).
func resourcesOf(rl corev1.ResourceList) resources {
	return resources{cpu: quantityValue(rl[corev1.ResourceCPU]), memory: quantityValue(rl[corev1.ResourceMemory])}
}

// countable says whether q is a value quantityValue counts: zero or more, finite, at most
// maxQuantity.
func countable(q resource.Quantity) bool {
	v := q.AsApproximateFloat64()
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= maxQuantity
}

func (r resources) add(o resources) resources {
	return resources{cpu: r.cpu + o.cpu, memory: r.memory + o.memory}
}

// usage is CPU and memory use in percent, nil when unknown.
type usage struct {
	cpu, memory *float64
}

// readMetricsUsage reads the nodes' usage from the metrics API and returns it in percent of the
// allocatable of the same nodes (nodes, by name). served is false when the cluster gave no usable
// answer: it does not serve the API (404 Not Found: no such group; 503 Service Unavailable: an
// APIService whose backend is down), the caller may not read it (403), or the answer names none
// of the nodes or holds a negative or missing usage. Only an answer over lim's caps is an error
// (a *readlimit.Error; the transport of cs caps its bytes and elements, lim.MaxListItems the
// items): the metrics API is as hostile as the rest of the cluster.
func readMetricsUsage(ctx context.Context, cs kubernetes.Interface, nodes map[string]resources, lim readlimit.Limits) (u usage, served bool, err error) {
	rc := cs.Discovery().RESTClient()
	if rc == nil || len(nodes) == 0 {
		return usage{}, false, nil
	}
	body, err := rc.Get().AbsPath(NodeMetricsPath).Do(ctx).Raw()
	if err != nil {
		if _, limited := readlimit.As(err); limited {
			return usage{}, false, fmt.Errorf("failed to read the node metrics: %w", err)
		}
		return usage{}, false, nil
	}
	u, served, err = metricsUsage(body, nodes, lim)
	if err != nil {
		return usage{}, false, fmt.Errorf("failed to read the node metrics: %w", err)
	}
	return u, served, nil
}

// metricsUsage computes the use in percent from a NodeMetricsList answer (body): the usage summed
// over the nodes it names that are in nodes, over their allocatable summed. A node named twice
// counts once; a node the answer does not name is left out of both sums (its metrics are not
// there yet, or it is not Ready). served is false when the answer is no NodeMetricsList, names
// none of the nodes, or holds a missing, negative, not finite or absurdly large (beyond
// maxQuantity) cpu or memory usage for one of them.
func metricsUsage(body []byte, nodes map[string]resources, lim readlimit.Limits) (u usage, served bool, err error) {
	var list nodeMetricsList
	if err := json.Unmarshal(body, &list); err != nil {
		return usage{}, false, nil
	}
	if max := lim.WithDefaults().MaxListItems; len(list.Items) > max {
		return usage{}, false, &readlimit.Error{Subject: "node metrics list", Limit: fmt.Sprintf("%d items", max)}
	}
	var used, alloc resources
	seen := map[string]bool{}
	for _, item := range list.Items {
		a, ok := nodes[item.Metadata.Name]
		if !ok || seen[item.Metadata.Name] {
			continue
		}
		seen[item.Metadata.Name] = true
		cpu, okCPU := item.Usage[corev1.ResourceCPU]
		mem, okMem := item.Usage[corev1.ResourceMemory]
		if !okCPU || !okMem || !countable(cpu) || !countable(mem) {
			return usage{}, false, nil
		}
		used = used.add(resources{cpu: quantityValue(cpu), memory: quantityValue(mem)})
		alloc = alloc.add(a)
	}
	if len(seen) == 0 {
		return usage{}, false, nil
	}
	u = usage{cpu: percent(used.cpu, alloc.cpu), memory: percent(used.memory, alloc.memory)}
	if u.cpu == nil || u.memory == nil {
		return usage{}, false, nil
	}
	return u, true, nil
}
