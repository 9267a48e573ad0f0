package overview

import (
	"context"
	"time"
)

// Sources of a cluster, as the seed's clusters table records how a row came to exist.
const (
	SourceSelfRegistered = "self_registered"
)

// Phase of a self-registered cluster: it is the cluster the platform runs on, answering.
const PhaseRegistered = "Registered"

// Cluster is one row of the overview.
type Cluster struct {
	// Workspace is the logical cluster the HostCluster lives in; for a self-registered cluster,
	// the platform workspace's path.
	Workspace string `json:"workspace"`
	// Namespace and Name of the HostCluster ("" and the RegisteredCluster's name for a
	// self-registered cluster).
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// ClusterID is spec.clusterID; the kube-system namespace UID for a self-registered cluster.
	ClusterID string `json:"clusterID"`
	// Source is spec.mode (connect_existing, provision_vanilla, provision_eks) or self_registered.
	Source string `json:"source"`
	// IsHost is true for the cluster the platform itself runs on.
	IsHost bool `json:"isHost"`
	// Phase is status.phase (Registered for a self-registered cluster); Message status.message.
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	// Ready is the Ready condition's status.
	Ready bool `json:"ready"`

	// Unreachable is true while the platform cannot reach the cluster's API server (a
	// HostCluster's status.inventory.unreachableSince is set): its health is unknown then, and
	// the other facts are as last read (ObservedAt).
	Unreachable bool `json:"unreachable,omitempty"`
	// UnreachableSince is when the platform first failed to reach it.
	UnreachableSince *time.Time `json:"unreachableSince,omitempty"`

	// Health is nil until the cluster's inventory was read, and while it is unreachable.
	Health *Health `json:"health,omitempty"`
	// NodesReady and NodesTotal count the cluster's nodes.
	NodesReady int32 `json:"nodesReady"`
	NodesTotal int32 `json:"nodesTotal"`
	// CPUPercent and MemoryPercent are use over allocatable, nil when unknown; UsageSource says
	// what use: MetricsAPI (consumed, from the metrics API) or Requests (requested by running
	// pods).
	CPUPercent    *int32 `json:"cpuPercent,omitempty"`
	MemoryPercent *int32 `json:"memoryPercent,omitempty"`
	UsageSource   string `json:"usageSource,omitempty"`
	// Cost is the estimated monthly cost of the cluster's nodes, nil where there is no estimate
	// (no price table, no priced instance type, or not read yet).
	Cost *Cost `json:"cost,omitempty"`
	// Version, Provider and Region as read from the cluster.
	Version  string `json:"kubernetesVersion,omitempty"`
	Provider string `json:"provider,omitempty"`
	Region   string `json:"region,omitempty"`
	// ObservedAt is when the inventory was read.
	ObservedAt *time.Time `json:"observedAt,omitempty"`
	// Note says what the overview could not know about this cluster, e.g. why pods were not read.
	Note string `json:"note,omitempty"`
	// Nodes is the per-node breakdown, for a self-registered cluster only (docs/fleet.md#overview); HostClusters
	// keep their node facts in their health penalties.
	Nodes []Node `json:"nodes,omitempty"`
}

// Node is one node of a self-registered cluster.
type Node struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
	// Conditions are the node's problem conditions that are True, e.g. MemoryPressure.
	Conditions []string `json:"conditions,omitempty"`
}

// Health is a cluster's health score with the penalties that applied.
type Health struct {
	// Score is 0-100.
	Score int32 `json:"score"`
	// Band is green (80 and above), amber (60-79) or red (below 60).
	Band string `json:"band"`
	// Penalties that applied, and why.
	Penalties []Penalty `json:"penalties"`
}

// Cost is a cluster's estimated monthly cost (docs/fleet.md#cost).
type Cost struct {
	// Monthly is the estimate, a decimal with two digits, e.g. "60.74".
	Monthly string `json:"monthly"`
	// Currency of the price table, e.g. USD.
	Currency string `json:"currency"`
	// PricedNodes are the nodes the estimate covers; UnpricedNodes those it leaves out (no
	// instance type, or one the price table does not list), named in UnpricedInstanceTypes.
	PricedNodes           int32    `json:"pricedNodes"`
	UnpricedNodes         int32    `json:"unpricedNodes"`
	UnpricedInstanceTypes []string `json:"unpricedInstanceTypes,omitempty"`
	// Partial is true when some nodes are left out.
	Partial bool `json:"partial"`
}

// Penalty is one penalty of a health score.
type Penalty struct {
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
	// Points subtracted from 100, e.g. "2.5".
	Points string `json:"points"`
}

// Source lists the fleet's clusters. Implementations read caches: Clusters is called for every
// page, JSON request and metrics scrape.
type Source interface {
	Clusters(ctx context.Context) ([]Cluster, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context) ([]Cluster, error)

// Clusters calls f.
func (f SourceFunc) Clusters(ctx context.Context) ([]Cluster, error) { return f(ctx) }
