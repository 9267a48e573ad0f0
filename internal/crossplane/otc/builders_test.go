package otc

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const ns = "kcp-d37f1981a6be"

var labels = map[string]string{"kubeopera.io/workspace-fingerprint": "d37f1981a6be"}

func ptr[T any](v T) *T { return &v }

func meta(gvk schema.GroupVersionKind, name string) map[string]any {
	return map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata": map[string]any{
			"name": name, "namespace": ns,
			"labels": map[string]any{"kubeopera.io/workspace-fingerprint": "d37f1981a6be"},
		},
	}
}

func withSpec(m map[string]any, spec map[string]any) map[string]any {
	m["spec"] = spec
	return m
}

var pcRef = map[string]any{"kind": "ProviderConfig", "name": "otc"}

func TestBuilders(t *testing.T) {
	cases := map[string]struct {
		reason string
		got    *unstructured.Unstructured
		want   map[string]any
	}{
		"VPC": {
			reason: "A VPC carries its OTC name, CIDR and region and uses the namespaced ProviderConfig.",
			got: VPC(VPCParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				CloudName: "kcp-d37f-kc-web", CIDR: "192.168.0.0/16", Region: "eu-de",
			}),
			want: withSpec(meta(VPCGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider":       map[string]any{"name": "kcp-d37f-kc-web", "cidr": "192.168.0.0/16", "region": "eu-de"},
			}),
		},
		"VPCNameDefaultsToObjectName": {
			reason: "Without a CloudName the OTC name is the object's name; no region means the credentials' region.",
			got:    VPC(VPCParams{Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc", CIDR: "10.0.0.0/16"}),
			want: withSpec(meta(VPCGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider":       map[string]any{"name": "kc-web", "cidr": "10.0.0.0/16"},
			}),
		},
		"SubnetInOurVPC": {
			reason: "A subnet in our VPC references the VpcV1 by name in the same namespace.",
			got: Subnet(SubnetParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				CIDR: "192.168.0.0/24", GatewayIP: "192.168.0.1", VPCName: "kc-web", VPCID: "",
			}),
			want: withSpec(meta(SubnetGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider": map[string]any{
					"name": "kc-web", "cidr": "192.168.0.0/24", "gatewayIp": "192.168.0.1",
					"vpcIdRef": map[string]any{"name": "kc-web"},
				},
			}),
		},
		"SubnetInTenantVPC": {
			reason: "A tenant's vpcID is written literally and wins over a VPC name.",
			got: Subnet(SubnetParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				CIDR: "10.1.0.0/24", GatewayIP: "10.1.0.1", VPCID: "vpc-123", VPCName: "ignored", Region: "eu-nl",
			}),
			want: withSpec(meta(SubnetGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider": map[string]any{
					"name": "kc-web", "cidr": "10.1.0.0/24", "gatewayIp": "10.1.0.1", "vpcId": "vpc-123", "region": "eu-nl",
				},
			}),
		},
		"ClusterInOurNetwork": {
			reason: "A cluster in our network references the VpcV1 and SubnetV1; defaults fill type, flavor and network type; the version is v<major>.<minor>.",
			got: Cluster(ClusterParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				CloudName: "kcp-d37f-kc-web", KubernetesVersion: "1.28.0", VPCName: "kc-web-vpc", SubnetName: "kc-web-subnet",
				ConnectionSecretName: "kc-web-conn",
			}),
			want: withSpec(meta(ClusterGVK, "kc-web"), map[string]any{
				"providerConfigRef":          pcRef,
				"writeConnectionSecretToRef": map[string]any{"name": "kc-web-conn"},
				"forProvider": map[string]any{
					"name": "kcp-d37f-kc-web", "clusterType": "VirtualMachine", "flavorId": "cce.s1.small",
					"containerNetworkType": "overlay_l2", "clusterVersion": "v1.28",
					"vpcIdRef": map[string]any{"name": "kc-web-vpc"}, "subnetIdRef": map[string]any{"name": "kc-web-subnet"},
				},
			}),
		},
		"PublicCluster": {
			reason: "A cluster with a public endpoint references its EIPV1 by name; the provider resolves it into eip, the address CCE binds.",
			got: Cluster(ClusterParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				VPCName: "kc-web-vpc", SubnetName: "kc-web-subnet", EIPName: "kc-web-eip",
			}),
			want: withSpec(meta(ClusterGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider": map[string]any{
					"name": "kc-web", "clusterType": "VirtualMachine", "flavorId": "cce.s1.small", "containerNetworkType": "overlay_l2",
					"vpcIdRef": map[string]any{"name": "kc-web-vpc"}, "subnetIdRef": map[string]any{"name": "kc-web-subnet"},
					"eipRef": map[string]any{"name": "kc-web-eip"},
				},
			}),
		},
		"EIP": {
			reason: "An elastic IP is a dynamic BGP address with an exclusive bandwidth of the size asked, charged by traffic, named after the object.",
			got:    EIP(EIPParams{Object: Object{Name: "kc-web-eip", Namespace: ns, Labels: labels}, ProviderConfigName: "otc", BandwidthMbit: 5, Region: "eu-de"}),
			want: withSpec(meta(EIPGVK, "kc-web-eip"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider": map[string]any{
					"publicip":  []any{map[string]any{"type": "5_bgp"}},
					"bandwidth": []any{map[string]any{"name": "kc-web-eip", "size": int64(5), "shareType": "PER", "chargeMode": "traffic"}},
					"region":    "eu-de",
				},
			}),
		},
		"ClusterInTenantNetwork": {
			reason: "A tenant's vpcID and subnetID are written literally; every optional input lands in its field.",
			got: Cluster(ClusterParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				KubernetesVersion: "v1.29", ClusterType: "BareMetal", FlavorID: "cce.s2.small", ContainerNetworkType: "vpc-router",
				ContainerNetworkCIDR: "172.16.0.0/16", ServiceCIDR: "10.247.0.0/16", AuthenticationMode: "rbac",
				AvailabilityZone: "eu-de-01", VPCID: "vpc-1", VPCName: "ignored", SubnetID: "net-1", SubnetName: "ignored",
				HighwaySubnetID: "hw-1", DeleteAllNetwork: "true", DeleteAllStorage: "try", Region: "eu-de", Description: "web",
			}),
			want: withSpec(meta(ClusterGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider": map[string]any{
					"name": "kc-web", "clusterType": "BareMetal", "flavorId": "cce.s2.small", "containerNetworkType": "vpc-router",
					"clusterVersion": "v1.29", "vpcId": "vpc-1", "subnetId": "net-1", "region": "eu-de",
					"containerNetworkCidr": "172.16.0.0/16", "kubernetesSvcIpRange": "10.247.0.0/16", "authenticationMode": "rbac",
					"highwaySubnetId": "hw-1", "deleteAllNetwork": "true", "deleteAllStorage": "try", "description": "web",
					"masters": []any{map[string]any{"availabilityZone": "eu-de-01"}},
				},
			}),
		},
		"ClusterTenantVPCOurSubnet": {
			reason: "A tenant VPC with our subnet: literal vpcId, subnetIdRef.",
			got: Cluster(ClusterParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				VPCID: "vpc-1", SubnetName: "kc-web",
			}),
			want: withSpec(meta(ClusterGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider": map[string]any{
					"name": "kc-web", "clusterType": "VirtualMachine", "flavorId": "cce.s1.small", "containerNetworkType": "overlay_l2",
					"vpcId": "vpc-1", "subnetIdRef": map[string]any{"name": "kc-web"},
				},
			}),
		},
		"NodePool": {
			reason: "A node pool has the literal cluster id and key pair, the node count, and the disk size in GiB.",
			got: NodePool(NodePoolParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				CloudName: "kc-web-workers", ClusterID: "4f2b-cluster", Flavor: "s3.xlarge.4", NodeCount: 3,
				AvailabilityZone: "eu-de-02", KeyPair: "ops", OS: "EulerOS 2.9", Runtime: "containerd",
				DiskSize: ptr(resource.MustParse("200Gi")), RootVolumeGiB: 60, VolumeType: "GPSSD",
				NodeLabels: map[string]string{"pool": "workers"},
			}),
			want: withSpec(meta(NodePoolGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider": map[string]any{
					"name": "kc-web-workers", "clusterId": "4f2b-cluster", "flavor": "s3.xlarge.4", "initialNodeCount": int64(3),
					"availabilityZone": "eu-de-02", "keyPair": "ops", "os": "EulerOS 2.9", "runtime": "containerd",
					"rootVolume":  []any{map[string]any{"size": int64(60), "volumetype": "GPSSD"}},
					"dataVolumes": []any{map[string]any{"size": int64(200), "volumetype": "GPSSD"}},
					"k8sTags":     map[string]any{"pool": "workers"},
				},
			}),
		},
		"NodePoolDefaults": {
			reason: "Without a zone the pool is placed at random; without a disk size the data volume is 100 GiB; volumes are SSD.",
			got: NodePool(NodePoolParams{
				Object: Object{Name: "kc-web", Namespace: ns, Labels: labels}, ProviderConfigName: "otc",
				ClusterID: "4f2b-cluster", Flavor: "c4.xlarge.4", NodeCount: 1,
			}),
			want: withSpec(meta(NodePoolGVK, "kc-web"), map[string]any{
				"providerConfigRef": pcRef,
				"forProvider": map[string]any{
					"name": "kc-web", "clusterId": "4f2b-cluster", "flavor": "c4.xlarge.4", "initialNodeCount": int64(1),
					"availabilityZone": "random",
					"rootVolume":       []any{map[string]any{"size": int64(50), "volumetype": "SSD"}},
					"dataVolumes":      []any{map[string]any{"size": int64(100), "volumetype": "SSD"}},
				},
			}),
		},
		"ProviderConfig": {
			reason: "The ProviderConfig reads the credentials Secret in its own namespace, key credentials by default.",
			got: ProviderConfig(ProviderConfigParams{
				Object: Object{Name: "otc", Namespace: ns, Labels: labels}, SecretName: "kc-web-otc-credentials",
			}),
			want: withSpec(meta(ProviderConfigGVK, "otc"), map[string]any{
				"credentials": map[string]any{
					"source":    "Secret",
					"secretRef": map[string]any{"name": "kc-web-otc-credentials", "namespace": ns, "key": "credentials"},
				},
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got.Object); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			// The object must survive a deep copy: every value is a JSON type.
			_ = tc.got.DeepCopy()
		})
	}
}

