package otc

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Defaults the builders apply when the corresponding input is empty.
const (
	// DefaultClusterType is ClusterV3 forProvider.clusterType (VirtualMachine or BareMetal).
	DefaultClusterType = "VirtualMachine"
	// DefaultClusterFlavor is ClusterV3 forProvider.flavorId: CCE's smallest control plane
	// (one master, up to 50 nodes).
	DefaultClusterFlavor = "cce.s1.small"
	// DefaultContainerNetworkType is ClusterV3 forProvider.containerNetworkType.
	DefaultContainerNetworkType = "overlay_l2"
	// DefaultNodeAvailabilityZone is NodePoolV3 forProvider.availabilityZone: OTC places the
	// nodes in any zone with capacity (the provider's own default, written out explicitly).
	DefaultNodeAvailabilityZone = "random"
	// DefaultRootVolumeGiB is the size of NodePoolV3 forProvider.rootVolume[0] (OTC's minimum is 40).
	DefaultRootVolumeGiB int64 = 50
	// DefaultDataVolumeGiB is the size of NodePoolV3 forProvider.dataVolumes[0] when the
	// KubernetesCluster has no nodeDiskSize (OTC's minimum is 100).
	DefaultDataVolumeGiB int64 = 100
	// DefaultVolumeType is the EVS disk type of the node pool's volumes.
	DefaultVolumeType = "SSD"
	// DefaultEIPType is EIPV1 forProvider.publicip[0].type: OTC's dynamic BGP address (the
	// provider's example, examples-generated/namespaced/vpc/v1alpha1/eipv1.yaml).
	DefaultEIPType = "5_bgp"
	// BandwidthShareType is EIPV1 forProvider.bandwidth[0].shareType: an exclusive ("PER")
	// bandwidth for the one address.
	BandwidthShareType = "PER"
	// BandwidthChargeMode is EIPV1 forProvider.bandwidth[0].chargeMode: charged by traffic, so an
	// idle API endpoint costs little.
	BandwidthChargeMode = "traffic"
	// DefaultCredentialsKey is the key of the credentials Secret the ProviderConfig reads (the
	// seed's ProviderConfig example uses this key).
	DefaultCredentialsKey = "credentials"

	// providerConfigKind is spec.providerConfigRef.kind: always the namespaced ProviderConfig,
	// never the schema default ClusterProviderConfig.
	providerConfigKind = KindProviderConfig
)

// Object says where a built object lives. The controller derives every field.
type Object struct {
	// Name is metadata.name.
	Name string
	// Namespace is metadata.namespace: the workspace's backend namespace kcp-<fp>. References
	// between built objects (vpcIdRef, subnetIdRef, providerConfigRef, the credentials Secret)
	// all point into this namespace.
	Namespace string
	// Labels are copied onto metadata.labels (e.g. the workspace fingerprint and the owning
	// KubernetesCluster), so the controller can list what it wrote.
	Labels map[string]string
}

// VPCParams are the inputs of VPC. Only built when the KubernetesCluster has no spec.vpcID.
type VPCParams struct {
	Object
	// ProviderConfigName -> spec.providerConfigRef {kind: ProviderConfig, name}.
	ProviderConfigName string
	// CloudName -> spec.forProvider.name, the VPC's name in OTC (at most 64 letters, digits, _
	// and -). Empty: Name.
	CloudName string
	// CIDR -> spec.forProvider.cidr, e.g. 192.168.0.0/16.
	CIDR string
	// Region -> spec.forProvider.region (KubernetesCluster spec.region); empty: omitted, the
	// region of the credentials.
	Region string
	// Description -> spec.forProvider.description; empty: omitted.
	Description string
}

// SubnetParams are the inputs of Subnet. Only built when the KubernetesCluster has no
// spec.subnetID.
type SubnetParams struct {
	Object
	// ProviderConfigName -> spec.providerConfigRef {kind: ProviderConfig, name}.
	ProviderConfigName string
	// CloudName -> spec.forProvider.name, the subnet's name in OTC. Empty: Name.
	CloudName string
	// CIDR -> spec.forProvider.cidr; inside the VPC's CIDR, mask at most /28.
	CIDR string
	// GatewayIP -> spec.forProvider.gatewayIp; an address inside CIDR (see GatewayIP).
	GatewayIP string
	// VPCID -> spec.forProvider.vpcId, literally: the tenant's KubernetesCluster spec.vpcID.
	// When set, VPCName is ignored.
	VPCID string
	// VPCName -> spec.forProvider.vpcIdRef.name: the VpcV1 built by VPC, in the same namespace
	// (no vpcIdRef.namespace is written). Used when VPCID is empty.
	VPCName string
	// Region -> spec.forProvider.region; empty: omitted.
	Region string
	// Description -> spec.forProvider.description; empty: omitted.
	Description string
}

