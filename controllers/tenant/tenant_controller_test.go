package tenant_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/syncer"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/tenant"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/kubeoperaapi"
	imanager "github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/workspaces"
)

// This suite runs the Tenant reconciler in a real multicluster manager on real servers: a
// backend (kube-apiserver, etcd, kube-controller-manager) where it works with the manager's
// shipped backend identity (config/rbac), and a real kcp with three tenant workspaces (acme,
// globex, initech, each bound to both exports) that the manager serves as kcp's unprivileged
// "user" with the platform workspace role the product ships, through the kubeopera.io export's
// virtual workspace and the project's fleet provider, as the manager binary does. The e2e suite
// runs the binary itself; this one is the faster table of phase transitions, in process.

// helmRecorder wraps the real Helm client: it records how many operations run at once, and makes
// every install take a while, as a real one over the network does.
type helmRecorder struct {
	helm.Client
	mu            sync.Mutex
	total, maxAll int
}

func (h *helmRecorder) enter(string) func() {
	h.mu.Lock()
	h.total++
	if h.total > h.maxAll {
		h.maxAll = h.total
	}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.total--
		h.mu.Unlock()
	}
}

func (h *helmRecorder) Observe(ctx context.Context, rel helm.Release, values map[string]any) (helm.Observation, error) {
	defer h.enter(rel.Namespace)()
	return h.Client.Observe(ctx, rel, values)
}

func (h *helmRecorder) InstallOrUpgrade(ctx context.Context, rel helm.Release, values map[string]any) (helm.Observation, error) {
	defer h.enter(rel.Namespace)()
	time.Sleep(300 * time.Millisecond)
	return h.Client.InstallOrUpgrade(ctx, rel, values)
}

func (h *helmRecorder) Uninstall(ctx context.Context, rel helm.Release) error {
	defer h.enter(rel.Namespace)()
	return h.Client.Uninstall(ctx, rel)
}

type suite struct {
	backend   client.Client
	backendAs *rest.Config
	admin     *rest.Config
	ws        map[string]client.Client
	lc        map[string]string
	chart     *sim.ChartServer
	api       *sim.KubeoperaAPI
	helm      *helmRecorder
	vclusters *sim.VClusterPods
	// scheduled are the vCluster StatefulSets (namespace/name) whose Pod may run: each test
	// lets its vCluster come up when it wants it up (vclusterUp).
	scheduled sync.Map
}

// schedule is sim.VClusterPods' Schedule: the vClusters a test let run.
func (s *suite) schedule(namespace, name string) bool {
	_, ok := s.scheduled.Load(namespace + "/" + name)
	return ok
}

