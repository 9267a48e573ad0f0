package v1alpha1

// Condition types of this group. Ready summarises the object; Reconciling and Stalled follow
// kstatus and are present only while true.
const (
	// ReadyCondition is True when the object is usable.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while the reconciler is still making progress.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when the reconciler cannot make progress without a change by the user.
	StalledCondition = "Stalled"
	// CredentialsValidCondition is True once the ProviderConfig's credentials Secret is readable.
	CredentialsValidCondition = "CredentialsValid"
	// FlavorMatchedCondition is True once a ProviderMachineFlavor satisfies the MachineCapabilities.
	FlavorMatchedCondition = "FlavorMatched"
	// InfrastructureReadyCondition is True once the Crossplane resources report Ready.
	InfrastructureReadyCondition = "InfrastructureReady"
	// KubeconfigDeliveredCondition is True once the cluster kubeconfig Secret is delivered.
	KubeconfigDeliveredCondition = "KubeconfigDelivered"
)

// Condition and event reasons.
const (
	ProgressingReason          = "Progressing"
	SucceededReason            = "Succeeded"
	WaitingReason              = "Waiting"
	InvalidSpecReason          = "InvalidSpec"
	CredentialsMissingReason   = "CredentialsMissing"
	NoMatchingFlavorReason     = "NoMatchingFlavor"
	FingerprintCollisionReason = "FingerprintCollision"
	DeletingReason             = "Deleting"
)
