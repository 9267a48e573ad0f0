package hostregistration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/kubeopera/kubeopera/apis/fleet/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/health"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// These tests run on real servers: one kcp for the package, bootstrapped as the product does it
// (bootstrap.Bootstrap applies the RegisteredCluster CRD), with the manager's kcp identity
// (kcp's unprivileged "user" with the platform role the product ships), and kube-apiservers as
// backends, one of them inspected with the manager's shipped backend identity (config/rbac).

var (
	kcpOnce sync.Once
	kcpEnv  *devenv.KCP
	kcpStop func()
	kcpErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if kcpStop != nil {
		kcpStop()
	}
	os.Exit(code)
}

// platform returns clients of the shared kcp's platform workspace: admin, and as the manager.
func platform(t *testing.T) (admin, asManager client.Client, adminCfg *rest.Config) {
	t.Helper()
	framework.SkipWithoutServers(t)
	kcpOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hostregistration-kcp-")
		if err != nil {
			kcpErr = err
			return
		}
		var stop func()
		if kcpEnv, stop, kcpErr = framework.StartKCPIn(dir); kcpErr != nil {
			_ = os.RemoveAll(dir)
			return
		}
		kcpStop = func() { stop(); _ = os.RemoveAll(dir) }
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if kcpErr = bootstrap.Bootstrap(ctx, kcpEnv.Config, bootstrap.PlatformWorkspace); kcpErr != nil {
			return
		}
		if kcpErr = bootstrap.BindManagerRole(ctx, kcpEnv.Config, bootstrap.PlatformWorkspace, "user"); kcpErr != nil {
			return
		}
		kcpErr = waitServed(ctx, workspaces.ClusterConfig(kcpEnv.Config, bootstrap.PlatformWorkspace))
	})
	if kcpErr != nil {
		t.Fatal(kcpErr)
	}
	scheme := runtime.NewScheme()
	if err := fleetv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	adminCfg = workspaces.ClusterConfig(kcpEnv.Config, bootstrap.PlatformWorkspace)
	admin, err := client.New(adminCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	userCfg, err := kcpEnv.ContextConfig("user")
	if err != nil {
		t.Fatal(err)
	}
	asManager, err = client.New(workspaces.ClusterConfig(userCfg, bootstrap.PlatformWorkspace), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return admin, asManager, adminCfg
}

// waitServed waits until the platform workspace serves RegisteredClusters: kcp establishes a CRD
// a few seconds after the bootstrap applied it.
func waitServed(ctx context.Context, cfg *rest.Config) error {
	scheme := runtime.NewScheme()
	if err := fleetv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err == nil {
			err = c.List(ctx, &fleetv1alpha1.RegisteredClusterList{})
		}
		lastErr = err
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("RegisteredClusters are not served in %s: %w (last error: %v)", bootstrap.PlatformWorkspace, err, lastErr)
	}
	return nil
}

// addNode creates a Node the way a kubelet registers it and sets its Ready condition through the
// status subresource, as the kubelet does (no kubelet runs here).
func addNode(ctx context.Context, t *testing.T, cs kubernetes.Interface, name, providerID string, ready bool) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	n.Status.NodeInfo.KubeletVersion = "v1.33.0"
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func namespaceNames(ctx context.Context, t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	slices.Sort(names)
	return names
}

