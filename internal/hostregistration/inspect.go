package hostregistration

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleetv1alpha1 "github.com/kubeopera/kubeopera/apis/fleet/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/health"
	"github.com/kubeopera/kubeopera/internal/readlimit"
)

// Facts are what Inspect reads from a cluster.
type Facts struct {
	// ClusterUID is the UID of namespace kube-system: the cluster's stable fingerprint.
	ClusterUID string
	// KubernetesVersion is the API server's GitVersion, e.g. v1.33.1.
	KubernetesVersion string
	// Provider and Region are read from the first node (by name) whose .spec.providerID
	// health.ParseProviderID recognises; health.UnknownProvider and "" when none does.
	Provider, Region string
	// NodeCount counts every node, ReadyNodeCount those whose Ready condition is True.
	NodeCount, ReadyNodeCount int32
	// Nodes are the first maxNodes nodes by name.
	Nodes []fleetv1alpha1.RegisteredClusterNode
}

// NodeSummary is "<ready>/<total>".
func (f Facts) NodeSummary() string { return fmt.Sprintf("%d/%d", f.ReadyNodeCount, f.NodeCount) }

// listPageSize is the page size of the node list, so a big cluster is read a page at a time, and
// maxNodes how many nodes Facts.Nodes keeps (status.nodes' MaxItems). Variables for the tests.
var (
	listPageSize int64 = 500
	maxNodes           = fleetv1alpha1.MaxNodes
)

// Inspect reads the facts of the cluster cs talks to. It needs get on namespace kube-system, list
// on nodes and the server version, nothing else (config/rbac/backend.yaml grants them to the
// manager).
func Inspect(ctx context.Context, cs kubernetes.Interface) (Facts, error) {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return Facts{}, fmt.Errorf("failed to read namespace %s for the cluster's UID: %w", metav1.NamespaceSystem, err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return Facts{}, fmt.Errorf("failed to get the server version: %w", err)
	}
	f := Facts{ClusterUID: string(ns.UID), KubernetesVersion: v.GitVersion, Provider: health.UnknownProvider}
	// The API server lists in name order, page after page: the first maxNodes seen are the first
	// by name, and so is the first node with a recognised providerID.
	err = health.EachNode(ctx, cs, listPageSize, readlimit.Limits{}, func(n *corev1.Node) {
		ready := health.NodeReady(n)
		f.NodeCount++
		if ready {
			f.ReadyNodeCount++
		}
		if f.Provider == health.UnknownProvider {
			f.Provider, f.Region = health.ParseProviderID(n.Spec.ProviderID)
		}
		if len(f.Nodes) < maxNodes {
			f.Nodes = append(f.Nodes, fleetv1alpha1.RegisteredClusterNode{
				Name:           n.Name,
				Ready:          ready,
				ProviderID:     n.Spec.ProviderID,
				KubeletVersion: n.Status.NodeInfo.KubeletVersion,
			})
		}
	})
	if err != nil {
		return Facts{}, fmt.Errorf("failed to list nodes: %w", err)
	}
	sort.Slice(f.Nodes, func(i, j int) bool { return f.Nodes[i].Name < f.Nodes[j].Name })
	return f, nil
}
