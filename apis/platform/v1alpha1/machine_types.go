package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// Capabilities are compute resources of a machine.
type Capabilities struct {
	// vCPUCount is the number of virtual CPUs.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	VCPUCount int32 `json:"vCPUCount"`

	// memorySize, e.g. 8Gi.
	// +required
	MemorySize resource.Quantity `json:"memorySize"`

	// gpuModelName, e.g. RTX3080; null or omitted for no GPU.
	// +optional
	// +nullable
	// +kubebuilder:validation:MaxLength=128
	GPUModelName *string `json:"gpuModelName,omitempty"`
}

// MachineCapabilitiesStatus is the platform's word on the MachineCapabilities.
type MachineCapabilitiesStatus struct {
	// matchingFlavors lists the ProviderMachineFlavors that satisfy these capabilities.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	MatchingFlavors []string `json:"matchingFlavors,omitempty"`

	// The retry request last acted upon (lastHandledRetry).
	commonv1alpha1.RetryStatus `json:",inline"`

	// observedGeneration is the generation the status was last computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready and FlavorMatched.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MachineCapabilities describes desired compute resources; the platform finds matching flavors.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=kubeopera
// +kubebuilder:printcolumn:name="vCPU",type=integer,JSONPath=`.spec.vCPUCount`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.spec.memorySize`
// +kubebuilder:printcolumn:name="GPU",type=string,JSONPath=`.spec.gpuModelName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachineCapabilities struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested machine shape.
	// +required
	Spec Capabilities `json:"spec"`

	// status is written by the platform only.
	// +optional
	Status MachineCapabilitiesStatus `json:"status,omitempty"`
}

// MachineCapabilitiesList is a list of MachineCapabilities.
// +kubebuilder:object:root=true
type MachineCapabilitiesList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineCapabilities `json:"items"`
}

// ProviderMachineFlavorSpec describes a machine type a provider offers.
type ProviderMachineFlavorSpec struct {
	// available is false when the flavor must not be chosen.
	// +required
	Available bool `json:"available"`

	// providerRef names the provider offering the flavor.
	// +required
	ProviderRef ProviderRef `json:"providerRef"`

	// flavor is the provider's name for the machine type, e.g. c3.large.x86.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Flavor string `json:"flavor"`

	// capabilities of the flavor.
	// +required
	Capabilities Capabilities `json:"capabilities"`

	// availableZones where the flavor can be placed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	AvailableZones []string `json:"availableZones,omitempty"`
}

// ProviderMachineFlavorStatus is the platform's word on the flavor.
type ProviderMachineFlavorStatus struct {
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProviderMachineFlavor is a machine type registered by a provider integration (cluster-scoped:
// the platform's catalog).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kubeopera
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerRef.type`
// +kubebuilder:printcolumn:name="Flavor",type=string,JSONPath=`.spec.flavor`
// +kubebuilder:printcolumn:name="vCPU",type=integer,JSONPath=`.spec.capabilities.vCPUCount`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.spec.capabilities.memorySize`
// +kubebuilder:printcolumn:name="Available",type=boolean,JSONPath=`.spec.available`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProviderMachineFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the flavor.
	// +required
	Spec ProviderMachineFlavorSpec `json:"spec"`

	// status is written by the platform only.
	// +optional
	Status ProviderMachineFlavorStatus `json:"status,omitempty"`
}

// ProviderMachineFlavorList is a list of ProviderMachineFlavors.
// +kubebuilder:object:root=true
type ProviderMachineFlavorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderMachineFlavor `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&MachineCapabilities{}, &MachineCapabilitiesList{}, &ProviderMachineFlavor{}, &ProviderMachineFlavorList{}))
}