func registeredClusters(ctx context.Context, t *testing.T, c client.Client) []fleetv1alpha1.RegisteredCluster {
	t.Helper()
	var list fleetv1alpha1.RegisteredClusterList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestRegisterHost registers a backend as the host, registers it again, then tries to register
// another backend into the same platform workspace.
func TestRegisterHost(t *testing.T) {
	admin, asManager, adminCfg := platform(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	// The backend as the product installs it, inspected with the manager's ServiceAccount.
	b := framework.StartBackend(t)
	backendAdmin, err := kubernetes.NewForConfig(b.Config)
	if err != nil {
		t.Fatal(err)
	}
	id, err := framework.ManagerIdentity(ctx, b, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	backend, err := kubernetes.NewForConfig(id.Config)
	if err != nil {
		t.Fatal(err)
	}
	addNode(ctx, t, backendAdmin, "node-a", "aws:///eu-central-1a/i-0abc", true)
	addNode(ctx, t, backendAdmin, "node-b", "aws:///eu-central-1b/i-0def", false)
	kubeSystem, err := backendAdmin.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	version, err := backendAdmin.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	namespacesBefore := namespaceNames(ctx, t, backendAdmin)

	var first *fleetv1alpha1.RegisteredCluster
	t.Run("registers the backend as the host", func(t *testing.T) {
		facts, err := Inspect(ctx, backend)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().Truncate(time.Second)
		rc, created, err := Register(ctx, asManager, facts, now)
		if err != nil {
			t.Fatal(err)
		}
		if !created {
			t.Error("created = false on the first registration")
		}
		got := &fleetv1alpha1.RegisteredCluster{}
		if err := admin.Get(ctx, client.ObjectKey{Name: fleetv1alpha1.HostName}, got); err != nil {
			t.Fatal(err)
		}
		if got.UID != rc.UID {
			t.Errorf("returned object %s, stored %s", rc.UID, got.UID)
		}
		wantSpec := fleetv1alpha1.RegisteredClusterSpec{ClusterUID: string(kubeSystem.UID), Source: fleetv1alpha1.SourceSelfRegistered, IsHost: true}
		if got.Spec != wantSpec {
			t.Errorf("spec = %+v, want %+v", got.Spec, wantSpec)
		}
		st := got.Status
		for _, c := range []struct{ field, got, want string }{
			{"provider", st.Provider, "aws"},
			{"region", st.Region, "eu-central-1"},
			{"kubernetesVersion", st.KubernetesVersion, version.GitVersion},
			{"nodes", fmt.Sprintf("%d/%d %s", st.ReadyNodeCount, st.NodeCount, st.NodeSummary), "1/2 1/2"},
		} {
			if c.got != c.want {
				t.Errorf("status.%s = %q, want %q", c.field, c.got, c.want)
			}
		}
		wantNodes := []fleetv1alpha1.RegisteredClusterNode{
			{Name: "node-a", Ready: true, ProviderID: "aws:///eu-central-1a/i-0abc", KubeletVersion: "v1.33.0"},
			{Name: "node-b", Ready: false, ProviderID: "aws:///eu-central-1b/i-0def", KubeletVersion: "v1.33.0"},
		}
		if !slices.Equal(st.Nodes, wantNodes) {
			t.Errorf("status.nodes = %+v, want %+v", st.Nodes, wantNodes)
		}
		if st.RegisteredAt == nil || !st.RegisteredAt.Time.Equal(now) || st.ObservedAt == nil || !st.ObservedAt.Time.Equal(now) {
			t.Errorf("registeredAt %v, observedAt %v, want both %v", st.RegisteredAt, st.ObservedAt, now)
		}
		if len(st.Conditions) != 1 || st.Conditions[0].Type != fleetv1alpha1.ReadyCondition || st.Conditions[0].Status != metav1.ConditionTrue || st.Conditions[0].Reason != fleetv1alpha1.InspectedReason {
			t.Errorf("conditions = %+v, want Ready True Inspected", st.Conditions)
		}
		first = got
	})
	if first == nil {
		t.FailNow()
	}

	t.Run("registering again returns the same object with fresh facts", func(t *testing.T) {
		addNode(ctx, t, backendAdmin, "node-c", "aws:///eu-central-1c/i-0123", true)
		facts, err := Inspect(ctx, backend)
		if err != nil {
			t.Fatal(err)
		}
		later := first.Status.ObservedAt.Add(time.Minute)
		rc, created, err := Register(ctx, asManager, facts, later)
		if err != nil {
			t.Fatal(err)
		}
		if created {
			t.Error("created = true on the second registration")
		}
		if rc.UID != first.UID || rc.Spec.ClusterUID != first.Spec.ClusterUID || !rc.CreationTimestamp.Equal(&first.CreationTimestamp) {
			t.Errorf("got uid %s clusterUID %s created %v, want %s %s %v", rc.UID, rc.Spec.ClusterUID, rc.CreationTimestamp, first.UID, first.Spec.ClusterUID, first.CreationTimestamp)
		}
		if !rc.Status.RegisteredAt.Equal(first.Status.RegisteredAt) {
			t.Errorf("registeredAt moved from %v to %v", first.Status.RegisteredAt, rc.Status.RegisteredAt)
		}
		if !rc.Status.ObservedAt.Time.Equal(later) {
			t.Errorf("observedAt = %v, want %v", rc.Status.ObservedAt, later)
		}
		if rc.Status.NodeSummary != "2/3" || len(rc.Status.Nodes) != 3 {
			t.Errorf("nodes = %s %+v, want 2/3 with three nodes", rc.Status.NodeSummary, rc.Status.Nodes)
		}
		if n := len(registeredClusters(ctx, t, admin)); n != 1 {
			t.Errorf("%d RegisteredClusters, want 1", n)
		}
	})

	t.Run("another backend is refused and changes nothing", func(t *testing.T) {
		other := framework.StartCluster(t, framework.ClusterOptions{})
		otherCS, err := kubernetes.NewForConfig(other.Config)
		if err != nil {
			t.Fatal(err)
		}
		before := &fleetv1alpha1.RegisteredCluster{}
		if err := admin.Get(ctx, client.ObjectKey{Name: fleetv1alpha1.HostName}, before); err != nil {
			t.Fatal(err)
		}
		facts, err := Inspect(ctx, otherCS)
		if err != nil {
			t.Fatal(err)
		}
		if facts.ClusterUID == before.Spec.ClusterUID {
			t.Fatalf("two kube-apiservers share the kube-system UID %s", facts.ClusterUID)
		}
		_, _, err = Register(ctx, asManager, facts, time.Now())
		var conflict *HostConflictError
		if !errors.As(err, &conflict) {
			t.Fatalf("err = %v, want a HostConflictError", err)
		}
		for _, want := range []string{before.Spec.ClusterUID, facts.ClusterUID, "delete the old record first"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		after := &fleetv1alpha1.RegisteredCluster{}
		if err := admin.Get(ctx, client.ObjectKey{Name: fleetv1alpha1.HostName}, after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("RegisteredCluster host changed: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
		}
	})

	t.Run("a second host under another name is refused at admission", func(t *testing.T) {
		second := &fleetv1alpha1.RegisteredCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "other"},
			Spec:       fleetv1alpha1.RegisteredClusterSpec{ClusterUID: "9b2c1d7e-0000-0000-0000-000000000000", IsHost: true},
		}
		err := admin.Create(ctx, second)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "only the RegisteredCluster named host may set spec.isHost") {
			t.Errorf("err = %v, want Invalid with the CEL rule's message", err)
		}
		if n := len(registeredClusters(ctx, t, admin)); n != 1 {
			t.Errorf("%d RegisteredClusters, want 1", n)
		}
	})

	t.Run("concurrent registrations after the host was deleted create one object", func(t *testing.T) {
		// Deleting the record is how the host moves; every racer then either creates "host" or
		// loses with AlreadyExists and returns the winner's object.
		if err := admin.Delete(ctx, &fleetv1alpha1.RegisteredCluster{ObjectMeta: metav1.ObjectMeta{Name: fleetv1alpha1.HostName}}); err != nil {
			t.Fatal(err)
		}
		facts, err := Inspect(ctx, backend)
		if err != nil {
			t.Fatal(err)
		}
		const racers = 4
		type result struct {
			uid     string
			created bool
			err     error
		}
		results := make(chan result, racers)
		for range racers {
			go func() {
				rc, created, err := Register(ctx, asManager, facts, time.Now())
				r := result{created: created, err: err}
				if rc != nil {
					r.uid = string(rc.UID)
				}
				results <- r
			}()
		}
		creators, uids := 0, map[string]bool{}
		for range racers {
			r := <-results
			if r.err != nil {
				t.Errorf("Register: %v", r.err)
				continue
			}
			if r.created {
				creators++
			}
			uids[r.uid] = true
		}
		if creators != 1 || len(uids) != 1 {
			t.Errorf("%d registrations created, objects %v; want one creator and one object", creators, uids)
		}
		if n := len(registeredClusters(ctx, t, admin)); n != 1 {
			t.Errorf("%d RegisteredClusters, want 1", n)
		}
	})

	t.Run("a host record whose isHost was turned off is made the host again", func(t *testing.T) {
		rc := &fleetv1alpha1.RegisteredCluster{}
		if err := admin.Get(ctx, client.ObjectKey{Name: fleetv1alpha1.HostName}, rc); err != nil {
			t.Fatal(err)
		}
		before := rc.DeepCopy()
		rc.Spec.IsHost = false
		if err := admin.Patch(ctx, rc, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		facts, err := Inspect(ctx, backend)
		if err != nil {
			t.Fatal(err)
		}
		got, created, err := Register(ctx, asManager, facts, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if created || !got.Spec.IsHost || got.UID != rc.UID {
			t.Errorf("created %v, isHost %v, uid %s; want false, true, %s", created, got.Spec.IsHost, got.UID, rc.UID)
		}
	})

	t.Run("nothing else was created", func(t *testing.T) {
		if got := namespaceNames(ctx, t, backendAdmin); !slices.Equal(got, namespacesBefore) {
			t.Errorf("backend namespaces %v, before registering %v", got, namespacesBefore)
		}
		assertNoHostClusters(ctx, t, adminCfg)
	})
}

// assertNoHostClusters checks that no workspace has a HostCluster: listed through the
// kubeopera.io export's virtual workspace across every bound workspace (a tenant workspace is
// made so that the export has an endpoint), and in the platform workspace itself if it serves
// the kind.
func assertNoHostClusters(ctx context.Context, t *testing.T, platformCfg *rest.Config) {
	t.Helper()
	if _, err := workspaces.EnsureWorkspace(ctx, kcpEnv.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	if _, err := workspaces.EnsureWorkspace(ctx, kcpEnv.Config, "root:orgs", "acme", workspaces.TenantWorkspaceTypeIn(bootstrap.PlatformWorkspace)); err != nil {
		t.Fatal(err)
	}
	hostClusters := schema.GroupVersionResource{Group: "kubeopera.io", Version: "v1alpha1", Resource: "hostclusters"}
	dyn, err := dynamic.NewForConfig(platformCfg)
	if err != nil {
		t.Fatal(err)
	}
	var endpoints []any
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		slice, err := dyn.Resource(schema.GroupVersionResource{Group: "apis.kcp.io", Version: "v1alpha1", Resource: "apiexportendpointslices"}).Get(ctx, "kubeopera.io", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		endpoints, _, _ = unstructured.NestedSlice(slice.Object, "status", "endpoints")
		return len(endpoints) > 0, nil
	})
	if err != nil {
		t.Fatalf("endpoint slice kubeopera.io lists no endpoint: %v", err)
	}
	for _, e := range endpoints {
		url, _, _ := unstructured.NestedString(e.(map[string]any), "url")
		cfg := rest.CopyConfig(platformCfg)
		cfg.Host = url + "/clusters/*"
		vw, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		list, err := vw.Resource(hostClusters).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing HostClusters through %s: %v", url, err)
		}
		if len(list.Items) != 0 {
			t.Errorf("%d HostClusters in the bound workspaces, want none", len(list.Items))
		}
	}
	list, err := dyn.Resource(hostClusters).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// The platform workspace publishes the kind but does not serve it.
	case err != nil:
		t.Fatal(err)
	case len(list.Items) != 0:
		t.Errorf("%d HostClusters in the platform workspace, want none", len(list.Items))
	}
}

// TestInspectWithoutCloudProvider reads a cluster whose nodes carry no providerID (no cloud
// controller manager), a page at a time, and keeps the first nodes by name.
func TestInspectWithoutCloudProvider(t *testing.T) {
	c := framework.StartCluster(t, framework.ClusterOptions{})
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, n := range []struct {
		name  string
		ready bool
	}{{"worker-3", true}, {"worker-1", true}, {"worker-2", false}} {
		addNode(ctx, t, cs, n.name, "", n.ready)
	}
	oldPage, oldMax := listPageSize, maxNodes
	listPageSize, maxNodes = 2, 2
	t.Cleanup(func() { listPageSize, maxNodes = oldPage, oldMax })

	f, err := Inspect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if f.Provider != health.UnknownProvider || f.Region != "" {
		t.Errorf("provider %q region %q, want %q and none", f.Provider, f.Region, health.UnknownProvider)
	}
	if f.NodeSummary() != "2/3" {
		t.Errorf("nodes %s, want 2/3", f.NodeSummary())
	}
	if len(f.Nodes) != 2 || f.Nodes[0].Name != "worker-1" || f.Nodes[1].Name != "worker-2" {
		t.Errorf("nodes %+v, want worker-1 and worker-2", f.Nodes)
	}
	if f.ClusterUID == "" || f.KubernetesVersion == "" {
		t.Errorf("clusterUID %q, version %q, want both", f.ClusterUID, f.KubernetesVersion)
	}
}

// TestSchema applies RegisteredClusters to the platform workspace and checks that kcp admits or
// refuses each as the CRD's schema and CEL rules say. It runs after TestRegisterHost and leaves
// RegisteredCluster host as it found it.
func TestSchema(t *testing.T) {
	admin, _, _ := platform(t)
	ctx := t.Context()
	rc := func(name, uid string, isHost bool, source fleetv1alpha1.ClusterSource) *fleetv1alpha1.RegisteredCluster {
		return &fleetv1alpha1.RegisteredCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       fleetv1alpha1.RegisteredClusterSpec{ClusterUID: uid, IsHost: isHost, Source: source},
		}
	}
	const uid = "3f1a2b4c-0000-0000-0000-000000000000"
	creates := []struct {
		name   string
		obj    *fleetv1alpha1.RegisteredCluster
		reason string // "" when it is admitted
	}{
		{"a cluster that is not the host, under any name", rc("edge-1", uid, false, ""), ""},
		{"the host under another name", rc("edge-2", uid, true, fleetv1alpha1.SourceSelfRegistered), "only the RegisteredCluster named host may set spec.isHost"},
		{"an empty clusterUID", rc("edge-3", "", false, ""), "spec.clusterUID"},
		{"an unknown source", rc("edge-4", uid, false, "connected_existing"), "spec.source"},
	}
	for _, tc := range creates {
		t.Run("create: "+tc.name, func(t *testing.T) {
			err := admin.Create(ctx, tc.obj)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tc.obj.Spec.Source != fleetv1alpha1.SourceSelfRegistered {
					t.Errorf("spec.source = %q, want the default %q", tc.obj.Spec.Source, fleetv1alpha1.SourceSelfRegistered)
				}
				t.Cleanup(func() { _ = admin.Delete(context.Background(), tc.obj) })
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("err = %v, want Invalid naming %q", err, tc.reason)
			}
		})
	}
	t.Run("update: clusterUID is immutable", func(t *testing.T) {
		obj := rc("edge-5", uid, false, "")
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), obj) })
		obj.Spec.ClusterUID = "9b2c1d7e-0000-0000-0000-000000000000"
		if err := admin.Update(ctx, obj); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.clusterUID is immutable") {
			t.Errorf("err = %v, want Invalid: spec.clusterUID is immutable", err)
		}
	})
	t.Run("update: a non-host cannot become the host", func(t *testing.T) {
		obj := rc("edge-6", uid, false, "")
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), obj) })
		obj.Spec.IsHost = true
		if err := admin.Update(ctx, obj); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "only the RegisteredCluster named host") {
			t.Errorf("err = %v, want Invalid naming the host rule", err)
		}
	})
}