// vclusterUp lets the real vCluster of release in namespace run and waits until it wrote its
// kubeconfig Secret.
func (s *suite) vclusterUp(t *testing.T, namespace, release string) *sim.VClusterKubeconfig {
	t.Helper()
	s.scheduled.Store(namespace+"/"+release, true)
	vc, err := sim.AwaitVClusterKubeconfig(t.Context(), s.admin, namespace, release, 4*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return vc
}

// setup starts the manager with the Tenant controller; opts change the Reconciler first.
func setup(t *testing.T, opts ...func(*tenant.Reconciler)) *suite {
	t.Helper()
	s := &suite{api: sim.NewKubeoperaAPI()}
	// The manager as internal/manager.Run wires it, on a real backend and a real kcp with three
	// tenant workspaces.
	h := fleettest.Start(t, "acme", "globex", "initech")
	s.admin, s.backend, s.backendAs, s.ws, s.lc = h.BackendAdmin, h.Backend, h.BackendAs, h.WS, h.LC

	// A chart repository that is unreachable (503) until a test brings it up.
	s.chart = sim.NewChartServer(t, framework.VClusterChart(), http.StatusServiceUnavailable)
	t.Cleanup(s.api.Close)

	real, err := helm.New(s.backendAs, helm.Options{ChartRef: s.chart.ChartURL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.helm = &helmRecorder{Client: real}
	r := &tenant.Reconciler{
		Workspaces:      h.Fleet,
		Backend:         h.BackendStore(),
		Helm:            s.helm,
		API:             &kubeoperaapi.Client{BaseURL: s.api.URL, Token: "t"},
		ClaimsNamespace: "kubeopera-system",
		// As the manager builds it: claims read from its cache, Secrets awaited by watch.
		Claims:          h.Manager.GetLocalManager().GetCache(),
		BackendWatcher:  h.Managed.BackendWatcher,
		Limits:          tenant.Limits{MaxTenants: 4, MaxCPU: resource.MustParse("5")},
		RequeueInterval: 500 * time.Millisecond,
		// Drift checks often enough for a test to see one repair.
		ReadyRecheckInterval: 3 * time.Second,
		Concurrency:          8,
	}
	// Every vCluster runs for real where its StatefulSet's Pod would (sim.VClusterPods), with
	// the k8s distro and the backend's Service range, once its test lets it (schedule).
	serviceCIDR, err := vcluster.BackendServiceCIDR(t.Context(), kubernetes.NewForConfigOrDie(s.admin))
	if err != nil {
		t.Fatal(err)
	}
	r.Distro, r.ServiceCIDR = vcluster.DistroK8s, serviceCIDR
	s.vclusters = sim.StartVClusterPods(t, s.admin, framework.ToolsBin(), s.schedule)
	for _, o := range opts {
		o(r)
	}
	if err := r.SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)
	return s
}

func newTenant(t *testing.T, c client.Client, name, cloudSpaceID, cpu string) {
	t.Helper()
	tn := &kov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: kov1alpha1.TenantSpec{
			UserID: "3f1a2b4c-0000-4000-8000-000000000001", TenantName: name, CloudSpaceID: cloudSpaceID,
			Quota: kov1alpha1.TenantQuota{CPU: resource.MustParse(cpu), Memory: resource.MustParse("1Gi")},
		},
	}
	if err := c.Create(t.Context(), tn); err != nil {
		t.Fatal(err)
	}
}

func getTenant(t *testing.T, c client.Client, name string) *kov1alpha1.Tenant {
	t.Helper()
	tn := &kov1alpha1.Tenant{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, tn); err != nil {
		t.Fatal(err)
	}
	return tn
}

func cond(tn *kov1alpha1.Tenant, typ string) string {
	c := reconcile.GetCondition(tn, typ)
	if c == nil {
		return "absent"
	}
	return string(c.Status) + "/" + c.Reason
}

func describe(tn *kov1alpha1.Tenant) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "phase=%s message=%q", tn.Status.Phase, tn.Status.Message)
	for _, c := range tn.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s/%s", c.Type, c.Status, c.Reason)
	}
	return b.String()
}

// waitFor waits until the Tenant satisfies ok.
func waitFor(t *testing.T, c client.Client, name, what string, ok func(*kov1alpha1.Tenant) bool) *kov1alpha1.Tenant {
	t.Helper()
	var tn *kov1alpha1.Tenant
	framework.Eventually(t, time.Minute, "Tenant "+name+" "+what, func() (bool, string) {
		tn = &kov1alpha1.Tenant{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, tn); err != nil {
			return false, err.Error()
		}
		return ok(tn), describe(tn)
	})
	return tn
}

