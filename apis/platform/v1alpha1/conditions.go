package v1alpha1

import (
	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// The shared vocabulary (Ready, Reconciling, Stalled, the common reasons, the retry annotation)
// is apis/common/v1alpha1; this group adds only its kinds' step conditions and reasons.

// Step conditions of this group's kinds.
const (
	// AdmittedCondition is True once the KubernetesCluster fits the workspace's limits (how many
	// KubernetesClusters it may have); checked before anything is created for it.
	AdmittedCondition = commonv1alpha1.AdmittedCondition
	// CredentialsValidCondition is True once the ProviderConfig's credentials Secret is readable
	// and well-formed.
	CredentialsValidCondition = "CredentialsValid"
	// FlavorMatchedCondition is True once a ProviderMachineFlavor satisfies the MachineCapabilities.
	FlavorMatchedCondition = "FlavorMatched"
	// InfrastructureReadyCondition is True once the Crossplane resources report Ready.
	InfrastructureReadyCondition = "InfrastructureReady"
	// KubeconfigDeliveredCondition is True once the cluster kubeconfig Secret is delivered.
	KubeconfigDeliveredCondition = "KubeconfigDelivered"
)

// Reasons of this group's step conditions.
const (
	// NoMatchingFlavorReason: no available flavor satisfies the requested capabilities.
	NoMatchingFlavorReason = "NoMatchingFlavor"
	// InvalidCredentialsReason: the ProviderConfig's credentials Secret does not hold well-formed
	// credentials.
	InvalidCredentialsReason = "InvalidCredentials"
)

// KubernetesCluster step conditions beyond the shared ones, in the order the reconciler takes the
// steps: CredentialsValid (its ProviderConfig is Ready), FlavorMatched, then these, then
// KubeconfigDelivered. While the cluster is deleted they say how its teardown goes.
const (
	// NetworkReadyCondition is True once the VPC and subnet (the tenant's, or the ones the
	// platform created) and, for a public endpoint, the elastic IP are Ready.
	NetworkReadyCondition = "NetworkReady"
	// ClusterReadyCondition is True once the cluster resource is Synced and Ready.
	ClusterReadyCondition = "ClusterReady"
	// NodePoolReadyCondition is True once the worker node pool is Synced and Ready.
	NodePoolReadyCondition = "NodePoolReady"
)

// More reasons of the KubernetesCluster's conditions.
const (
	// ProviderConfigNotReadyReason: the referenced ProviderConfig is missing or not Ready.
	ProviderConfigNotReadyReason = "ProviderConfigNotReady"
	// MachineCapabilitiesMissingReason: the referenced MachineCapabilities does not exist.
	MachineCapabilitiesMissingReason = "MachineCapabilitiesMissing"
	// UnsupportedProviderReason: spec.providerRef.type names no provider the platform implements.
	UnsupportedProviderReason = "UnsupportedProvider"
	// CreatingReason: Crossplane is creating the cloud resource.
	CreatingReason = "Creating"
	// SoldOutReason: the node pool's flavor has no capacity in its zone.
	SoldOutReason = "SoldOut"
	// ReplacingReason: a node pool whose create failed is deleted so that one with the changed
	// spec can be created (the provider never retries a failed create).
	ReplacingReason = "Replacing"
)
