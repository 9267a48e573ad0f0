package v1alpha1

// The shared vocabulary (Ready, Reconciling, Stalled, the common reasons, the retry annotation)
// is apis/common/v1alpha1; this group adds only its kinds' step conditions and reasons.

// Step conditions of this group's kinds.
const (
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
)
