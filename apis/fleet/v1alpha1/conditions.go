package v1alpha1

import (
	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// The shared vocabulary (apis/common/v1alpha1), named here too so this group's users need one
// import.
const (
	ReadyCondition = commonv1alpha1.ReadyCondition
)

// RegisteredCluster reasons.
const (
	// InspectedReason: the status facts were read from the cluster itself, with the identity of
	// the component that registered it; status.observedAt says when.
	InspectedReason = "Inspected"
)