// EIPParams are the inputs of EIP: an elastic IP for a cluster's public endpoint.
type EIPParams struct {
	Object
	// ProviderConfigName -> spec.providerConfigRef {kind: ProviderConfig, name}.
	ProviderConfigName string
	// BandwidthName -> spec.forProvider.bandwidth[0].name (1 to 64 letters, digits, _ and -).
	// Empty: Name.
	BandwidthName string
	// BandwidthMbit -> spec.forProvider.bandwidth[0].size, in Mbit/s (OTC: 1 to 300).
	BandwidthMbit int64
	// Type -> spec.forProvider.publicip[0].type; empty: DefaultEIPType.
	Type string
	// Region -> spec.forProvider.region; empty: omitted.
	Region string
}

// ClusterParams are the inputs of Cluster.
type ClusterParams struct {
	Object
	// ProviderConfigName -> spec.providerConfigRef {kind: ProviderConfig, name}.
	ProviderConfigName string
	// CloudName -> spec.forProvider.name, the CCE cluster's name. Empty: Name.
	CloudName string
	// Region -> spec.forProvider.region (KubernetesCluster spec.region); empty: omitted.
	Region string
	// KubernetesVersion is KubernetesCluster spec.kubernetes.version (e.g. 1.28.0) ->
	// spec.forProvider.clusterVersion as v<major>.<minor> (see ClusterVersion); empty: omitted,
	// CCE's latest version.
	KubernetesVersion string
	// ClusterType -> spec.forProvider.clusterType; empty: DefaultClusterType.
	ClusterType string
	// FlavorID -> spec.forProvider.flavorId, the control plane's size; empty: DefaultClusterFlavor.
	// (The KubernetesCluster's node flavor is the node pool's, not this.)
	FlavorID string
	// ContainerNetworkType -> spec.forProvider.containerNetworkType; empty:
	// DefaultContainerNetworkType.
	ContainerNetworkType string
	// ContainerNetworkCIDR -> spec.forProvider.containerNetworkCidr; empty: omitted (CCE picks).
	ContainerNetworkCIDR string
	// ServiceCIDR -> spec.forProvider.kubernetesSvcIpRange; empty: omitted (CCE picks).
	ServiceCIDR string
	// AuthenticationMode -> spec.forProvider.authenticationMode; empty: omitted (CCE: rbac).
	AuthenticationMode string
	// AvailabilityZone is KubernetesCluster spec.availableZone -> spec.forProvider.masters[0]
	// .availabilityZone; empty: masters omitted (CCE picks).
	AvailabilityZone string
	// VPCID -> spec.forProvider.vpcId, literally: the tenant's spec.vpcID. When set, VPCName is
	// ignored.
	VPCID string
	// VPCName -> spec.forProvider.vpcIdRef.name: our VpcV1 in the same namespace. Used when
	// VPCID is empty.
	VPCName string
	// SubnetID -> spec.forProvider.subnetId, literally: the tenant's spec.subnetID, which must be
	// the subnet's network ID (OTC's subnet id). When set, SubnetName is ignored.
	SubnetID string
	// SubnetName -> spec.forProvider.subnetIdRef.name: our SubnetV1 in the same namespace, whose
	// status.atProvider.networkId the provider copies into subnetId. Used when SubnetID is empty.
	SubnetName string
	// EIPName -> spec.forProvider.eipRef.name: our EIPV1 in the same namespace, whose observed
	// address (status.atProvider.publicip[0].ipAddress) the provider copies into eip; CCE binds
	// it to the API server, which then has a public endpoint. Empty: no eip, a private endpoint
	// only.
	EIPName string
	// HighwaySubnetID -> spec.forProvider.highwaySubnetId (bare-metal clusters); empty: omitted.
	HighwaySubnetID string
	// DeleteAllNetwork and DeleteAllStorage -> spec.forProvider.deleteAllNetwork /
	// deleteAllStorage: "true", "try" or "false", whether deleting the cluster deletes the load
	// balancers / volumes its workloads created; empty: omitted (OTC: false).
	DeleteAllNetwork string
	DeleteAllStorage string
	// Description -> spec.forProvider.description; empty: omitted.
	Description string
	// ConnectionSecretName -> spec.writeConnectionSecretToRef.name, a Secret in the same
	// namespace; empty: omitted.
	ConnectionSecretName string
}

