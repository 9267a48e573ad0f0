// Package v1alpha1 contains the platform.edgeconnect.eu/v1alpha1 API: KubernetesCluster (a managed
// cluster built through Crossplane), ProviderConfig (provider credentials), MachineCapabilities
// (requested compute) and ProviderMachineFlavor (the platform's cluster-scoped flavor catalog).
//
// The kinds are published through the kcp APIExport "platform.edgeconnect.eu".
//
// +kubebuilder:object:generate=true
// +groupName=platform.edgeconnect.eu
package v1alpha1
