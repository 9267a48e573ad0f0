// Package v1alpha1 contains the fleet.kubeopera.io/v1alpha1 API: RegisteredCluster, the platform's
// record of a cluster it knows about (docs/fleet.md#registeredcluster). Today the only record is the
// backend cluster the platform runs on, written by `manager register-host`.
//
// The group is platform-only: its CRD is applied to the platform workspace by
// bootstrap.Bootstrap (apiexports/platform/) and is part of no APIExport, so tenants never see it.
//
// +kubebuilder:object:generate=true
// +groupName=fleet.kubeopera.io
package v1alpha1
