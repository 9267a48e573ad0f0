package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// KubernetesClusterFinalizer is set so Crossplane resources are deleted in a safe order first.
const KubernetesClusterFinalizer = "platform.edgeconnect.eu/kubernetescluster"

// KubernetesClusterPhase is the KubernetesCluster's state machine position.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Failed;Deleting
type KubernetesClusterPhase string

// KubernetesCluster phases.
const (
	KubernetesClusterPhasePending      KubernetesClusterPhase = "Pending"
	KubernetesClusterPhaseProvisioning KubernetesClusterPhase = "Provisioning"
	KubernetesClusterPhaseReady        KubernetesClusterPhase = "Ready"
	KubernetesClusterPhaseFailed       KubernetesClusterPhase = "Failed"
	KubernetesClusterPhaseDeleting     KubernetesClusterPhase = "Deleting"
)

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the referenced object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ProviderRef selects an infrastructure provider and, for a cluster, its configuration.
type ProviderRef struct {
	// type is the provider, e.g. OTC, AWS, EquinixMetal.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Type string `json:"type"`

	// configRef names the ProviderConfig in the same namespace.
	// +optional
	ConfigRef *LocalObjectReference `json:"configRef,omitempty"`
}

// KubernetesSpec is the requested Kubernetes distribution.
type KubernetesSpec struct {
	// version, e.g. 1.28.0.
	// +required
	// +kubebuilder:validation:Pattern=`^v?[0-9]+\.[0-9]+(\.[0-9]+)?$`
	Version string `json:"version"`
}

// PublicEndpoint asks for a cluster's API server to be reachable from the internet.
type PublicEndpoint struct {
	// bandwidthMbit is the public IP's bandwidth in Mbit/s (OTC: an elastic IP of its own,
	// exclusive bandwidth charged by traffic; OTC offers 1 to 300). kubectl needs little: 5 by
	// default.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	BandwidthMbit int32 `json:"bandwidthMbit,omitempty"`
}

// KubernetesClusterSpec is a request for a managed cluster.
// +kubebuilder:validation:XValidation:rule="has(self.providerRef.configRef)",message="spec.providerRef.configRef is required for a KubernetesCluster"
// +kubebuilder:validation:XValidation:rule="!has(self.publicEndpoint) || self.providerRef.type.lowerAscii() == 'otc'",message="spec.publicEndpoint is offered for OTC clusters only: another provider's Composition decides how its cluster is reached"
// +kubebuilder:validation:XValidation:rule="has(self.publicEndpoint) == has(oldSelf.publicEndpoint)",message="spec.publicEndpoint cannot be added or removed once the cluster exists (its bandwidthMbit can change): create another cluster"
// +kubebuilder:validation:XValidation:rule="!has(self.subnetID) || has(self.vpcID)",message="spec.subnetID requires spec.vpcID"
// +kubebuilder:validation:XValidation:rule="self.providerRef.type == oldSelf.providerRef.type",message="spec.providerRef.type cannot be changed: delete the cluster and create one of the other provider"
type KubernetesClusterSpec struct {
	// machineCapabilitiesRef names the MachineCapabilities in the same namespace.
	// +required
	MachineCapabilitiesRef LocalObjectReference `json:"machineCapabilitiesRef"`

	// nodeCount is the number of worker nodes.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	NodeCount int32 `json:"nodeCount"`

	// nodeDiskSize is the worker nodes' disk size, e.g. 100Gi.
	// +optional
	NodeDiskSize *resource.Quantity `json:"nodeDiskSize,omitempty"`

	// providerRef selects the provider and its ProviderConfig.
	// +required
	ProviderRef ProviderRef `json:"providerRef"`

	// kubernetes is the requested Kubernetes version.
	// +required
	Kubernetes KubernetesSpec `json:"kubernetes"`

	// region of the provider, e.g. eu-de.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`

	// vpcID of an existing VPC; when omitted (OTC) the platform creates a VpcV1.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	VpcID string `json:"vpcID,omitempty"`

	// subnetID of an existing subnet; when omitted (OTC) the platform creates a SubnetV1.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SubnetID string `json:"subnetID,omitempty"`

	// availableZone of the control plane.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	AvailableZone string `json:"availableZone,omitempty"`

	// nodeAvailableZone of the workers; "random" lets the provider place them where capacity is.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	NodeAvailableZone string `json:"nodeAvailableZone,omitempty"`

	// nodeFlavor overrides the flavor matched from machineCapabilitiesRef.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	NodeFlavor string `json:"nodeFlavor,omitempty"`

	// keyPair is the SSH key pair name written literally onto the node pool.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	KeyPair string `json:"keyPair,omitempty"`

	// publicEndpoint makes the API server reachable from the internet (OTC: an elastic IP bound
	// to the cluster) and the delivered kubeconfig name it; omitted, the API server is reachable
	// only from inside the cluster's VPC and the kubeconfig names its private address. OTC only;
	// set or omitted for good when the cluster is created.
	// +optional
	PublicEndpoint *PublicEndpoint `json:"publicEndpoint,omitempty"`
}

// EndpointAccess says from where a cluster's API server endpoint can be reached.
// +kubebuilder:validation:Enum=Public;Private
type EndpointAccess string

// Endpoint accesses.
const (
	// EndpointPublic: from the internet (OTC: through the cluster's elastic IP).
	EndpointPublic EndpointAccess = "Public"
	// EndpointPrivate: only from inside the cluster's VPC.
	EndpointPrivate EndpointAccess = "Private"
)

// KubernetesClusterStatus is the platform's word on the cluster.
type KubernetesClusterStatus struct {
	// phase is the position in the state machine.
	// +optional
	Phase KubernetesClusterPhase `json:"phase,omitempty"`

	// message says in a sentence what happened last.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// flavor is the ProviderMachineFlavor used for the workers.
	// +optional
	Flavor string `json:"flavor,omitempty"`

	// kubeconfigSecret names the delivered Secret holding the cluster kubeconfig.
	// +optional
	KubeconfigSecret string `json:"kubeconfigSecret,omitempty"`

	// endpoint is the API server URL the delivered kubeconfig names (OTC).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint,omitempty"`

	// endpointAccess says from where endpoint can be reached: Public (the internet) or Private
	// (only inside the cluster's VPC).
	// +optional
	EndpointAccess EndpointAccess `json:"endpointAccess,omitempty"`

	// The retry request last acted upon (lastHandledRetry).
	commonv1alpha1.RetryStatus `json:",inline"`

	// observedGeneration is the generation the status was last computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling, Stalled and one per step.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KubernetesCluster is a managed Kubernetes cluster built through Crossplane.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=kubeopera
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerRef.type`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.kubernetes.version`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.spec.nodeCount`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Access",type=string,JSONPath=`.status.endpointAccess`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KubernetesCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested cluster.
	// +required
	Spec KubernetesClusterSpec `json:"spec"`

	// status is written by the platform only.
	// +optional
	Status KubernetesClusterStatus `json:"status,omitempty"`
}

// KubernetesClusterList is a list of KubernetesClusters.
// +kubebuilder:object:root=true
type KubernetesClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubernetesCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&KubernetesCluster{}, &KubernetesClusterList{}))
}
