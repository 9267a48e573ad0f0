// Package v1alpha1 contains the kubeopera.io/v1alpha1 API: Tenant (a vCluster per customer) and
// HostCluster (a Kubernetes cluster connected by kubeconfig or provisioned on AWS).
//
// Both kinds are published through the kcp APIExport "kubeopera.io"; tenants create them in their
// own kcp workspace and the central manager writes their status.
//
// +kubebuilder:object:generate=true
// +groupName=kubeopera.io
package v1alpha1
