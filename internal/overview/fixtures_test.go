package overview

import (
	"time"

	"k8s.io/utils/ptr"
)

// The fixture's clusters, by name. hostile is a name that must be escaped everywhere.
const (
	platform = "platform"
	edge9    = "edge-9"
	edge10   = "edge-10"
	prodEU   = "prod-eu"
	hostile  = "<script>alert(1)</script>"
)

var observed = time.Date(2025, 6, 1, 11, 59, 30, 0, time.UTC)

// fleet is a fleet with every kind of value: the platform's own cluster (no namespace, unknown
// memory, no penalties, a note), a ready green cluster (use from the metrics API, a cost
// estimate), a ready amber one with penalties whose sum
// is rounded, one not read yet (no health, nodes, CPU, memory or version) and a failed red one
// with a hostile name. Its default order is platform, edge-9, edge-10, prod-eu, hostile.
func fleet() []Cluster {
	return []Cluster{
		{
			Workspace: "root:orgs:acme", Namespace: "infra", Name: prodEU, ClusterID: "prod-eu-1",
			Source: "connect_existing", Phase: "Ready", Message: "Cluster is ready", Ready: true,
			Health:     &Health{Score: 92, Band: "green", Penalties: []Penalty{{Reason: "PodsFailed", Detail: "4 pods failed", Points: "8"}}},
			NodesReady: 3, NodesTotal: 3, CPUPercent: ptr.To[int32](41), MemoryPercent: ptr.To[int32](63), UsageSource: "MetricsAPI",
			Cost:    &Cost{Monthly: "231.26", Currency: "USD", PricedNodes: 3},
			Version: "v1.33.1", Provider: "aws", Region: "eu-central-1", ObservedAt: &observed,
		},
		{
			Workspace: "root:orgs:beta", Namespace: "default", Name: hostile, ClusterID: "evil",
			Source: "provision_eks", Phase: "Failed", Message: `terraform apply failed: <b>"quota"</b>`,
			Health: &Health{Score: 40, Band: "red", Penalties: []Penalty{
				{Reason: "ControlPlaneUnhealthy", Detail: "etcd, scheduler", Points: "30"},
				{Reason: "NodeNotReady", Detail: "2 nodes not ready", Points: "10"},
				{Reason: "PodsFailed", Detail: "10 pods failed", Points: "20"},
			}},
			NodesReady: 0, NodesTotal: 2, CPUPercent: ptr.To[int32](0), MemoryPercent: ptr.To[int32](5),
			Version: "v1.30.2", Provider: "gcp", Region: "europe-west1", ObservedAt: &observed,
		},
		{
			Workspace: "root:orgs:acme", Namespace: "infra", Name: edge10, ClusterID: "edge-10",
			Source: "provision_vanilla", Phase: "Provisioning", Message: "Terraform apply running",
			Provider: "aws", Region: "us-east-1",
		},
		{
			Workspace: "root:kubeopera", Name: platform, ClusterID: "6b1c0d2e-uid", Source: SourceSelfRegistered,
			IsHost: true, Phase: PhaseRegistered, Ready: true,
			Health:     &Health{Score: 100, Band: "green", Penalties: []Penalty{}},
			NodesReady: 1, NodesTotal: 1, CPUPercent: ptr.To[int32](12),
			Version: "v1.34.0", ObservedAt: &observed, Note: "pods not read: the platform may not list them",
			Nodes: []Node{{Name: "cp-1", Ready: true}, {Name: "worker-<2>", Conditions: []string{"DiskPressure", "PIDPressure"}}},
		},
		{
			Workspace: "root:orgs:acme", Namespace: "infra", Name: edge9, ClusterID: "edge-9",
			Source: "connect_existing", Phase: "Ready", Ready: true,
			Health: &Health{Score: 73, Band: "amber", Penalties: []Penalty{
				{Reason: "NodeNotReady", Detail: "node edge-9-c not ready", Points: "5"},
				{Reason: "MemoryCritical", Detail: "memory requests at 97%", Points: "10"},
				{Reason: "PodsCrashLooping", Detail: "5 pods crash-looping", Points: "12.5"},
			}},
			NodesReady: 2, NodesTotal: 3, CPUPercent: ptr.To[int32](85), MemoryPercent: ptr.To[int32](97), UsageSource: "Requests",
			Version: "v1.9.0", Provider: "hetzner", Region: "fsn1", ObservedAt: &observed,
		},
	}
}

func names(cs []Cluster) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
