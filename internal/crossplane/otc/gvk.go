package otc

import "k8s.io/apimachinery/pkg/runtime/schema"

// API groups, versions and kinds of provider-opentelekomcloud's Crossplane v2 namespaced objects.
const (
	// VPCGroup holds VpcV1, SubnetV1 and EIPV1.
	VPCGroup = "vpc.opentelekomcloud.m.crossplane.io"
	// CCEGroup holds ClusterV3 and NodePoolV3.
	CCEGroup = "cce.opentelekomcloud.m.crossplane.io"
	// ProviderConfigGroup holds the namespaced ProviderConfig (and the cluster-scoped
	// ClusterProviderConfig, which kubeopera does not use).
	ProviderConfigGroup = "opentelekomcloud.m.crossplane.io"

	// ManagedVersion is the version of every managed resource kind here.
	ManagedVersion = "v1alpha1"
	// ProviderConfigVersion is the ProviderConfig's version.
	ProviderConfigVersion = "v1beta1"

	KindVPC            = "VpcV1"
	KindSubnet         = "SubnetV1"
	KindEIP            = "EIPV1"
	KindCluster        = "ClusterV3"
	KindNodePool       = "NodePoolV3"
	KindProviderConfig = "ProviderConfig"
)

// GroupVersionKinds of the built objects.
var (
	VPCGVK            = schema.GroupVersionKind{Group: VPCGroup, Version: ManagedVersion, Kind: KindVPC}
	SubnetGVK         = schema.GroupVersionKind{Group: VPCGroup, Version: ManagedVersion, Kind: KindSubnet}
	EIPGVK            = schema.GroupVersionKind{Group: VPCGroup, Version: ManagedVersion, Kind: KindEIP}
	ClusterGVK        = schema.GroupVersionKind{Group: CCEGroup, Version: ManagedVersion, Kind: KindCluster}
	NodePoolGVK       = schema.GroupVersionKind{Group: CCEGroup, Version: ManagedVersion, Kind: KindNodePool}
	ProviderConfigGVK = schema.GroupVersionKind{Group: ProviderConfigGroup, Version: ProviderConfigVersion, Kind: KindProviderConfig}
)

// GroupVersionResources of the built objects (plurals as in the provider's CRDs).
var (
	VPCGVR            = schema.GroupVersionResource{Group: VPCGroup, Version: ManagedVersion, Resource: "vpcv1s"}
	SubnetGVR         = schema.GroupVersionResource{Group: VPCGroup, Version: ManagedVersion, Resource: "subnetv1s"}
	EIPGVR            = schema.GroupVersionResource{Group: VPCGroup, Version: ManagedVersion, Resource: "eipv1s"}
	ClusterGVR        = schema.GroupVersionResource{Group: CCEGroup, Version: ManagedVersion, Resource: "clusterv3s"}
	NodePoolGVR       = schema.GroupVersionResource{Group: CCEGroup, Version: ManagedVersion, Resource: "nodepoolv3s"}
	ProviderConfigGVR = schema.GroupVersionResource{Group: ProviderConfigGroup, Version: ProviderConfigVersion, Resource: "providerconfigs"}
)
