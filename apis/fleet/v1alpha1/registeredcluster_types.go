package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterSource records how a RegisteredCluster came to exist (docs/fleet.md#registeredcluster).
// +kubebuilder:validation:Enum=self_registered
type ClusterSource string

const (
	// SourceSelfRegistered: the cluster the platform runs on, registered by `manager
	// register-host` with the manager's own identity.
	SourceSelfRegistered ClusterSource = "self_registered"
)

// HostName is the name of the one RegisteredCluster that may be the host (spec.isHost).
const HostName = "host"

// MaxNodes is how many nodes status.nodes lists at most.
const MaxNodes = 500

// RegisteredClusterSpec is what the platform admin asserts about the cluster.
// +kubebuilder:validation:XValidation:rule="self.source == oldSelf.source",message="spec.source is immutable"
type RegisteredClusterSpec struct {
	// clusterUID is the cluster's stable fingerprint: the UID of its kube-system namespace. It
	// tells one cluster from another even when its API server moves, and never changes.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.clusterUID is immutable: delete the RegisteredCluster and register the cluster again"
	ClusterUID string `json:"clusterUID"`

	// source is how the cluster came to be registered; only self_registered for now.
	// +optional
	// +kubebuilder:default=self_registered
	Source ClusterSource `json:"source,omitempty"`

	// isHost is true for the cluster the platform itself runs on (its backend). Only the object
	// named "host" may set it, so there is at most one host (see RegisteredCluster).
	// +optional
	// +kubebuilder:default=false
	IsHost bool `json:"isHost,omitempty"`
}

// RegisteredClusterNode is one node as it was last observed.
type RegisteredClusterNode struct {
	// name of the node.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// ready is true when the node's Ready condition is True.
	// +optional
	Ready bool `json:"ready"`
	// providerID is the node's .spec.providerID, set by a cloud controller manager; empty without
	// one.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`
	// kubeletVersion is the version the node's kubelet reports.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KubeletVersion string `json:"kubeletVersion,omitempty"`
}

// RegisteredClusterStatus are facts read from the cluster itself when it was registered or
// registered again.
type RegisteredClusterStatus struct {
	// provider as read from the first node (by name) whose .spec.providerID is recognised (aws,
	// gcp, azure, openstack), or "unknown" when none is, e.g. without a cloud controller manager.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Provider string `json:"provider,omitempty"`
	// region as read from the same providerID; empty when it names none.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`
	// kubernetesVersion is the API server's version (its GitVersion, e.g. v1.33.1).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// nodeCount is the number of nodes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NodeCount int32 `json:"nodeCount"`
	// readyNodeCount is the number of nodes whose Ready condition is True.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyNodeCount int32 `json:"readyNodeCount"`
	// nodeSummary is "<ready>/<total>", for the Nodes printer column.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	NodeSummary string `json:"nodeSummary,omitempty"`
	// nodes are the first 500 nodes by name; nodeCount and readyNodeCount count them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=500
	Nodes []RegisteredClusterNode `json:"nodes,omitempty"`
	// registeredAt is when the cluster was first registered; registering it again keeps it.
	// +optional
	RegisteredAt *metav1.Time `json:"registeredAt,omitempty"`
	// observedAt is when the facts above were read.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
	// conditions: Ready (True with reason Inspected once the facts were read).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RegisteredCluster is a cluster the platform knows about, kept by platform admins in the platform
// workspace (docs/fleet.md#registeredcluster). Today it records the backend cluster the platform runs on:
// `manager register-host` creates the object "host" with isHost true. A RegisteredCluster is a
// record, not a request: no controller reconciles it and registering never creates a HostCluster.
//
// At most one cluster is the host, and the API server enforces it, not the code that writes the
// object: a CEL rule of this type lets only the object named "host" set spec.isHost, and names are
// unique, so a second host is refused at admission whoever creates it (the original partial unique
// index on is_host). To move the host to another cluster, delete RegisteredCluster "host" first.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rc,categories=kubeopera
// +kubebuilder:validation:XValidation:rule="!has(self.spec.isHost) || !self.spec.isHost || self.metadata.name == 'host'",message="only the RegisteredCluster named host may set spec.isHost: there is at most one host cluster"
// +kubebuilder:printcolumn:name="Host",type=boolean,JSONPath=`.spec.isHost`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.status.provider`
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.status.region`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Nodes",type=string,JSONPath=`.status.nodeSummary`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RegisteredCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which cluster this is and whether it is the host.
	// +required
	Spec RegisteredClusterSpec `json:"spec"`
	// status are the facts last read from the cluster.
	// +optional
	Status RegisteredClusterStatus `json:"status,omitempty"`
}

// RegisteredClusterList is a list of RegisteredClusters.
// +kubebuilder:object:root=true
type RegisteredClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RegisteredCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&RegisteredCluster{}, &RegisteredClusterList{}))
}