// NodePoolParams are the inputs of NodePool. Nothing here is a reference: the cluster id and
// the key pair are written literally, because Crossplane does not resolve references while
// deleting, and a node pool whose reference cannot be resolved can never be deleted.
type NodePoolParams struct {
	Object
	// ProviderConfigName -> spec.providerConfigRef {kind: ProviderConfig, name}.
	ProviderConfigName string
	// CloudName -> spec.forProvider.name, the node pool's name in CCE. Empty: Name.
	CloudName string
	// ClusterID -> spec.forProvider.clusterId: the ClusterV3's status.atProvider.id (see
	// AtProviderID). Never clusterIdRef.
	ClusterID string
	// Flavor -> spec.forProvider.flavor: KubernetesCluster spec.nodeFlavor, or the flavor of the
	// ProviderMachineFlavor matched from spec.machineCapabilitiesRef.
	Flavor string
	// NodeCount is KubernetesCluster spec.nodeCount -> spec.forProvider.initialNodeCount.
	NodeCount int32
	// AvailabilityZone is KubernetesCluster spec.nodeAvailableZone ->
	// spec.forProvider.availabilityZone; "random" lets OTC pick a zone with capacity; empty:
	// DefaultNodeAvailabilityZone.
	AvailabilityZone string
	// KeyPair is KubernetesCluster spec.keyPair -> spec.forProvider.keyPair, literally (never
	// keyPairRef); empty: omitted (CCE then has no way to log in: the password alternative is
	// not supported by the provider).
	KeyPair string
	// OS -> spec.forProvider.os, e.g. "EulerOS 2.9"; empty: omitted (CCE's default).
	OS string
	// Runtime -> spec.forProvider.runtime, docker or containerd; empty: omitted.
	Runtime string
	// DiskSize is KubernetesCluster spec.nodeDiskSize -> spec.forProvider.dataVolumes[0].size in
	// GiB, rounded up (see DiskSizeGiB); nil or not positive: DefaultDataVolumeGiB.
	DiskSize *resource.Quantity
	// RootVolumeGiB -> spec.forProvider.rootVolume[0].size; 0: DefaultRootVolumeGiB.
	RootVolumeGiB int64
	// VolumeType -> volumetype of rootVolume[0] and dataVolumes[0]; empty: DefaultVolumeType.
	VolumeType string
	// NodeLabels -> spec.forProvider.k8sTags, Kubernetes labels on the nodes; empty: omitted.
	NodeLabels map[string]string
}

// ProviderConfigParams are the inputs of ProviderConfig.
type ProviderConfigParams struct {
	Object
	// SecretName -> spec.credentials.secretRef.name: the credentials Secret the controller
	// copied from the tenant's workspace into Namespace.
	SecretName string
	// SecretKey -> spec.credentials.secretRef.key; empty: DefaultCredentialsKey. The value must
	// be a JSON object of strings (see the package documentation).
	SecretKey string
}

// VPC builds a VpcV1: a VPC for a cluster whose tenant gave no vpcID.
func VPC(p VPCParams) *unstructured.Unstructured {
	fp := map[string]any{
		"name": orDefault(p.CloudName, p.Name),
		"cidr": p.CIDR,
	}
	setIf(fp, "region", p.Region)
	setIf(fp, "description", p.Description)
	return managed(VPCGVK, p.Object, p.ProviderConfigName, fp, "")
}

// Subnet builds a SubnetV1 in our VpcV1 (vpcIdRef by name, same namespace) or, when the tenant
// gave only a vpcID, in the tenant's VPC (literal vpcId).
func Subnet(p SubnetParams) *unstructured.Unstructured {
	fp := map[string]any{
		"name":      orDefault(p.CloudName, p.Name),
		"cidr":      p.CIDR,
		"gatewayIp": p.GatewayIP,
	}
	setIDOrRef(fp, "vpcId", p.VPCID, p.VPCName)
	setIf(fp, "region", p.Region)
	setIf(fp, "description", p.Description)
	return managed(SubnetGVK, p.Object, p.ProviderConfigName, fp, "")
}

