package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/crossplane"
	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/workspaces"
)

// KubernetesClusters (docs/kubernetescluster.md) through the manager binary: the tenant applies the demo
// YAML (credentials Secret, ProviderConfig, MachineCapabilities, KubernetesCluster) in a workspace
// and waits for Ready; the platform matched a flavor from the catalog kept in root:kubeopera and
// built VpcV1, SubnetV1, ClusterV3 and NodePoolV3 in the workspace's kcp-<fp> namespace on the
// backend. No Crossplane and no OTC run here: sim.CrossplaneOTC plays both on the backend.

const (
	// catalogFile is the platform admin's flavor catalog, loaded into root:kubeopera as make run does.
	catalogFile = "config/samples/otc-flavors.yaml"
	// otcCRDs are the OTC Crossplane provider's CRDs installed on the backend.
	otcCRDs = "test/fixtures/crossplane/otc"
	// kcNamespace and kcName are where the demo YAML puts the KubernetesCluster.
	kcNamespace = "demo"
	kcName      = "my-cluster"
	// otcSecretKey is the SK of the demo's AK/SK credentials: it must never leave the Secrets.
	otcSecretKey = "sk-e2e-do-not-leak-5f0c1d2e3a4b"
)

// installOTC installs what KubernetesClusters need before the manager starts, as make run does
// (cmd/devenv): the OTC provider's CRDs on the backend and the sample flavor catalog in the
// platform workspace.
func installOTC(ctx context.Context, e *env) error {
	if _, err := envtest.InstallCRDs(e.backend.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(framework.RepoRoot(), otcCRDs)}}); err != nil {
		return fmt.Errorf("failed to install the OTC provider's CRDs on the backend: %w", err)
	}
	return e.loadCatalog(ctx, catalogFile)
}

func catalogFlavors() ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), catalogFile))
	if err != nil {
		return nil, err
	}
	objs, err := manifests.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", catalogFile, err)
	}
	return objs, nil
}

var sharedCrossplane struct {
	once sync.Once
	xp   *sim.CrossplaneOTC
}

// crossplaneOTC returns the suite's Crossplane + OTC actor on the backend, started at the first
// call (tests without KubernetesClusters do not pay for its polling).
func (e *env) crossplaneOTC(t *testing.T) *sim.CrossplaneOTC {
	t.Helper()
	sharedCrossplane.once.Do(func() {
		xp := &sim.CrossplaneOTC{Backend: e.backend.Config, ReadyAfter: 500 * time.Millisecond}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := xp.Run(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "the Crossplane/OTC actor stopped: %v\n", err)
			}
		}()
		e.mu.Lock()
		e.stops = append(e.stops, func() { cancel(); <-done })
		e.mu.Unlock()
		sharedCrossplane.xp = xp
	})
	return sharedCrossplane.xp
}

