package sim_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

func conditionOf(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

func TestCrossplaneOTC(t *testing.T) {
	backend := framework.StartCluster(t, framework.ClusterOptions{
		CRDDirectoryPaths: []string{filepath.Join(framework.RepoRoot(), "test/fixtures/crossplane/otc")},
	})
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(backend.Config)
	cs := kubernetes.NewForConfigOrDie(backend.Config)
	const ns = "kcp-d37f1981a6be"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	actor := &sim.CrossplaneOTC{
		Backend:    backend.Config,
		ReadyAfter: 1500 * time.Millisecond,
		SoldOut:    func(namespace, name string) bool { return namespace == ns && name == "workers-soldout" },
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- actor.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	get := func(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return u
	}
	create := func(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
		t.Helper()
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", u.GetName(), err)
		}
	}
	obj := otc.Object{Name: "net", Namespace: ns}

	// The subnet and the cluster come first: their references cannot resolve yet.
	create(otc.SubnetGVR, otc.Subnet(otc.SubnetParams{Object: obj, ProviderConfigName: "otc", CIDR: "192.168.0.0/24", GatewayIP: "192.168.0.1", VPCName: "net"}))
	create(otc.ClusterGVR, otc.Cluster(otc.ClusterParams{Object: otc.Object{Name: "c1", Namespace: ns}, ProviderConfigName: "otc",
		VPCName: "net", SubnetName: "net", ConnectionSecretName: "c1-conn"}))
	framework.Eventually(t, 20*time.Second, "subnet waits for its VPC", func() (bool, string) {
		u := get(otc.SubnetGVR, "net")
		s, r, m := conditionOf(u, "Synced")
		want := "cannot resolve references: mg.Spec.ForProvider.VPCID: cannot get referenced resource: "
		if s != "False" || r != "ReconcileError" || !strings.HasPrefix(m, want) {
			return false, fmt.Sprintf("Synced %s %s %q", s, r, m)
		}
		if slices.Contains(u.GetFinalizers(), sim.CrossplaneFinalizer) {
			return false, "finalizer added before references resolved"
		}
		return true, ""
	})

	create(otc.VPCGVR, otc.VPC(otc.VPCParams{Object: obj, ProviderConfigName: "otc", CIDR: "192.168.0.0/16"}))
	framework.Eventually(t, 20*time.Second, "VPC is Creating first", func() (bool, string) {
		u := get(otc.VPCGVR, "net")
		s, r, _ := conditionOf(u, "Ready")
		ss, sr, _ := conditionOf(u, "Synced")
		return s == "False" && r == "Creating" && ss == "True" && sr == "ReconcileSuccess" &&
			slices.Contains(u.GetFinalizers(), sim.CrossplaneFinalizer), fmt.Sprintf("Ready %s %s, Synced %s %s", s, r, ss, sr)
	})
	framework.Eventually(t, 20*time.Second, "subnet still waits, for the VPC's external name", func() (bool, string) {
		_, _, m := conditionOf(get(otc.SubnetGVR, "net"), "Synced")
		return strings.Contains(m, "referenced field was empty (referenced resource may not yet be ready)"), m
	})

	var vpcID, networkID string
	framework.Eventually(t, 30*time.Second, "VPC, subnet and cluster become Ready with ids wired", func() (bool, string) {
		vpc, subnet, cluster := get(otc.VPCGVR, "net"), get(otc.SubnetGVR, "net"), get(otc.ClusterGVR, "c1")
		for _, u := range []*unstructured.Unstructured{vpc, subnet, cluster} {
			if s, r, m := conditionOf(u, "Ready"); s != "True" || r != "Available" {
				return false, fmt.Sprintf("%s Ready %s %s %s", u.GetName(), s, r, m)
			}
		}
		vpcID, _ = otc.AtProviderID(vpc)
		networkID, _, _ = unstructured.NestedString(subnet.Object, "status", "atProvider", "networkId")
		subnetVPC, _, _ := unstructured.NestedString(subnet.Object, "spec", "forProvider", "vpcId")
		clusterVPC, _, _ := unstructured.NestedString(cluster.Object, "spec", "forProvider", "vpcId")
		clusterSubnet, _, _ := unstructured.NestedString(cluster.Object, "spec", "forProvider", "subnetId")
		ok := vpcID != "" && networkID != "" && subnetVPC == vpcID && clusterVPC == vpcID && clusterSubnet == networkID &&
			vpc.GetAnnotations()[sim.CrossplaneExternalNameAnnotation] == vpcID
		return ok, fmt.Sprintf("vpc %q network %q subnet.vpcId %q cluster.vpcId %q cluster.subnetId %q", vpcID, networkID, subnetVPC, clusterVPC, clusterSubnet)
	})
	cluster := get(otc.ClusterGVR, "c1")
	if st, _, _ := unstructured.NestedString(cluster.Object, "status", "atProvider", "status"); st != "Available" {
		t.Errorf("cluster status.atProvider.status = %q, want Available", st)
	}
	users, _, _ := unstructured.NestedSlice(cluster.Object, "status", "atProvider", "certificateUsers")
	clusters, _, _ := unstructured.NestedSlice(cluster.Object, "status", "atProvider", "certificateClusters")
	if len(users) != 1 || len(clusters) != 1 || clusters[0].(map[string]any)["server"] != "https://c1.cce.example:5443" {
		t.Errorf("certificates: clusters %v users %d", clusters, len(users))
	}
	conds, _, _ := unstructured.NestedSlice(cluster.Object, "status", "conditions")
	for _, c := range conds {
		if g := c.(map[string]any)["observedGeneration"]; g != cluster.GetGeneration() {
			t.Errorf("condition %v: observedGeneration %v, want %d", c, g, cluster.GetGeneration())
		}
	}
	secret, err := cs.CoreV1().Secrets(ns).Get(ctx, "c1-conn", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("connection Secret: %v", err)
	}
	if secret.Type != sim.CrossplaneConnectionSecretType || len(secret.Data) != 0 || metav1.GetControllerOf(secret).UID != cluster.GetUID() {
		t.Errorf("connection Secret: type %s, %d keys, owner %v", secret.Type, len(secret.Data), secret.OwnerReferences)
	}

	// Node pools: one with capacity, one sold out.
	clusterID, _ := otc.AtProviderID(cluster)
	for _, name := range []string{"workers", "workers-soldout"} {
		create(otc.NodePoolGVR, otc.NodePool(otc.NodePoolParams{Object: otc.Object{Name: name, Namespace: ns}, ProviderConfigName: "otc",
			ClusterID: clusterID, Flavor: "s3.xlarge.4", NodeCount: 2}))
	}
	framework.Eventually(t, 20*time.Second, "pool Ready, sold-out pool SoldOut", func() (bool, string) {
		ok, sold := get(otc.NodePoolGVR, "workers"), get(otc.NodePoolGVR, "workers-soldout")
		rs, _, _ := conditionOf(ok, "Ready")
		ss, sr, _ := conditionOf(sold, "Ready")
		sy, _, _ := conditionOf(sold, "Synced")
		st, _, _ := unstructured.NestedString(sold.Object, "status", "atProvider", "status")
		return rs == "True" && st == sim.OTCNodePoolSoldOut && ss == "False" && sr == "Creating" && sy == "True",
			fmt.Sprintf("workers Ready %s; sold out: status %q Ready %s %s Synced %s", rs, st, ss, sr, sy)
	})
	framework.Consistently(t, 2*time.Second, "sold-out pool never Ready", func() (bool, string) {
		s, _, _ := conditionOf(get(otc.NodePoolGVR, "workers-soldout"), "Ready")
		return s == "False", s
	})

	// Teardown in the controller's order: pools, cluster, subnet, VPC.
	del := func(gvr schema.GroupVersionResource, name string) {
		t.Helper()
		if err := dyn.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	del(otc.NodePoolGVR, "workers")
	del(otc.NodePoolGVR, "workers-soldout")
	framework.Eventually(t, 10*time.Second, "pool shows Deleting", func() (bool, string) {
		u := get(otc.NodePoolGVR, "workers")
		if u == nil {
			return false, "already gone"
		}
		s, r, _ := conditionOf(u, "Ready")
		return s == "False" && r == "Deleting", r
	})
	gone := func(gvr schema.GroupVersionResource, name string) func() (bool, string) {
		return func() (bool, string) { return get(gvr, name) == nil, "still there" }
	}
	framework.Eventually(t, 20*time.Second, "pools gone", gone(otc.NodePoolGVR, "workers"))
	framework.Eventually(t, 20*time.Second, "pools gone", gone(otc.NodePoolGVR, "workers-soldout"))
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{otc.ClusterGVR, "c1"}, {otc.SubnetGVR, "net"}, {otc.VPCGVR, "net"}} {
		del(o.gvr, o.name)
		framework.Eventually(t, 20*time.Second, o.name+" gone", gone(o.gvr, o.name))
	}
	want := []string{
		"NodePoolV3/" + ns + "/workers", "NodePoolV3/" + ns + "/workers-soldout",
		"ClusterV3/" + ns + "/c1", "SubnetV1/" + ns + "/net", "VpcV1/" + ns + "/net",
	}
	got := actor.Deleted()
	slices.Sort(got[:2]) // the two pools go in the same pass
	if !slices.Equal(got, want) {
		t.Errorf("Deleted() = %v, want %v", got, want)
	}
}