// EIP builds an EIPV1: an unbound elastic IP with an exclusive bandwidth charged by traffic, for
// a ClusterV3 to bind (ClusterParams.EIPName).
func EIP(p EIPParams) *unstructured.Unstructured {
	fp := map[string]any{
		"publicip": []any{map[string]any{"type": orDefault(p.Type, DefaultEIPType)}},
		"bandwidth": []any{map[string]any{
			"name":       orDefault(p.BandwidthName, p.Name),
			"size":       p.BandwidthMbit,
			"shareType":  BandwidthShareType,
			"chargeMode": BandwidthChargeMode,
		}},
	}
	setIf(fp, "region", p.Region)
	return managed(EIPGVK, p.Object, p.ProviderConfigName, fp, "")
}

// Cluster builds a ClusterV3: the CCE control plane, in our network (vpcIdRef / subnetIdRef)
// or in the tenant's (literal vpcId / subnetId), each chosen on its own.
func Cluster(p ClusterParams) *unstructured.Unstructured {
	fp := map[string]any{
		"name":                 orDefault(p.CloudName, p.Name),
		"clusterType":          orDefault(p.ClusterType, DefaultClusterType),
		"flavorId":             orDefault(p.FlavorID, DefaultClusterFlavor),
		"containerNetworkType": orDefault(p.ContainerNetworkType, DefaultContainerNetworkType),
	}
	if p.KubernetesVersion != "" {
		fp["clusterVersion"] = ClusterVersion(p.KubernetesVersion)
	}
	setIDOrRef(fp, "vpcId", p.VPCID, p.VPCName)
	setIDOrRef(fp, "subnetId", p.SubnetID, p.SubnetName)
	setIDOrRef(fp, "eip", "", p.EIPName)
	setIf(fp, "region", p.Region)
	setIf(fp, "containerNetworkCidr", p.ContainerNetworkCIDR)
	setIf(fp, "kubernetesSvcIpRange", p.ServiceCIDR)
	setIf(fp, "authenticationMode", p.AuthenticationMode)
	setIf(fp, "highwaySubnetId", p.HighwaySubnetID)
	setIf(fp, "deleteAllNetwork", p.DeleteAllNetwork)
	setIf(fp, "deleteAllStorage", p.DeleteAllStorage)
	setIf(fp, "description", p.Description)
	if p.AvailabilityZone != "" {
		fp["masters"] = []any{map[string]any{"availabilityZone": p.AvailabilityZone}}
	}
	return managed(ClusterGVK, p.Object, p.ProviderConfigName, fp, p.ConnectionSecretName)
}

// NodePool builds a NodePoolV3: the workers, bound to the cluster by its literal id.
func NodePool(p NodePoolParams) *unstructured.Unstructured {
	volumeType := orDefault(p.VolumeType, DefaultVolumeType)
	rootGiB := p.RootVolumeGiB
	if rootGiB <= 0 {
		rootGiB = DefaultRootVolumeGiB
	}
	dataGiB := DefaultDataVolumeGiB
	if p.DiskSize != nil && p.DiskSize.Sign() > 0 {
		dataGiB = DiskSizeGiB(*p.DiskSize)
	}
	fp := map[string]any{
		"name":             orDefault(p.CloudName, p.Name),
		"clusterId":        p.ClusterID,
		"flavor":           p.Flavor,
		"initialNodeCount": int64(p.NodeCount),
		"availabilityZone": orDefault(p.AvailabilityZone, DefaultNodeAvailabilityZone),
		"rootVolume":       []any{map[string]any{"size": rootGiB, "volumetype": volumeType}},
		"dataVolumes":      []any{map[string]any{"size": dataGiB, "volumetype": volumeType}},
	}
	setIf(fp, "keyPair", p.KeyPair)
	setIf(fp, "os", p.OS)
	setIf(fp, "runtime", p.Runtime)
	if len(p.NodeLabels) > 0 {
		fp["k8sTags"] = stringMap(p.NodeLabels)
	}
	return managed(NodePoolGVK, p.Object, p.ProviderConfigName, fp, "")
}