// kubernetesClusterDemo is the seed's demo flow (config/samples/kubernetescluster-demo.yaml) as a
// tenant types it: AK/SK credentials in the JSON form, no vpcID/subnetID.
func kubernetesClusterDemo(accessKey string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: otc-creds
  namespace: %[1]s
  labels:
    kubeopera.io/platform-access: "true"
stringData:
  credentials: |
    {"access_key": %[3]q, "secret_key": %[4]q,
     "auth_url": "https://iam.eu-de.otc.t-systems.com/v3", "region": "eu-de"}
---
apiVersion: platform.edgeconnect.eu/v1alpha1
kind: ProviderConfig
metadata:
  name: my-provider
  namespace: %[1]s
spec:
  credentials:
    source: Secret
    secretRef:
      name: otc-creds
      key: credentials
---
apiVersion: platform.edgeconnect.eu/v1alpha1
kind: MachineCapabilities
metadata:
  name: my-capabilities
  namespace: %[1]s
spec:
  vCPUCount: 4
  memorySize: 8Gi
---
apiVersion: platform.edgeconnect.eu/v1alpha1
kind: KubernetesCluster
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  machineCapabilitiesRef:
    name: my-capabilities
  nodeCount: 3
  nodeDiskSize: 100Gi
  nodeAvailableZone: random
  providerRef:
    type: OTC
    configRef:
      name: my-provider
  kubernetes:
    version: 1.28.0
`, kcNamespace, kcName, accessKey, otcSecretKey)
}

// applyKubernetesClusterDemo applies the demo YAML in the workspace (client c), once the
// platform export's kinds are served there.
func applyKubernetesClusterDemo(t *testing.T, c client.Client, accessKey string) {
	t.Helper()
	ctx := context.Background()
	objs, err := manifests.Decode([]byte(kubernetesClusterDemo(accessKey)))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		framework.Eventually(t, time.Minute, "create "+o.GetKind()+" "+o.GetName(), func() (bool, string) {
			err := c.Create(ctx, o.DeepCopy())
			return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err)
		})
	}
}

func getKubernetesCluster(t *testing.T, c client.Client) *platformv1alpha1.KubernetesCluster {
	t.Helper()
	kc := &platformv1alpha1.KubernetesCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: kcNamespace, Name: kcName}, kc); err != nil {
		t.Fatal(err)
	}
	return kc
}

func describeKC(kc *platformv1alpha1.KubernetesCluster) string {
	var conds []string
	for _, c := range kc.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s(%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %q message %q flavor %q conditions %v", kc.Status.Phase, kc.Status.Message, kc.Status.Flavor, conds)
}

// waitKubernetesClusterReady waits until the demo cluster of the workspace is Ready. Crossplane
// is played with a short delay, but the manager looks at a cluster being built every 10s
// (kubernetescluster.DefaultPollInterval), once per step.
func waitKubernetesClusterReady(t *testing.T, c client.Client) *platformv1alpha1.KubernetesCluster {
	t.Helper()
	var kc *platformv1alpha1.KubernetesCluster
	framework.Eventually(t, 4*time.Minute, "KubernetesCluster "+kcNamespace+"/"+kcName+" Ready", func() (bool, string) {
		kc = getKubernetesCluster(t, c)
		return kc.Status.Phase == platformv1alpha1.KubernetesClusterPhaseReady && reconcile.IsTrue(kc, commonv1alpha1.ReadyCondition), describeKC(kc)
	})
	return kc
}

// managedResource is one Crossplane managed resource the demo cluster is built from.
type managedResource struct {
	gvk    schema.GroupVersionKind
	gvr    schema.GroupVersionResource
	suffix string
}

// demoResources are the demo cluster's managed resources, in the order they must be deleted.
var demoResources = []managedResource{
	{otc.NodePoolGVK, otc.NodePoolGVR, "pool"},
	{otc.ClusterGVK, otc.ClusterGVR, "cluster"},
	{otc.SubnetGVK, otc.SubnetGVR, "subnet"},
	{otc.VPCGVK, otc.VPCGVR, "vpc"},
}

// backendName is the name of one of the demo cluster's managed resources on the backend
// (deterministic from the KubernetesCluster's namespace and name, docs/kubernetescluster.md#otc-resources).
func backendName(suffix string) string {
	return "kc-" + workspaces.ObjectName(kcNamespace, kcName, 40) + "-" + suffix
}

// demoBackendObjects reads the demo cluster's managed resources in the workspace's kcp-<fp>,
// listed by the workspace's fingerprint label, keyed by kind.
func (e *env) demoBackendObjects(t *testing.T, lc string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, r := range demoResources {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List"))
		if err := e.backendC.List(context.Background(), list, client.InNamespace(workspaces.Namespace(lc)),
			client.MatchingLabels{workspaces.FingerprintLabel: workspaces.Fingerprint(lc)}); err != nil {
			t.Fatalf("list %s in %s: %v", r.gvk.Kind, workspaces.Namespace(lc), err)
		}
		for i := range list.Items {
			if list.Items[i].GetName() == backendName(r.suffix) {
				out[r.gvk.Kind] = &list.Items[i]
			}
		}
	}
	return out
}

// checkReadyDemo checks what the tenant sees of a Ready demo cluster in workspace lc (client c)
// and what the platform built for it on the backend.
func (e *env) checkReadyDemo(t *testing.T, c client.Client, lc string, kc *platformv1alpha1.KubernetesCluster) {
	t.Helper()
	ctx := context.Background()
	for _, typ := range []string{
		platformv1alpha1.CredentialsValidCondition, platformv1alpha1.FlavorMatchedCondition, platformv1alpha1.NetworkReadyCondition,
		platformv1alpha1.ClusterReadyCondition, platformv1alpha1.NodePoolReadyCondition, platformv1alpha1.KubeconfigDeliveredCondition,
	} {
		if !reconcile.IsTrue(kc, typ) {
			t.Errorf("condition %s not True: %s", typ, describeKC(kc))
		}
	}
	if kc.Status.ObservedGeneration != kc.Generation {
		t.Errorf("observedGeneration %d, want %d", kc.Status.ObservedGeneration, kc.Generation)
	}

	// The flavor is one of the catalog the tenant sees, with at least the capabilities asked for.
	if kc.Status.Flavor == "" {
		t.Fatalf("status.flavor is empty: %s", describeKC(kc))
	}
	flavors := &platformv1alpha1.ProviderMachineFlavorList{}
	if err := c.List(ctx, flavors); err != nil {
		t.Fatal(err)
	}
	var matched *platformv1alpha1.ProviderMachineFlavor
	for i := range flavors.Items {
		if flavors.Items[i].Spec.Flavor == kc.Status.Flavor {
			matched = &flavors.Items[i]
		}
	}
	switch {
	case matched == nil:
		t.Errorf("status.flavor %q is not in the workspace's catalog (%d flavors)", kc.Status.Flavor, len(flavors.Items))
	case !matched.Spec.Available || !strings.EqualFold(matched.Spec.ProviderRef.Type, "OTC") || matched.Spec.Capabilities.VCPUCount < 4 ||
		matched.Spec.Capabilities.MemorySize.Cmp(resource.MustParse("8Gi")) < 0 || matched.Spec.Capabilities.GPUModelName != nil:
		t.Errorf("flavor %q does not satisfy 4 vCPUs / 8Gi on OTC without GPU: %+v", kc.Status.Flavor, matched.Spec)
	}

	// The backend: the four managed resources in kcp-<fp>, labelled with the workspace's
	// fingerprint, wired to each other by the OTC ids.
	objs := e.demoBackendObjects(t, lc)
	for _, r := range demoResources {
		if objs[r.gvk.Kind] == nil {
			t.Errorf("%s %s not in %s with label %s=%s", r.gvk.Kind, backendName(r.suffix), workspaces.Namespace(lc), workspaces.FingerprintLabel, workspaces.Fingerprint(lc))
		}
	}
	if t.Failed() {
		return
	}
	str := func(u *unstructured.Unstructured, path ...string) string {
		s, _, _ := unstructured.NestedString(u.Object, path...)
		return s
	}
	vpc, subnet, cluster, pool := objs[otc.KindVPC], objs[otc.KindSubnet], objs[otc.KindCluster], objs[otc.KindNodePool]
	if got, want := str(subnet, "spec", "forProvider", "vpcId"), vpc.GetAnnotations()[sim.CrossplaneExternalNameAnnotation]; got == "" || got != want {
		t.Errorf("subnet vpcId %q, want the VPC's OTC id %q", got, want)
	}
	if got, want := str(cluster, "spec", "forProvider", "vpcId"), vpc.GetAnnotations()[sim.CrossplaneExternalNameAnnotation]; got != want {
		t.Errorf("cluster vpcId %q, want the VPC's OTC id %q", got, want)
	}
	clusterID, _ := otc.AtProviderID(cluster)
	if got := str(pool, "spec", "forProvider", "clusterId"); got == "" || got != clusterID {
		t.Errorf("node pool clusterId %q, want the cluster's OTC id %q literally", got, clusterID)
	}
	// The node pool runs the flavor status names. A cluster matched before the workspace's copy of
	// the catalog was complete is matched again, and its pool rewritten, once it is
	// (docs/kubernetescluster.md, "Flavor matching"): the two agree once that settled.
	framework.Eventually(t, time.Minute, "the node pool's flavor is status.flavor", func() (bool, string) {
		cur := &platformv1alpha1.KubernetesCluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(kc), cur); err != nil {
			return false, err.Error()
		}
		pool := e.demoBackendObjects(t, lc)[otc.KindNodePool]
		if pool == nil {
			return false, "no node pool"
		}
		got := str(pool, "spec", "forProvider", "flavor")
		return got == cur.Status.Flavor, fmt.Sprintf("node pool flavor %q, status.flavor %q", got, cur.Status.Flavor)
	})
	if n, _, _ := unstructured.NestedInt64(pool.Object, "spec", "forProvider", "initialNodeCount"); n != 3 {
		t.Errorf("node pool initialNodeCount %d, want the spec's 3", n)
	}
	ns := &corev1.Namespace{}
	if err := e.backendC.Get(ctx, client.ObjectKey{Name: workspaces.Namespace(lc)}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels[workspaces.FingerprintLabel] != workspaces.Fingerprint(lc) || ns.Annotations[workspaces.LogicalClusterAnnotation] != lc {
		t.Errorf("backend namespace %s: labels %v annotations %v", ns.Name, ns.Labels, ns.Annotations)
	}
	// The credentials reached Crossplane in kcp-<fp> (the provider's JSON form).
	creds := &corev1.Secret{}
	if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(lc), Name: crossplane.ProviderConfigName(kcNamespace, "my-provider") + "-credentials"}, creds); err != nil {
		t.Errorf("credentials on the backend: %v", err)
	} else if !strings.Contains(string(creds.Data[otc.DefaultCredentialsKey]), otcSecretKey) {
		t.Error("the backend credentials Secret does not hold the tenant's AK/SK")
	}

	// The kubeconfig, delivered next to the cluster and owned by it, is the cluster's: its server
	// and CA are what OTC reported for the ClusterV3.
	if kc.Status.KubeconfigSecret != kcName+"-kubeconfig" {
		t.Errorf("status.kubeconfigSecret = %q, want %s-kubeconfig", kc.Status.KubeconfigSecret, kcName)
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: kcNamespace, Name: kcName + "-kubeconfig"}, s); err != nil {
		t.Fatalf("delivered kubeconfig Secret: %v", err)
	}
	if !metav1.IsControlledBy(s, kc) {
		t.Errorf("delivered Secret is not owned by the KubernetesCluster: %v", s.OwnerReferences)
	}
	cfg, err := clientcmd.Load(s.Data["kubeconfig"])
	if err != nil {
		t.Fatalf("delivered kubeconfig does not parse: %v", err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.Clusters[kctx.Cluster] == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		t.Fatalf("delivered kubeconfig has no usable current context %q", cfg.CurrentContext)
	}
	// No publicEndpoint asked for: the private endpoint, CCE's internalCluster entry.
	certs, _, _ := unstructured.NestedSlice(cluster.Object, "status", "atProvider", "certificateClusters")
	var obs map[string]any
	for _, c := range certs {
		if m, _ := c.(map[string]any); m["name"] == otc.CertificateClusterInternal {
			obs = m
		}
	}
	if obs == nil {
		t.Fatalf("the ClusterV3 observed no %s entry: %v", otc.CertificateClusterInternal, certs)
	}
	server, _ := obs["server"].(string)
	if kc.Status.Endpoint != server || kc.Status.EndpointAccess != platformv1alpha1.EndpointPrivate {
		t.Errorf("status.endpoint %q (%s), want the private %q", kc.Status.Endpoint, kc.Status.EndpointAccess, server)
	}
	ca, _ := base64.StdEncoding.DecodeString(fmt.Sprint(obs["certificateAuthorityData"]))
	if got := cfg.Clusters[kctx.Cluster].Server; got == "" || got != server {
		t.Errorf("kubeconfig server %q, want the cluster's %q", got, server)
	}
	if len(ca) == 0 || string(cfg.Clusters[kctx.Cluster].CertificateAuthorityData) != string(ca) {
		t.Error("kubeconfig CA is not the cluster's")
	}
	if len(cfg.AuthInfos[kctx.AuthInfo].ClientKeyData) == 0 {
		t.Error("kubeconfig has no client key")
	}
}

// TestKubernetesClusterDemoGoesReadyWithItsKubeconfig: the seed's demo flow, as a tenant runs it
// against the platform.
func TestKubernetesClusterDemoGoesReadyWithItsKubeconfig(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	e.crossplaneOTC(t)
	ctx := context.Background()
	c, lc, _ := e.tenantWorkspace(t, "kc-demo")

	// The platform admin's catalog is there for the tenant to read.
	catalog, err := catalogFlavors()
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the catalog published in the workspace", func() (bool, string) {
		list := &platformv1alpha1.ProviderMachineFlavorList{}
		if err := c.List(ctx, list); err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, f := range catalog {
			if !slices.ContainsFunc(list.Items, func(have platformv1alpha1.ProviderMachineFlavor) bool { return have.Name == f.GetName() }) {
				missing = append(missing, f.GetName())
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing %v", missing)
	})

	applyKubernetesClusterDemo(t, c, "AKE2EDEMO0123456789")
	kc := waitKubernetesClusterReady(t, c)
	e.checkReadyDemo(t, c, lc, kc)

	pc := &platformv1alpha1.ProviderConfig{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: kcNamespace, Name: "my-provider"}, pc); err != nil {
		t.Fatal(err)
	}
	if !reconcile.IsTrue(pc, platformv1alpha1.CredentialsValidCondition) {
		t.Errorf("ProviderConfig: %v", pc.Status.Conditions)
	}
	mc := &platformv1alpha1.MachineCapabilities{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: kcNamespace, Name: "my-capabilities"}, mc); err != nil {
		t.Fatal(err)
	}
	// Its matching flavors (catalog object names) include the one the cluster was given.
	flavors := &platformv1alpha1.ProviderMachineFlavorList{}
	if err := c.List(ctx, flavors); err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, f := range flavors.Items {
		listed = listed || (f.Spec.Flavor == kc.Status.Flavor && slices.Contains(mc.Status.MatchingFlavors, f.Name))
	}
	if !listed {
		t.Errorf("MachineCapabilities matching flavors %v lack the cluster's %q", mc.Status.MatchingFlavors, kc.Status.Flavor)
	}

	// The SK stays in the Secrets: not in status, events or the manager's log.
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(kcNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if strings.Contains(ev.Message, otcSecretKey) {
			t.Errorf("event %s carries the SK", ev.Name)
		}
	}
	if strings.Contains(describeKC(kc), otcSecretKey) || strings.Contains(fmt.Sprint(pc.Status), otcSecretKey) {
		t.Error("a status carries the SK")
	}
	if strings.Contains(e.managerLogs(), otcSecretKey) {
		t.Error("the manager logged the SK")
	}
}

// deletionWitness records, when a backend object first shows a deletionTimestamp or is gone,
// which managed resources Crossplane had finished deleting at that moment.
type deletionWitness struct {
	mu      sync.Mutex
	seen    bool
	deleted []string
}

func (w *deletionWitness) get() (bool, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen, slices.Clone(w.deleted)
}

// witnessDeletion watches the backend object gvr namespace/name (namespace empty: cluster-scoped)
// and records xp.Deleted() the moment its deletion starts.
func (e *env) witnessDeletion(t *testing.T, xp *sim.CrossplaneOTC, gvr schema.GroupVersionResource, namespace, name string) *deletionWitness {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.backend.Config)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dyn.Resource(gvr).Namespace(namespace).Watch(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	wit := &deletionWitness{}
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || (ev.Type != watch.Deleted && u.GetDeletionTimestamp() == nil) {
				continue
			}
			wit.mu.Lock()
			if !wit.seen {
				wit.seen, wit.deleted = true, xp.Deleted()
			}
			wit.mu.Unlock()
		}
	}()
	return wit
}

// kindsDeletedIn returns the kinds of the demo cluster's managed resources in namespace among
// deleted ("Kind/namespace/name"), in order.
func kindsDeletedIn(deleted []string, namespace string) []string {
	var kinds []string
	for _, d := range deleted {
		parts := strings.SplitN(d, "/", 3)
		if len(parts) == 3 && parts[1] == namespace && strings.HasPrefix(parts[2], "kc-"+workspaces.ObjectName(kcNamespace, kcName, 40)+"-") {
			kinds = append(kinds, parts[0])
		}
	}
	return kinds
}

// TestDeletedWorkspaceTearsDownItsKubernetesClusterInOrder: deleting a tenant's workspace (not
// the KubernetesCluster) takes the cluster through its finalizer (the WorkspaceType's terminator
// waits for it): node pool, cluster, subnet, VPC are deleted one after the other, only then the
// workspace's backend namespace, and only then the workspace finishes deleting. Another
// workspace's same-named cluster is untouched.
func TestDeletedWorkspaceTearsDownItsKubernetesClusterInOrder(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	xp := e.crossplaneOTC(t)
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "kc-delws-other")
	globex, globexLC, globexName := e.tenantWorkspace(t, "kc-delws")
	applyKubernetesClusterDemo(t, acme, "AKE2EACME0123456789")
	applyKubernetesClusterDemo(t, globex, "AKE2EGLOBEX01234567")
	waitKubernetesClusterReady(t, acme)
	e.checkReadyDemo(t, globex, globexLC, waitKubernetesClusterReady(t, globex))
	if t.Failed() {
		t.FailNow()
	}

	globexNS := workspaces.Namespace(globexLC)
	nsGone := e.witnessDeletion(t, xp, corev1.SchemeGroupVersion.WithResource("namespaces"), "", globexNS)
	credsGone := e.witnessDeletion(t, xp, corev1.SchemeGroupVersion.WithResource("secrets"), globexNS, crossplane.ProviderConfigName(kcNamespace, "my-provider")+"-credentials")
	pcGone := e.witnessDeletion(t, xp, otc.ProviderConfigGVR, globexNS, crossplane.ProviderConfigName(kcNamespace, "my-provider"))

	kcpDyn, err := dynamic.NewForConfig(e.kcpConfig(globexLC))
	if err != nil {
		t.Fatal(err)
	}
	logicalClusters := kcpDyn.Resource(schema.GroupVersionResource{Group: "core.kcp.io", Version: "v1alpha1", Resource: "logicalclusters"})
	if _, err := logicalClusters.Get(ctx, "cluster", metav1.GetOptions{}); err != nil {
		t.Fatalf("the kcp admin cannot read the LogicalCluster of %s: %v", globexLC, err)
	}

	if err := workspaces.DeleteWorkspace(ctx, e.kcp.Config, "root:orgs", globexName); err != nil {
		t.Fatal(err)
	}
	orgs := e.workspaceClient(t, "root:orgs")
	framework.Eventually(t, 5*time.Minute, "workspace "+globexName+" gone", func() (bool, string) {
		ws := &tenancyWorkspace{}
		err := orgs.Get(ctx, client.ObjectKey{Name: globexName}, ws)
		return apierrors.IsNotFound(err), fmt.Sprintf("err=%v phase=%s; Crossplane deleted %v", err, ws.Status.Phase, kindsDeletedIn(xp.Deleted(), globexNS))
	})

	// The finalizer deleted the managed resources one after the other, in the safe order.
	want := []string{otc.KindNodePool, otc.KindCluster, otc.KindSubnet, otc.KindVPC}
	if got := kindsDeletedIn(xp.Deleted(), globexNS); !slices.Equal(got, want) {
		t.Errorf("Crossplane deleted %v in %s, want %v", got, globexNS, want)
	}
	// The terminator deleted the backend namespace only after all of them were gone.
	if seen, at := nsGone.get(); !seen {
		t.Errorf("the deletion of namespace %s was never seen", globexNS)
	} else if got := kindsDeletedIn(at, globexNS); !slices.Equal(got, want) {
		t.Errorf("namespace %s was deleted when Crossplane had deleted only %v", globexNS, got)
	}
	list := &corev1.NamespaceList{}
	if err := e.backendC.List(ctx, list, client.MatchingLabels{workspaces.FingerprintLabel: workspaces.Fingerprint(globexLC)}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d backend namespaces of the deleted workspace remain", len(list.Items))
	}
	// It was the terminator that let the workspace go, and its LogicalCluster is gone.
	terminated := false
	for _, line := range strings.Split(e.managerLogs(), "\n") {
		terminated = terminated || (strings.Contains(line, "Workspace terminated") && strings.Contains(line, globexLC))
	}
	if !terminated {
		t.Errorf("the manager's terminator did not log that it terminated %s", globexLC)
	}
	// kcp removes a Workspace only once its LogicalCluster is gone: the kcp admin, who read it
	// before, is now told there is no such logical cluster (kcp answers 403 "access denied" for a
	// logical cluster that does not exist).
	framework.Eventually(t, time.Minute, "LogicalCluster "+globexLC+" gone", func() (bool, string) {
		_, err := logicalClusters.Get(ctx, "cluster", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "access denied")), fmt.Sprint(err)
	})

	// Crossplane's managed reconciler connects to OTC with the ProviderConfig's credentials before
	// it deletes an external resource (crossplane-runtime's managed reconciler: Connect, then
	// Delete): the backend credentials Secret and OTC ProviderConfig must stay until the cluster's
	// managed resources are gone, or the OTC resources could not be deleted.
	t.Run("the OTC credentials outlive the managed resources they delete", func(t *testing.T) {
		for _, w := range []struct {
			what string
			w    *deletionWitness
		}{{"the credentials Secret", credsGone}, {"the OTC ProviderConfig", pcGone}} {
			seen, at := w.w.get()
			if !seen {
				t.Errorf("the deletion of %s in %s was never seen", w.what, globexNS)
			} else if !slices.Equal(kindsDeletedIn(at, globexNS), want) {
				t.Errorf("%s in %s was deleted when Crossplane had deleted only %v of the cluster's managed resources", w.what, globexNS, kindsDeletedIn(at, globexNS))
			}
		}
	})

	// The other workspace's same-named cluster is untouched.
	acmeNS := workspaces.Namespace(acmeLC)
	if got := kindsDeletedIn(xp.Deleted(), acmeNS); len(got) != 0 {
		t.Errorf("Crossplane deleted %v of the other workspace", got)
	}
	objs := e.demoBackendObjects(t, acmeLC)
	for _, r := range demoResources {
		if u := objs[r.gvk.Kind]; u == nil || u.GetDeletionTimestamp() != nil {
			t.Errorf("the other workspace's %s is gone or going", r.gvk.Kind)
		}
	}
	if kc := getKubernetesCluster(t, acme); kc.Status.Phase != platformv1alpha1.KubernetesClusterPhaseReady {
		t.Errorf("the other workspace's cluster: %s", describeKC(kc))
	}
}