func (s *suite) namespaceExists(t *testing.T, name string) bool {
	t.Helper()
	err := s.backend.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Namespace{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestTenantPhaseTransitions walks the Tenant's state machine. The subtests build on each other
// where the order is the point (the chart registry is down before the first install).
func TestTenantPhaseTransitions(t *testing.T) {
	s := setup(t)
	acme, globex, initech := s.ws["acme"], s.ws["globex"], s.ws["initech"]
	acmeHost := workspaces.VClusterNamespace(s.lc["acme"], "alice")

	t.Run("a chart registry outage is retried and shown as Reconciling, never Failed", func(t *testing.T) {
		newTenant(t, acme, "alice", "7e9d3a1b-0000-4000-8000-000000000002", "2")
		tn := waitFor(t, acme, "alice", "Reconciling with a transient error", func(tn *kov1alpha1.Tenant) bool {
			return cond(tn, kov1alpha1.ReconcilingCondition) == "True/"+kov1alpha1.TransientErrorReason
		})
		if tn.Status.Phase == kov1alpha1.TenantPhaseFailed || cond(tn, kov1alpha1.StalledCondition) != "absent" {
			t.Fatalf("a registry outage made the Tenant Failed/Stalled: %s", describe(tn))
		}
		if !strings.Contains(tn.Status.Message, "503") && !strings.Contains(tn.Status.Message, "Service Unavailable") {
			t.Errorf("the message does not say what failed: %q", tn.Status.Message)
		}
		// In the platform's words: the chart server's address (an internal URL to a tenant) is in
		// the manager's log, never in the tenant's status.
		if u, _ := url.Parse(s.chart.URL); strings.Contains(tn.Status.Message, u.Host) || strings.Contains(tn.Status.Message, "http://") {
			t.Errorf("the message names the chart server's address: %q", tn.Status.Message)
		}
		for _, c := range tn.Status.Conditions {
			if u, _ := url.Parse(s.chart.URL); strings.Contains(c.Message, u.Host) {
				t.Errorf("condition %s names the chart server's address: %q", c.Type, c.Message)
			}
		}
		if cond(tn, kov1alpha1.ReleaseDeployedCondition) != "False/"+kov1alpha1.TransientErrorReason {
			t.Errorf("ReleaseDeployed = %s, want False/TransientError", cond(tn, kov1alpha1.ReleaseDeployedCondition))
		}
		// The registry comes back: the Tenant proceeds by itself.
		s.chart.Status.Store(http.StatusOK)
		tn = waitFor(t, acme, "alice", "deployed and waiting for the vCluster", func(tn *kov1alpha1.Tenant) bool {
			return cond(tn, kov1alpha1.ReleaseDeployedCondition) == "True/Succeeded" && cond(tn, kov1alpha1.KubeconfigDeliveredCondition) == "False/Waiting"
		})
		if tn.Status.Phase != kov1alpha1.TenantPhaseProvisioning {
			t.Errorf("phase = %s, want Provisioning", tn.Status.Phase)
		}
		// It waits for the Secret a real vCluster writes: vc-<vCluster name>, the vCluster name
		// being the release name.
		if want := "Secret " + acmeHost + "/vc-vc-alice"; !strings.Contains(tn.Status.Message, want) {
			t.Errorf("message %q does not name %s", tn.Status.Message, want)
		}
	})

	t.Run("an install refused by the backend API for a while is retried, never Failed", func(t *testing.T) {
		// The backend's API server refuses the vCluster's StatefulSet for a while (a policy, as
		// an overloaded or misbehaving admission chain would): Helm records the revision as
		// failed and reports the refusal (403, transient). Once the API accepts it again, the
		// Tenant proceeds by itself.
		s.chart.Status.Store(http.StatusOK) // the chart registry is up
		refuse := admissionRefusal(t, s.admin, "vc-erin")
		newTenant(t, acme, "erin", "e7177", "1")
		tn := waitFor(t, acme, "erin", "Reconciling with a transient error after Helm recorded a failed revision", func(tn *kov1alpha1.Tenant) bool {
			return cond(tn, kov1alpha1.ReleaseDeployedCondition) == "False/"+kov1alpha1.TransientErrorReason
		})
		framework.Consistently(t, 3*time.Second, "the Tenant is not Failed while the API refuses", func() (bool, string) {
			tn = getTenant(t, acme, "erin")
			return tn.Status.Phase != kov1alpha1.TenantPhaseFailed && cond(tn, kov1alpha1.StalledCondition) == "absent", describe(tn)
		})
		refuse()
		waitFor(t, acme, "erin", "deployed", func(tn *kov1alpha1.Tenant) bool {
			return cond(tn, kov1alpha1.ReleaseDeployedCondition) == "True/Succeeded"
		})
		// Delete it again so the limits of the later subtests are as they were.
		if err := acme.Delete(t.Context(), getTenant(t, acme, "erin")); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "erin gone", func() (bool, string) {
			err := acme.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "erin"}, &kov1alpha1.Tenant{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	})

	t.Run("the Secret vCluster writes makes the Tenant Ready", func(t *testing.T) {
		s.vclusterUp(t, acmeHost, "vc-alice")
		tn := waitFor(t, acme, "alice", "Ready", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseReady })
		for _, typ := range []string{kov1alpha1.ReadyCondition, kov1alpha1.AdmittedCondition, kov1alpha1.BackendNamespaceReadyCondition, kov1alpha1.ReleaseDeployedCondition, kov1alpha1.KubeconfigDeliveredCondition, kov1alpha1.CallbackSucceededCondition} {
			if cond(tn, typ) != "True/Succeeded" {
				t.Errorf("%s = %s", typ, cond(tn, typ))
			}
		}
		if cond(tn, kov1alpha1.ReconcilingCondition) != "absent" || cond(tn, kov1alpha1.StalledCondition) != "absent" || tn.Status.ObservedGeneration != tn.Generation {
			t.Errorf("a Ready Tenant: %s observed %d/%d", describe(tn), tn.Status.ObservedGeneration, tn.Generation)
		}
		sec := &corev1.Secret{}
		if err := acme.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "tenant-7e9d3a1b-0000-4000-8000-000000000002-kubeconfig"}, sec); err != nil {
			t.Fatalf("delivered kubeconfig: %v", err)
		}
		if len(sec.Data[tenant.DeliveredKubeconfigKey]) == 0 {
			t.Error("the delivered Secret holds no kubeconfig")
		}
		if n := len(s.api.CallsFor("7e9d3a1b-0000-4000-8000-000000000002")); n != 1 {
			t.Errorf("kubeopera-api was called %d times, want once", n)
		}
		// Helm's records of the release live in kcp-<fp>, out of reach of the vCluster syncer's
		// ServiceAccount, which may write Secrets in the host namespace.
		if got := s.releaseRecords(t, acmeHost, "vc-alice"); len(got) != 0 {
			t.Errorf("release records in the host namespace: %v, want none", got)
		}
		if got := s.releaseRecords(t, workspaces.Namespace(s.lc["acme"]), "vc-alice"); len(got) == 0 {
			t.Error("no release records in kcp-<fp>")
		}
	})

	// A Ready Tenant's pass is a drift check: it runs every step, those done already (Once)
	// included, so what was deleted behind the platform's back comes back.
	t.Run("a drift check restores a deleted delivered Secret and a deleted host namespace", func(t *testing.T) {
		delivered := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tenant-7e9d3a1b-0000-4000-8000-000000000002-kubeconfig"}}
		if err := acme.Delete(t.Context(), delivered); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "the delivered kubeconfig back", func() (bool, string) {
			err := acme.Get(t.Context(), client.ObjectKeyFromObject(delivered), &corev1.Secret{})
			return err == nil, fmt.Sprint(err)
		})
		if err := s.backend.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: acmeHost}}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "the host namespace made again", func() (bool, string) {
			ns := &corev1.Namespace{}
			if err := s.backend.Get(t.Context(), client.ObjectKey{Name: acmeHost}, ns); err != nil {
				return false, err.Error()
			}
			// The namespace controller empties the old one first; the new one is not deleting.
			return ns.DeletionTimestamp == nil, "the old namespace is still being deleted"
		})
	})

	t.Run("a fingerprint collision on the host namespace writes nothing, not even kcp-<fp>", func(t *testing.T) {
		host := workspaces.VClusterNamespace(s.lc["globex"], "collide")
		store := workspaces.Namespace(s.lc["globex"])
		foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: host, Annotations: map[string]string{workspaces.LogicalClusterAnnotation: "someone-else"}}}
		if err := s.backend.Create(t.Context(), foreign); err != nil {
			t.Fatal(err)
		}
		newTenant(t, globex, "collide", "c0111de", "1")
		tn := waitFor(t, globex, "collide", "Failed", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseFailed })
		if cond(tn, kov1alpha1.BackendNamespaceReadyCondition) != "False/"+kov1alpha1.FingerprintCollisionReason || cond(tn, kov1alpha1.StalledCondition) != "True/"+kov1alpha1.FingerprintCollisionReason {
			t.Errorf("want FingerprintCollision, got %s", describe(tn))
		}
		if s.namespaceExists(t, store) {
			t.Errorf("the store namespace %s was created although the host namespace collided", store)
		}
	})

	t.Run("a cloudSpaceID belongs to the first workspace that claims it", func(t *testing.T) {
		newTenant(t, globex, "thief", "7e9d3a1b-0000-4000-8000-000000000002", "1")
		tn := waitFor(t, globex, "thief", "Failed", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseFailed })
		if cond(tn, kov1alpha1.AdmittedCondition) != "False/"+kov1alpha1.NameConflictReason {
			t.Errorf("want Admitted False/NameConflict, got %s", describe(tn))
		}
		if strings.Contains(tn.Status.Message, s.lc["acme"]) {
			t.Errorf("the message names the other workspace: %q", tn.Status.Message)
		}
		if s.namespaceExists(t, workspaces.VClusterNamespace(s.lc["globex"], "thief")) {
			t.Error("a host namespace was created for the conflicting Tenant")
		}
		framework.Consistently(t, 2*time.Second, "kubeopera-api told only about the first claim", func() (bool, string) {
			n := len(s.api.CallsFor("7e9d3a1b-0000-4000-8000-000000000002"))
			return n == 1, fmt.Sprintf("%d calls", n)
		})
	})

	t.Run("the workspace's limits refuse a Tenant before anything is installed", func(t *testing.T) {
		// acme has alice (2 CPU); 4 more CPU would make 6, over the limit of 5.
		newTenant(t, acme, "bigbob", "b0b", "4")
		tn := waitFor(t, acme, "bigbob", "Failed", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseFailed })
		if cond(tn, kov1alpha1.AdmittedCondition) != "False/"+kov1alpha1.QuotaExceededReason || !strings.Contains(tn.Status.Message, "limit of 5") {
			t.Errorf("want QuotaExceeded naming the limit, got %s", describe(tn))
		}
		if s.namespaceExists(t, workspaces.VClusterNamespace(s.lc["acme"], "bigbob")) {
			t.Error("a host namespace was created for a Tenant over the limit")
		}
		// A refused Tenant holds nothing: a small one still fits.
		newTenant(t, acme, "carol", "ca201", "1")
		waitFor(t, acme, "carol", "deployed", func(tn *kov1alpha1.Tenant) bool {
			return cond(tn, kov1alpha1.ReleaseDeployedCondition) == "True/Succeeded"
		})
		// An admitted Tenant cannot grow past the limits either: the bigger quota is refused and
		// its release is not upgraded.
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"quota":{"cpu":"10"}}}`))
		if err := acme.Patch(t.Context(), &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "carol"}}, patch); err != nil {
			t.Fatal(err)
		}
		tn = waitFor(t, acme, "carol", "refused for its new quota", func(tn *kov1alpha1.Tenant) bool {
			return cond(tn, kov1alpha1.AdmittedCondition) == "False/"+kov1alpha1.QuotaExceededReason
		})
		if tn.Status.Phase != kov1alpha1.TenantPhaseFailed || !strings.Contains(tn.Status.Message, "limit of 5") {
			t.Errorf("want Failed naming the limit, got %s", describe(tn))
		}
		if n := len(s.releaseRecords(t, workspaces.Namespace(s.lc["acme"]), "vc-carol")); n != 1 {
			t.Errorf("the release was upgraded to a quota over the limit: %d revisions", n)
		}
	})

	t.Run("Tenants of several workspaces are reconciled at once", func(t *testing.T) {
		names := []string{"node-1", "node-2", "node-3", "node-4"}
		for _, n := range names {
			newTenant(t, initech, n, "init-"+n, "1")
		}
		newTenant(t, globex, "glob-1", "glob-g1", "1")
		for _, n := range names {
			waitFor(t, initech, n, "Provisioning", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseProvisioning })
		}
		waitFor(t, globex, "glob-1", "Provisioning", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseProvisioning })
		// A fifth Tenant in one workspace is over the count limit (4).
		newTenant(t, initech, "node-5", "init-n5", "1")
		tn := waitFor(t, initech, "node-5", "Failed", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseFailed })
		if !strings.Contains(tn.Status.Message, "at most 4 Tenants") {
			t.Errorf("want the count limit named, got %s", describe(tn))
		}
		// (That Helm operations in one namespace never overlap is the Helm client's lock,
		// proven in internal/helm's TestOneOperationPerNamespace: here every Tenant has its own
		// namespace.)
		s.helm.mu.Lock()
		defer s.helm.mu.Unlock()
		if s.helm.maxAll < 2 {
			t.Errorf("at most %d Helm operation ran at once: one slow Helm call stalls every Tenant", s.helm.maxAll)
		}
	})

	t.Run("a tenant's own Secret where the kubeconfig would go is never overwritten", func(t *testing.T) {
		mine := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tenant-glob-g2-kubeconfig"},
			StringData: map[string]string{"note": "the tenant's own"},
		}
		if err := globex.Create(t.Context(), mine); err != nil {
			t.Fatal(err)
		}
		newTenant(t, globex, "glob-2", "glob-g2", "1")
		waitFor(t, globex, "glob-2", "Provisioning", func(tn *kov1alpha1.Tenant) bool {
			return cond(tn, kov1alpha1.ReleaseDeployedCondition) == "True/Succeeded"
		})
		s.vclusterUp(t, workspaces.VClusterNamespace(s.lc["globex"], "glob-2"), "vc-glob-2")
		tn := waitFor(t, globex, "glob-2", "Failed", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseFailed })
		if cond(tn, kov1alpha1.KubeconfigDeliveredCondition) != "False/"+kov1alpha1.NameConflictReason {
			t.Errorf("want KubeconfigDelivered False/NameConflict, got %s", describe(tn))
		}
		got := &corev1.Secret{}
		if err := globex.Get(t.Context(), client.ObjectKeyFromObject(mine), got); err != nil || string(got.Data["note"]) != "the tenant's own" || len(got.Data) != 1 {
			t.Errorf("the tenant's Secret was touched: %v %v", err, got.Data)
		}
	})

	t.Run("deleting a Tenant removes its release, Secrets, host namespace and cloudSpaceID claim", func(t *testing.T) {
		claim := client.ObjectKey{Namespace: "kubeopera-system", Name: tenant.ClaimName("7e9d3a1b-0000-4000-8000-000000000002")}
		if err := s.backend.Get(t.Context(), claim, &corev1.ConfigMap{}); err != nil {
			t.Fatalf("claim record: %v", err)
		}
		if err := acme.Delete(t.Context(), getTenant(t, acme, "alice")); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "alice gone", func() (bool, string) {
			err := acme.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "alice"}, &kov1alpha1.Tenant{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		if s.namespaceExists(t, acmeHost) {
			t.Error("host namespace still there")
		}
		if err := s.backend.Get(t.Context(), claim, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("claim record still there: %v", err)
		}
		stored := client.ObjectKey{Namespace: workspaces.Namespace(s.lc["acme"]), Name: "tenant-7e9d3a1b-0000-4000-8000-000000000002-kubeconfig"}
		if err := s.backend.Get(t.Context(), stored, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("stored kubeconfig still there: %v", err)
		}
		if got := s.releaseRecords(t, workspaces.Namespace(s.lc["acme"]), "vc-alice"); len(got) != 0 {
			t.Errorf("release records left in kcp-<fp>: %v", got)
		}
		// The freed cloudSpaceID can now be claimed by the other workspace: a retry succeeds.
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"kubeopera.io/retry":"1"}}}`))
		if err := globex.Patch(t.Context(), &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "thief"}}, patch); err != nil {
			t.Fatal(err)
		}
		tn := waitFor(t, globex, "thief", "Provisioning", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseProvisioning })
		if tn.Status.LastHandledRetry != "1" {
			t.Errorf("lastHandledRetry = %q", tn.Status.LastHandledRetry)
		}
	})
}