// ProviderConfig builds the provider's namespaced ProviderConfig reading the credentials from a
// Secret in its own namespace. secretRef.namespace is required by the schema; the provider
// ignores it and reads the Secret from each managed resource's namespace, which is the same.
func ProviderConfig(p ProviderConfigParams) *unstructured.Unstructured {
	u := object(ProviderConfigGVK, p.Object)
	u.Object["spec"] = map[string]any{
		"credentials": map[string]any{
			"source": "Secret",
			"secretRef": map[string]any{
				"name":      p.SecretName,
				"namespace": p.Namespace,
				"key":       orDefault(p.SecretKey, DefaultCredentialsKey),
			},
		},
	}
	return u
}

// ClusterVersion maps a KubernetesCluster spec.kubernetes.version (1.28.0, v1.28, 1.28) to the
// CCE clusterVersion form v<major>.<minor> (v1.28): CCE versions are minor releases, and the
// patch level is CCE's choice. A value that is not dotted numbers is returned with a v prefix.
func ClusterVersion(version string) string {
	v := strings.TrimPrefix(version, "v")
	parts := strings.Split(v, ".")
	if len(parts) >= 2 {
		v = parts[0] + "." + parts[1]
	}
	return "v" + v
}

// DiskSizeGiB is q in GiB, rounded up: 100Gi is 100, 100G (decimal) is 94, 1 byte is 1.
// OTC's "GB" disk sizes are binary gigabytes.
func DiskSizeGiB(q resource.Quantity) int64 {
	const gib = int64(1) << 30
	bytes := q.Value() // rounded up to a whole byte
	if bytes <= 0 {
		return 0
	}
	return (bytes + gib - 1) / gib
}

// GatewayIP is the first host address of an IPv4 CIDR (192.168.0.0/24 -> 192.168.0.1), the
// gateway OTC suggests for a subnet.
func GatewayIP(cidr string) (string, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("failed to parse subnet CIDR %q: %w", cidr, err)
	}
	if !prefix.Addr().Is4() || prefix.Bits() > 30 {
		return "", fmt.Errorf("subnet CIDR %q is not an IPv4 prefix with room for a gateway", cidr)
	}
	return prefix.Masked().Addr().Next().String(), nil
}

// AtProviderID reads status.atProvider.id, the cloud id the provider observed (e.g. a
// ClusterV3's cluster id for NodePoolParams.ClusterID); false while there is none.
func AtProviderID(u *unstructured.Unstructured) (string, bool) {
	id, found, err := unstructured.NestedString(u.Object, "status", "atProvider", "id")
	if err != nil || !found || id == "" {
		return "", false
	}
	return id, true
}

// managed builds a managed resource with spec.forProvider, spec.providerConfigRef and, when
// secretName is set, spec.writeConnectionSecretToRef. spec.managementPolicies is left to its
// schema default ["*"].
func managed(gvk schema.GroupVersionKind, o Object, providerConfig string, forProvider map[string]any, secretName string) *unstructured.Unstructured {
	u := object(gvk, o)
	spec := map[string]any{
		"forProvider": forProvider,
		"providerConfigRef": map[string]any{
			"kind": providerConfigKind,
			"name": providerConfig,
		},
	}
	if secretName != "" {
		spec["writeConnectionSecretToRef"] = map[string]any{"name": secretName}
	}
	u.Object["spec"] = spec
	return u
}

func object(gvk schema.GroupVersionKind, o Object) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetName(o.Name)
	u.SetNamespace(o.Namespace)
	if len(o.Labels) > 0 {
		u.SetLabels(o.Labels) // SetLabels copies the map
	}
	return u
}

// setIDOrRef writes the literal <field> when id is set, else <field>Ref {name} (same namespace)
// when refName is set, else nothing.
func setIDOrRef(fp map[string]any, field, id, refName string) {
	switch {
	case id != "":
		fp[field] = id
	case refName != "":
		fp[field+"Ref"] = map[string]any{"name": refName}
	}
}

func setIf(m map[string]any, key, value string) {
	if value != "" {
		m[key] = value
	}
}

func orDefault(value, def string) string {
	if value == "" {
		return def
	}
	return value
}

func stringMap(in map[string]string) map[string]any {
	out := make(map[string]any, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
