package v1alpha1

import (
	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// The shared vocabulary (apis/common/v1alpha1), named here too so this group's users need one
// import. They are the same constants, defined once.
const (
	ReadyCondition       = commonv1alpha1.ReadyCondition
	ReconcilingCondition = commonv1alpha1.ReconcilingCondition
	StalledCondition     = commonv1alpha1.StalledCondition

	ProgressingReason          = commonv1alpha1.ProgressingReason
	SucceededReason            = commonv1alpha1.SucceededReason
	WaitingReason              = commonv1alpha1.WaitingReason
	TransientErrorReason       = commonv1alpha1.TransientErrorReason
	RetryRequestedReason       = commonv1alpha1.RetryRequestedReason
	DeletingReason             = commonv1alpha1.DeletingReason
	InvalidSpecReason          = commonv1alpha1.InvalidSpecReason
	FingerprintCollisionReason = commonv1alpha1.FingerprintCollisionReason
	NameConflictReason         = commonv1alpha1.NameConflictReason
	QuotaExceededReason        = commonv1alpha1.QuotaExceededReason
	CredentialsMissingReason   = commonv1alpha1.CredentialsMissingReason

	RetryAnnotation = commonv1alpha1.RetryAnnotation
	ManagedByLabel  = commonv1alpha1.ManagedByLabel
)

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
