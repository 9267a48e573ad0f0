package otc_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/test/framework"
)

// TestBuiltObjectsOnAPIServer creates every built object on a real kube-apiserver carrying the
// provider's CRDs (trimmed copies in test/fixtures/crossplane/otc) and checks the server
// accepted each (schema and CEL rules) and stored every field: nothing pruned, nothing changed
// but the schema default of spec.managementPolicies.
func TestBuiltObjectsOnAPIServer(t *testing.T) {
	cluster := framework.StartCluster(t, framework.ClusterOptions{
		CRDDirectoryPaths: []string{filepath.Join(framework.RepoRoot(), "test", "fixtures", "crossplane", "otc")},
	})
	c, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	newNamespace := func(t *testing.T, name string) string {
		t.Helper()
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatalf("failed to create namespace %s: %v", name, err)
		}
		return name
	}
	labels := map[string]string{"kubeopera.io/workspace-fingerprint": "d37f1981a6be"}
	disk := resource.MustParse("150Gi")

	cases := map[string]func(ns string) []*unstructured.Unstructured{
		"OurNetwork": func(ns string) []*unstructured.Unstructured {
			o := func(name string) otc.Object { return otc.Object{Name: name, Namespace: ns, Labels: labels} }
			return []*unstructured.Unstructured{
				otc.ProviderConfig(otc.ProviderConfigParams{Object: o("otc"), SecretName: "otc-credentials"}),
				otc.VPC(otc.VPCParams{Object: o("web-vpc"), ProviderConfigName: "otc", CloudName: "kcp-d37f-web", CIDR: "192.168.0.0/16", Region: "eu-de"}),
				otc.Subnet(otc.SubnetParams{Object: o("web-subnet"), ProviderConfigName: "otc", CIDR: "192.168.0.0/24", GatewayIP: "192.168.0.1", VPCName: "web-vpc", Region: "eu-de"}),
				otc.EIP(otc.EIPParams{Object: o("web-eip"), ProviderConfigName: "otc", BandwidthMbit: 5, Region: "eu-de"}),
				otc.Cluster(otc.ClusterParams{
					Object: o("web"), ProviderConfigName: "otc", KubernetesVersion: "1.28.0", VPCName: "web-vpc", SubnetName: "web-subnet",
					EIPName: "web-eip", AvailabilityZone: "eu-de-01", AuthenticationMode: "rbac", ContainerNetworkCIDR: "172.16.0.0/16", ServiceCIDR: "10.247.0.0/16",
					DeleteAllNetwork: "true", DeleteAllStorage: "true", Region: "eu-de", Description: "web", ConnectionSecretName: "web-conn",
				}),
				otc.NodePool(otc.NodePoolParams{
					Object: o("web-workers"), ProviderConfigName: "otc", ClusterID: "0b5c6e47-cce", Flavor: "s3.xlarge.4", NodeCount: 3,
					AvailabilityZone: "random", KeyPair: "ops", OS: "EulerOS 2.9", Runtime: "containerd", DiskSize: &disk,
					NodeLabels: map[string]string{"pool": "workers"},
				}),
			}
		},
		"TenantNetwork": func(ns string) []*unstructured.Unstructured {
			o := func(name string) otc.Object { return otc.Object{Name: name, Namespace: ns} }
			return []*unstructured.Unstructured{
				otc.ProviderConfig(otc.ProviderConfigParams{Object: o("otc"), SecretName: "otc-credentials", SecretKey: "otc.json"}),
				otc.Cluster(otc.ClusterParams{
					Object: o("web"), ProviderConfigName: "otc", KubernetesVersion: "v1.29", VPCID: "vpc-1", SubnetID: "net-1",
					ClusterType: "BareMetal", HighwaySubnetID: "hw-1", FlavorID: "cce.s2.small", ContainerNetworkType: "vpc-router",
				}),
				otc.NodePool(otc.NodePoolParams{Object: o("web-workers"), ProviderConfigName: "otc", ClusterID: "0b5c6e47-cce", Flavor: "c4.xlarge.4", NodeCount: 1}),
			}
		},
		"TenantVPCOurSubnet": func(ns string) []*unstructured.Unstructured {
			o := func(name string) otc.Object { return otc.Object{Name: name, Namespace: ns} }
			return []*unstructured.Unstructured{
				otc.Subnet(otc.SubnetParams{Object: o("web-subnet"), ProviderConfigName: "otc", CIDR: "10.1.0.0/24", GatewayIP: "10.1.0.1", VPCID: "vpc-1"}),
				otc.Cluster(otc.ClusterParams{Object: o("web"), ProviderConfigName: "otc", VPCID: "vpc-1", SubnetName: "web-subnet"}),
			}
		},
	}
	i := 0
	for name, build := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t, fmt.Sprintf("kcp-case-%d", i))
			for _, want := range build(ns) {
				created := want.DeepCopy()
				if err := c.Create(ctx, created); err != nil {
					t.Fatalf("the server refused %s %s: %v", want.GetKind(), want.GetName(), err)
				}
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(want.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want.GetLabels(), got.GetLabels()); diff != "" {
					t.Errorf("%s labels -built +stored:\n%s", want.GetKind(), diff)
				}
				gotSpec, _, _ := unstructured.NestedMap(got.Object, "spec")
				wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
				if want.GetKind() != otc.KindProviderConfig {
					// The only field the server may add: the schema default of managementPolicies.
					if mp, _, _ := unstructured.NestedStringSlice(gotSpec, "managementPolicies"); !cmp.Equal(mp, []string{"*"}) {
						t.Errorf("%s spec.managementPolicies = %v, want the default [*]", want.GetKind(), mp)
					}
					delete(gotSpec, "managementPolicies")
				}
				if diff := cmp.Diff(wantSpec, gotSpec); diff != "" {
					t.Errorf("%s %s: the server did not keep the built spec (-built +stored):\n%s", want.GetKind(), want.GetName(), diff)
				}
			}
		})
	}

	t.Run("ClusterIDFromStatus", func(t *testing.T) {
		// Plays the provider: writes status.atProvider.id on a ClusterV3, which AtProviderID reads
		// for the node pool's literal clusterId.
		ns := newNamespace(t, "kcp-status")
		cl := otc.Cluster(otc.ClusterParams{Object: otc.Object{Name: "web", Namespace: ns}, ProviderConfigName: "otc", VPCID: "vpc-1", SubnetID: "net-1"})
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if _, ok := otc.AtProviderID(cl); ok {
			t.Fatal("a new ClusterV3 has an id")
		}
		if err := unstructured.SetNestedField(cl.Object, "0b5c6e47-cce", "status", "atProvider", "id"); err != nil {
			t.Fatal(err)
		}
		if err := c.Status().Update(ctx, cl); err != nil {
			t.Fatal(err)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(otc.ClusterGVK)
		if err := c.Get(ctx, client.ObjectKeyFromObject(cl), got); err != nil {
			t.Fatal(err)
		}
		if id, ok := otc.AtProviderID(got); !ok || id != "0b5c6e47-cce" {
			t.Errorf("AtProviderID = %q, %v; want 0b5c6e47-cce", id, ok)
		}
	})

	t.Run("FixturesPruneUnknownFields", func(t *testing.T) {
		// The check above means something only if a field outside the schema is pruned: a
		// clusterIdRef (left out of the fixture on purpose) does not survive.
		ns := newNamespace(t, "kcp-prune")
		np := otc.NodePool(otc.NodePoolParams{Object: otc.Object{Name: "p", Namespace: ns}, ProviderConfigName: "otc", ClusterID: "c", Flavor: "f", NodeCount: 1})
		if err := unstructured.SetNestedField(np.Object, map[string]any{"name": "web"}, "spec", "forProvider", "clusterIdRef"); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, np); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := unstructured.NestedMap(np.Object, "spec", "forProvider", "clusterIdRef"); found {
			t.Error("clusterIdRef was kept: the fixture does not prune unknown fields")
		}
	})

	t.Run("CELRulesApply", func(t *testing.T) {
		// The provider's CEL rules are in the fixtures: a VpcV1 without a cidr is refused.
		ns := newNamespace(t, "kcp-cel")
		vpc := otc.VPC(otc.VPCParams{Object: otc.Object{Name: "v", Namespace: ns}, ProviderConfigName: "otc"})
		unstructured.RemoveNestedField(vpc.Object, "spec", "forProvider", "cidr")
		err := c.Create(ctx, vpc)
		if err == nil || !strings.Contains(err.Error(), "spec.forProvider.cidr is a required parameter") {
			t.Errorf("creating a VpcV1 without cidr: %v, want the CEL rule's message", err)
		}
	})
}