// TestTenantReleaseRecordedInItsHostNamespace: a vCluster installed before the Tenant controller
// kept Helm's records in kcp-<fp> (its records in the host namespace) is carried over when its
// Tenant is next reconciled: its objects are adopted in place (the StatefulSet keeps its UID: no
// second install fighting the first, no vCluster lost), the records move to kcp-<fp> and the old
// ones are removed; deleting the Tenant then removes everything.
func TestTenantReleaseRecordedInItsHostNamespace(t *testing.T) {
	s := setup(t)
	s.chart.Status.Store(http.StatusOK)
	ctx, acme := t.Context(), s.ws["acme"]
	lc := s.lc["acme"]
	host, store, release := workspaces.VClusterNamespace(lc, "olda"), workspaces.Namespace(lc), "vc-olda"

	// What an earlier manager left: the namespaces, and the release with its records in the host
	// namespace (Helm's default storage).
	mgr, err := client.New(s.backendAs, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backend := syncer.Backend{Client: mgr, Reader: mgr}
	if err := backend.EnsureNamespaces(ctx, lc, syncer.NamespaceClaim{Name: store}, syncer.NamespaceClaim{Name: host, Owner: "Tenant default/olda"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.helm.Client.InstallOrUpgrade(ctx, helm.Release{Namespace: host, Name: release}, nil); err != nil {
		t.Fatalf("installing the release the old way: %v", err)
	}
	before := &appsv1.StatefulSet{}
	if err := s.backend.Get(ctx, client.ObjectKey{Namespace: host, Name: release}, before); err != nil {
		t.Fatal(err)
	}
	if n := len(s.releaseRecords(t, host, release)); n != 1 {
		t.Fatalf("the old layout has %d records in the host namespace, want 1", n)
	}

	newTenant(t, acme, "olda", "01da", "1")
	waitFor(t, acme, "olda", "deployed", func(tn *kov1alpha1.Tenant) bool {
		return cond(tn, kov1alpha1.ReleaseDeployedCondition) == "True/Succeeded"
	})
	after := &appsv1.StatefulSet{}
	if err := s.backend.Get(ctx, client.ObjectKey{Namespace: host, Name: release}, after); err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID {
		t.Errorf("the vCluster's StatefulSet was recreated (UID %s, was %s); want it adopted in place", after.UID, before.UID)
	}
	if got := s.releaseRecords(t, host, release); len(got) != 0 {
		t.Errorf("records left in the host namespace: %v", got)
	}
	if got := s.releaseRecords(t, store, release); len(got) != 1 {
		t.Errorf("records in kcp-<fp>: %v, want one revision", got)
	}

	if err := acme.Delete(ctx, getTenant(t, acme, "olda")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "olda gone", func() (bool, string) {
		err := acme.Get(ctx, client.ObjectKey{Namespace: "default", Name: "olda"}, &kov1alpha1.Tenant{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if s.namespaceExists(t, host) {
		t.Error("host namespace still there")
	}
	if got := s.releaseRecords(t, store, release); len(got) != 0 {
		t.Errorf("records left in kcp-<fp> after the Tenant went: %v", got)
	}
}

// releaseRecords returns the names of the Helm records of release in namespace (Helm's secrets
// driver labels them owner=helm, name=<release>).
func (s *suite) releaseRecords(t *testing.T, namespace, release string) []string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := s.backend.List(t.Context(), list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": release}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sec := range list.Items {
		out = append(out, sec.Name)
	}
	return out
}

// admissionRefusal makes the backend's API server refuse StatefulSets named name (403 Forbidden,
// through a ValidatingAdmissionPolicy) until the returned function lifts it; both wait until the
// API server acts on the change.
func admissionRefusal(t *testing.T, admin *rest.Config, name string) func() {
	t.Helper()
	c, err := client.New(admin, client.Options{Scheme: imanager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"statefulsets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.metadata.name != '" + name + "'",
				Message:    "the API server refuses " + name + " for now",
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	probe := func() error {
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: appsv1.StatefulSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
				},
			},
		}
		return c.Create(t.Context(), sts, client.DryRunAll)
	}
	framework.Eventually(t, time.Minute, "the API server refusing "+name, func() (bool, string) {
		err := probe()
		return apierrors.IsForbidden(err), fmt.Sprint(err)
	})
	return func() {
		if err := c.Delete(t.Context(), binding); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "the API server accepting "+name+" again", func() (bool, string) {
			err := probe()
			return err == nil, fmt.Sprint(err)
		})
	}
}