func TestNodePoolNeverWritesReferences(t *testing.T) {
	u := NodePool(NodePoolParams{Object: Object{Name: "p", Namespace: ns}, ClusterID: "c", Flavor: "f", NodeCount: 1, KeyPair: "k"})
	fp, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider")
	for _, f := range []string{"clusterIdRef", "clusterIdSelector", "keyPairRef", "keyPairSelector", "subnetIdRef"} {
		if _, ok := fp[f]; ok {
			t.Errorf("NodePoolV3 has %s: a reference can deadlock deletion", f)
		}
	}
}

func TestLabelsAreCopied(t *testing.T) {
	in := map[string]string{"a": "b"}
	u := VPC(VPCParams{Object: Object{Name: "v", Namespace: ns, Labels: in}})
	in["a"] = "changed"
	if got := u.GetLabels()["a"]; got != "b" {
		t.Errorf("label a = %q after the caller changed its map, want b", got)
	}
}

func TestClusterVersion(t *testing.T) {
	cases := map[string]string{"1.28.0": "v1.28", "v1.29": "v1.29", "1.30": "v1.30", "v1.27.4": "v1.27", "latest": "vlatest"}
	for in, want := range cases {
		if got := ClusterVersion(in); got != want {
			t.Errorf("ClusterVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDiskSizeGiB(t *testing.T) {
	cases := map[string]int64{"100Gi": 100, "100G": 94, "1": 1, "1Ti": 1024, "0": 0, "1.5Gi": 2}
	for in, want := range cases {
		if got := DiskSizeGiB(resource.MustParse(in)); got != want {
			t.Errorf("DiskSizeGiB(%s) = %d, want %d", in, got, want)
		}
	}
}

func TestGatewayIP(t *testing.T) {
	cases := map[string]struct {
		want    string
		wantErr bool
	}{
		"192.168.0.0/24": {want: "192.168.0.1"},
		"10.0.16.0/20":   {want: "10.0.16.1"},
		"10.0.16.7/20":   {want: "10.0.16.1"},
		"10.0.0.0/31":    {wantErr: true},
		"fd00::/64":      {wantErr: true},
		"nonsense":       {wantErr: true},
	}
	for in, tc := range cases {
		got, err := GatewayIP(in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("GatewayIP(%q) = %q, %v; want %q, error %v", in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestAtProviderID(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	if _, ok := AtProviderID(u); ok {
		t.Error("AtProviderID found an id on an object without status")
	}
	_ = unstructured.SetNestedField(u.Object, "4f2b", "status", "atProvider", "id")
	if id, ok := AtProviderID(u); !ok || id != "4f2b" {
		t.Errorf("AtProviderID = %q, %v; want 4f2b, true", id, ok)
	}
}
