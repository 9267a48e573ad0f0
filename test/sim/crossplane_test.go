package sim_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
		SoldOut: func(namespace, name, flavor, zone string) bool {
			return namespace == ns && name == "workers-soldout" && flavor == "s3.xlarge.4" && zone == "eu-de-02"
		},
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
	internal, _, _ := unstructured.NestedString(cluster.Object, "status", "atProvider", "internal")
	if len(users) != 1 || len(clusters) != 1 || clusters[0].(map[string]any)["name"] != "internalCluster" ||
		clusters[0].(map[string]any)["server"] != internal || !strings.HasPrefix(internal, "https://192.168.0.") || !strings.HasSuffix(internal, ":5443") {
		t.Errorf("certificates of a cluster without an EIP: clusters %v users %d, internal %q", clusters, len(users), internal)
	}
	if eip, found, _ := unstructured.NestedString(cluster.Object, "status", "atProvider", "eip"); found {
		t.Errorf("a cluster without an EIP observes eip %q", eip)
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

	// A public cluster: its eipRef waits for the EIPV1's address, then CCE reports both endpoints.
	create(otc.ClusterGVR, otc.Cluster(otc.ClusterParams{Object: otc.Object{Name: "c2", Namespace: ns}, ProviderConfigName: "otc",
		VPCID: vpcID, SubnetID: networkID, EIPName: "c2-eip"}))
	framework.Eventually(t, 20*time.Second, "public cluster waits for its EIP", func() (bool, string) {
		_, _, m := conditionOf(get(otc.ClusterGVR, "c2"), "Synced")
		return strings.HasPrefix(m, "cannot resolve references: mg.Spec.ForProvider.EIP: cannot get referenced resource: "), m
	})
	create(otc.EIPGVR, otc.EIP(otc.EIPParams{Object: otc.Object{Name: "c2-eip", Namespace: ns}, ProviderConfigName: "otc", BandwidthMbit: 5}))
	var address string
	framework.Eventually(t, 30*time.Second, "EIP and public cluster Ready, eip resolved", func() (bool, string) {
		eip, c2 := get(otc.EIPGVR, "c2-eip"), get(otc.ClusterGVR, "c2")
		for _, u := range []*unstructured.Unstructured{eip, c2} {
			if s, r, m := conditionOf(u, "Ready"); s != "True" {
				return false, fmt.Sprintf("%s Ready %s %s %s", u.GetName(), s, r, m)
			}
		}
		ips, _, _ := unstructured.NestedSlice(eip.Object, "status", "atProvider", "publicip")
		if len(ips) == 1 {
			address, _ = ips[0].(map[string]any)["ipAddress"].(string)
		}
		got, _, _ := unstructured.NestedString(c2.Object, "spec", "forProvider", "eip")
		return address != "" && got == address, fmt.Sprintf("EIP address %q, cluster forProvider.eip %q", address, got)
	})
	eip := get(otc.EIPGVR, "c2-eip")
	if bw, _, _ := unstructured.NestedSlice(eip.Object, "status", "atProvider", "bandwidth"); len(bw) != 1 ||
		fmt.Sprint(bw[0].(map[string]any)["size"]) != "5" || bw[0].(map[string]any)["shareType"] != "PER" {
		t.Errorf("EIP bandwidth observed %v", bw)
	}
	c2 := get(otc.ClusterGVR, "c2")
	external := "https://" + address + ":5443"
	if got, _, _ := unstructured.NestedString(c2.Object, "status", "atProvider", "external"); got != external {
		t.Errorf("public cluster atProvider.external %q, want %q", got, external)
	}
	if got, _, _ := unstructured.NestedString(c2.Object, "status", "atProvider", "eip"); got != address {
		t.Errorf("public cluster atProvider.eip %q, want %q", got, address)
	}
	entries := map[string]map[string]any{}
	certs, _, _ := unstructured.NestedSlice(c2.Object, "status", "atProvider", "certificateClusters")
	for _, c := range certs {
		m := c.(map[string]any)
		entries[m["name"].(string)] = m
	}
	if len(entries) != 3 || entries["externalClusterTLSVerify"]["server"] != external || entries["externalClusterTLSVerify"]["certificateAuthorityData"] == nil ||
		entries["externalCluster"]["server"] != external || entries["externalCluster"]["certificateAuthorityData"] != nil ||
		entries["internalCluster"]["certificateAuthorityData"] != entries["externalClusterTLSVerify"]["certificateAuthorityData"] {
		t.Errorf("public cluster certificateClusters %v", certs)
	}

	// Node pools: one with capacity, one that CCE reports SoldOut, whose create fails. Every state
	// the sold-out one passes through is recorded, in order.
	type state struct{ synced, syncedMsg, ready, lastAsync, lastAsyncReason, lastAsyncMsg, externalName, atProviderStatus string }
	var (
		statesMu sync.Mutex
		states   []state
	)
	w, err := dyn.Resource(otc.NodePoolGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=workers-soldout"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			var st state
			st.synced, _, st.syncedMsg = conditionOf(u, "Synced")
			st.ready, _, _ = conditionOf(u, "Ready")
			st.lastAsync, st.lastAsyncReason, st.lastAsyncMsg = conditionOf(u, "LastAsyncOperation")
			st.externalName = u.GetAnnotations()[sim.CrossplaneExternalNameAnnotation]
			st.atProviderStatus, _, _ = unstructured.NestedString(u.Object, "status", "atProvider", "status")
			statesMu.Lock()
			if len(states) == 0 || states[len(states)-1] != st {
				states = append(states, st)
			}
			statesMu.Unlock()
		}
	}()
	clusterID, _ := otc.AtProviderID(cluster)
	create(otc.NodePoolGVR, otc.NodePool(otc.NodePoolParams{Object: otc.Object{Name: "workers", Namespace: ns}, ProviderConfigName: "otc",
		ClusterID: clusterID, Flavor: "s3.xlarge.4", NodeCount: 2, AvailabilityZone: "eu-de-01"}))
	create(otc.NodePoolGVR, otc.NodePool(otc.NodePoolParams{Object: otc.Object{Name: "workers-soldout", Namespace: ns}, ProviderConfigName: "otc",
		ClusterID: clusterID, Flavor: "s3.xlarge.4", NodeCount: 2, AvailabilityZone: "eu-de-02"}))
	const applyFailed = "apply failed: error creating Open Telekom Cloud CCE Node Pool: unexpected state 'SoldOut', wanted target ''. last error: %!s(<nil>): "
	framework.Eventually(t, 20*time.Second, "pool Ready, sold-out pool a failed create, refreshed", func() (bool, string) {
		ok, sold := get(otc.NodePoolGVR, "workers"), get(otc.NodePoolGVR, "workers-soldout")
		rs, _, _ := conditionOf(ok, "Ready")
		ss, _, _ := conditionOf(sold, "Ready")
		ls, lr, lm := conditionOf(sold, "LastAsyncOperation")
		st, _, _ := unstructured.NestedString(sold.Object, "status", "atProvider", "status")
		return rs == "True" && ss == "True" && st == sim.OTCNodePoolSoldOut && ls == "False" && lr == "ApplyFailure" && lm == applyFailed,
			fmt.Sprintf("workers Ready %s; sold out: Ready %s, status %q, LastAsyncOperation %s %s %q", rs, ss, st, ls, lr, lm)
	})
	statesMu.Lock()
	seen := slices.Clone(states)
	statesMu.Unlock()
	// The callback's conditions (no external name, no observation), then the refreshed pool's
	// external name (the managed reconciler's update, then its status write: Synced True, still
	// no observation), then its observation and Ready.
	want := []state{
		{synced: "False", syncedMsg: "create failed: " + applyFailed, ready: "False", lastAsync: "False", lastAsyncReason: "ApplyFailure", lastAsyncMsg: applyFailed},
		{synced: "False", syncedMsg: "create failed: " + applyFailed, ready: "False", lastAsync: "False", lastAsyncReason: "ApplyFailure", lastAsyncMsg: applyFailed, externalName: "*"},
		{synced: "True", ready: "False", lastAsync: "False", lastAsyncReason: "ApplyFailure", lastAsyncMsg: applyFailed, externalName: "*"},
		{synced: "True", ready: "True", lastAsync: "False", lastAsyncReason: "ApplyFailure", lastAsyncMsg: applyFailed, externalName: "*", atProviderStatus: sim.OTCNodePoolSoldOut},
	}
	var failed []state
	for _, st := range seen {
		if st.lastAsync == "False" {
			if st.externalName != "" {
				st.externalName = "*"
			}
			failed = append(failed, st)
		}
	}
	if !slices.Equal(failed, want) {
		t.Errorf("the sold-out pool's states after its create failed:\n got %+v\nwant %+v", failed, want)
	}
	for _, st := range seen {
		if st.lastAsync != "False" && (st.ready == "True" || st.externalName != "" || st.atProviderStatus != "") {
			t.Errorf("before its create failed the sold-out pool was %+v", st)
		}
	}
	sold := get(otc.NodePoolGVR, "workers-soldout")
	if id, _ := otc.AtProviderID(sold); id == "" || sold.GetAnnotations()[sim.CrossplaneExternalNameAnnotation] != id {
		t.Errorf("sold-out pool: external name %q, atProvider.id %q", sold.GetAnnotations()[sim.CrossplaneExternalNameAnnotation], id)
	}
	framework.Consistently(t, 2*time.Second, "the failed create is never retried", func() (bool, string) {
		s, r, m := conditionOf(get(otc.NodePoolGVR, "workers-soldout"), "LastAsyncOperation")
		return s == "False" && m == applyFailed, s + " " + r
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
	}{{otc.ClusterGVR, "c1"}, {otc.ClusterGVR, "c2"}, {otc.EIPGVR, "c2-eip"}, {otc.SubnetGVR, "net"}, {otc.VPCGVR, "net"}} {
		del(o.gvr, o.name)
		framework.Eventually(t, 20*time.Second, o.name+" gone", gone(o.gvr, o.name))
	}
	wantDeleted := []string{
		"NodePoolV3/" + ns + "/workers", "NodePoolV3/" + ns + "/workers-soldout",
		"ClusterV3/" + ns + "/c1", "ClusterV3/" + ns + "/c2", "EIPV1/" + ns + "/c2-eip", "SubnetV1/" + ns + "/net", "VpcV1/" + ns + "/net",
	}
	got := actor.Deleted()
	slices.Sort(got[:2]) // the two pools go in the same pass
	if !slices.Equal(got, wantDeleted) {
		t.Errorf("Deleted() = %v, want %v", got, wantDeleted)
	}
}
