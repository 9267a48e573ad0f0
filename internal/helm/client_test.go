package helm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/reconcile"

	"github.com/go-logr/logr/testr"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeopera/kubeopera/test/framework"
)

var (
	chartDir string // vCluster's own chart, _tools/charts/vcluster
	assets   string // directory of the envtest binaries

	backendOnce sync.Once
	backendErr  error
	env         *envtest.Environment
	restConfig  *rest.Config
	kube        kubernetes.Interface
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	chartDir = framework.VClusterChart()
	assets = filepath.Join(root, "_tools", "bin")
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		assets = dir
	}
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to stop envtest: %v\n", err)
		}
	}
	os.Exit(code)
}

// backend starts the test's kube-apiserver on first use, so that tests of
// pure functions need none; it fails t when the server cannot start.
func backend(t *testing.T) {
	t.Helper()
	framework.SkipWithoutServers(t)
	backendOnce.Do(func() {
		for _, n := range []string{"kube-apiserver", "etcd"} {
			if _, err := os.Stat(filepath.Join(assets, n)); err != nil {
				backendErr = fmt.Errorf("%s is missing from %s: run `make tools` (hack/build-tools.sh) or set KUBEBUILDER_ASSETS", n, assets)
				return
			}
		}
		env = &envtest.Environment{BinaryAssetsDirectory: assets}
		if restConfig, backendErr = env.Start(); backendErr != nil {
			backendErr = fmt.Errorf("failed to start envtest: %w", backendErr)
			return
		}
		if kube, backendErr = kubernetes.NewForConfig(restConfig); backendErr != nil {
			backendErr = fmt.Errorf("failed to create clientset: %w", backendErr)
		}
	})
	if backendErr != nil {
		t.Fatal(backendErr)
	}
}

// setup returns a client for the test chart and a fresh namespace.
func setup(t *testing.T) (*SDKClient, string) {
	t.Helper()
	backend(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "helm-test-"}}
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("failed to create namespace: %v", err)
	}
	c, err := New(restConfig, Options{ChartRef: chartDir, CacheDir: t.TempDir(), Log: testr.New(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, ns.Name
}

// vclusterValues are values in the layout the controller uses.
func vclusterValues() map[string]any {
	return map[string]any{
		"controlPlane": map[string]any{
			"distro": map[string]any{"k3s": map[string]any{"enabled": true}},
			"statefulSet": map[string]any{
				"labels": map[string]any{"tenant": "acme"},
				"resources": map[string]any{
					"requests": map[string]any{"cpu": "500m", "memory": "1Gi"},
					"limits":   map[string]any{"cpu": "2", "memory": "4Gi"},
				},
			},
		},
		"sync": map[string]any{"toHost": map[string]any{
			"ingresses":       map[string]any{"enabled": true},
			"serviceAccounts": map[string]any{"enabled": true},
		}},
		"exportKubeConfig": map[string]any{
			"server": "https://acme.example.com",
			"secret": map[string]any{"name": "acme-kubeconfig"},
		},
		"policies": map[string]any{
			"networkPolicy": map[string]any{"enabled": true},
			"resourceQuota": map[string]any{"enabled": true, "quota": map[string]any{
				"requests.cpu": "4", "requests.memory": "8Gi", "count/pods": 50,
			}},
			"limitRange": map[string]any{
				"enabled":        true,
				"default":        map[string]any{"cpu": "1", "memory": "1Gi"},
				"defaultRequest": map[string]any{"cpu": "100m", "memory": "128Mi"},
			},
		},
	}
}

func TestInstallUpgradeUninstall(t *testing.T) {
	ctx := context.Background()
	c, ns := setup(t)
	const name = "acme"

	values := vclusterValues()
	obs, err := c.Observe(ctx, Release{Namespace: ns, Name: name}, values)
	if err != nil || obs != (Observation{}) {
		t.Fatalf("Observe(missing) = %+v, %v; want the zero Observation", obs, err)
	}

	obs, err = c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, values)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	want := Observation{Exists: true, UpToDate: true, State: StateDeployed, Revision: 1, ChartVersion: "0.21.0", Description: "Install complete"}
	if obs != want {
		t.Errorf("install = %+v, want %+v", obs, want)
	}

	sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("failed to get StatefulSet: %v", err)
	}
	if got := sts.Labels; got["app"] != "vcluster" || got["release"] != name || got["tenant"] != "acme" {
		t.Errorf("StatefulSet labels = %v", got)
	}
	pod := sts.Spec.Template.Spec
	if pod.ServiceAccountName != "vc-"+name {
		t.Errorf("serviceAccountName = %q, want vc-%s", pod.ServiceAccountName, name)
	}
	if len(pod.InitContainers) != 1 {
		t.Errorf("k3s enabled: got %d init containers, want 1", len(pod.InitContainers))
	}
	res := pod.Containers[0].Resources
	expectQuantity(t, "requests.cpu", res.Requests[corev1.ResourceCPU], "500m")
	expectQuantity(t, "requests.memory", res.Requests[corev1.ResourceMemory], "1Gi")
	expectQuantity(t, "limits.cpu", res.Limits[corev1.ResourceCPU], "2")
	expectQuantity(t, "limits.memory", res.Limits[corev1.ResourceMemory], "4Gi")

	quota, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "vc-"+name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("failed to get ResourceQuota: %v", err)
	}
	expectQuantity(t, "quota requests.cpu", quota.Spec.Hard[corev1.ResourceRequestsCPU], "4")
	expectQuantity(t, "quota requests.memory", quota.Spec.Hard[corev1.ResourceRequestsMemory], "8Gi")
	expectQuantity(t, "quota count/pods", quota.Spec.Hard["count/pods"], "50")
	lr, err := kube.CoreV1().LimitRanges(ns).Get(ctx, "vc-"+name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("failed to get LimitRange: %v", err)
	}
	expectQuantity(t, "limitRange default cpu", lr.Spec.Limits[0].Default[corev1.ResourceCPU], "1")
	expectQuantity(t, "limitRange defaultRequest memory", lr.Spec.Limits[0].DefaultRequest[corev1.ResourceMemory], "128Mi")
	if _, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "vc-work-"+name, metav1.GetOptions{}); err != nil {
		t.Errorf("failed to get NetworkPolicy: %v", err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "vc-"+name, metav1.GetOptions{}); err != nil {
		t.Errorf("failed to get ServiceAccount: %v", err)
	}
	if _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("failed to get Service: %v", err)
	}

	if obs, err = c.Observe(ctx, Release{Namespace: ns, Name: name}, values); err != nil || obs != want {
		t.Fatalf("Observe = %+v, %v; want %+v", obs, err, want)
	}
	// The values are compared whatever their map order; other values are not up to date.
	if obs, err = c.Observe(ctx, Release{Namespace: ns, Name: name}, vclusterValues()); err != nil || !obs.UpToDate {
		t.Errorf("Observe(same values, new maps) = %+v, %v; want up to date", obs, err)
	}
	if obs, err = c.Observe(ctx, Release{Namespace: ns, Name: name}, nil); err != nil || obs.UpToDate || !obs.Exists || obs.State != StateDeployed {
		t.Errorf("Observe(other values) = %+v, %v; want existing, deployed, not up to date", obs, err)
	}

	// Same values again: an upgrade, not an "already exists" error.
	obs, err = c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, values)
	if err != nil {
		t.Fatalf("second InstallOrUpgrade: %v", err)
	}
	if obs.Revision != 2 || obs.State != StateDeployed || !obs.UpToDate {
		t.Errorf("second InstallOrUpgrade = %+v, want deployed, up-to-date revision 2", obs)
	}

	// Values are the complete desired state: disabling a policy removes it.
	values["policies"].(map[string]any)["networkPolicy"] = map[string]any{"enabled": false}
	if obs, err = c.Observe(ctx, Release{Namespace: ns, Name: name}, values); err != nil || obs.UpToDate {
		t.Errorf("Observe(changed values) = %+v, %v; want not up to date", obs, err)
	}
	if obs, err = c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, values); err != nil {
		t.Fatalf("third InstallOrUpgrade: %v", err)
	}
	if obs.Revision != 3 || obs.State != StateDeployed || !obs.UpToDate {
		t.Errorf("third InstallOrUpgrade = %+v, want deployed, up-to-date revision 3", obs)
	}
	if obs, err = c.Observe(ctx, Release{Namespace: ns, Name: name}, values); err != nil || !obs.UpToDate || obs.Revision != 3 {
		t.Errorf("Observe after upgrade = %+v, %v; want up-to-date revision 3", obs, err)
	}
	expectGone(t, "NetworkPolicy", func() error {
		_, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "vc-work-"+name, metav1.GetOptions{})
		return err
	})

	if err := c.Uninstall(ctx, Release{Namespace: ns, Name: name}); err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	for kind, get := range map[string]func() error{
		"StatefulSet": func() error { _, err := kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{}); return err },
		"Service":     func() error { _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); return err },
		"ServiceAccount": func() error {
			_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "vc-"+name, metav1.GetOptions{})
			return err
		},
		"ResourceQuota": func() error {
			_, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "vc-"+name, metav1.GetOptions{})
			return err
		},
		"LimitRange": func() error {
			_, err := kube.CoreV1().LimitRanges(ns).Get(ctx, "vc-"+name, metav1.GetOptions{})
			return err
		},
	} {
		expectGone(t, kind, get)
	}
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil || len(secrets.Items) != 0 {
		t.Errorf("release records after Uninstall: %d, %v; want none", len(secrets.Items), err)
	}
	if obs, err := c.Observe(ctx, Release{Namespace: ns, Name: name}, values); err != nil || obs != (Observation{}) {
		t.Errorf("Observe after Uninstall = %+v, %v; want the zero Observation", obs, err)
	}
	if err := c.Uninstall(ctx, Release{Namespace: ns, Name: name}); err != nil {
		t.Errorf("second Uninstall: %v", err)
	}
}

func TestInstallWithChartDefaults(t *testing.T) {
	ctx := context.Background()
	c, ns := setup(t)

	obs, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: "plain"}, nil)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if obs.Revision != 1 || obs.State != StateDeployed || !obs.UpToDate {
		t.Errorf("install = %+v, want deployed, up-to-date revision 1", obs)
	}
	// nil and empty values are the same desired state.
	if obs, err := c.Observe(ctx, Release{Namespace: ns, Name: "plain"}, map[string]any{}); err != nil || !obs.UpToDate {
		t.Errorf("Observe(empty values) = %+v, %v; want up to date", obs, err)
	}
	sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("failed to get StatefulSet: %v", err)
	}
	expectQuantity(t, "requests.memory", sts.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory], "256Mi")
	// The chart's default distro is k8s (templates/_distro.tpl), whose Pod copies the vcluster,
	// kube-controller-manager and kube-apiserver binaries in init containers
	// (templates/_init-containers.tpl, vcluster.k8s.initContainers; the scheduler is off).
	if n := len(sts.Spec.Template.Spec.InitContainers); n != 3 {
		t.Errorf("k8s distro (the chart's default): got %d init containers, want 3", n)
	}
	for kind, get := range map[string]func() error{
		"NetworkPolicy": func() error {
			_, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "vc-work-plain", metav1.GetOptions{})
			return err
		},
		"ResourceQuota": func() error {
			_, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "vc-plain", metav1.GetOptions{})
			return err
		},
		"LimitRange": func() error {
			_, err := kube.CoreV1().LimitRanges(ns).Get(ctx, "vc-plain", metav1.GetOptions{})
			return err
		},
	} {
		expectGone(t, kind, get)
	}
}

func TestRecoversFromPendingRelease(t *testing.T) {
	ctx := context.Background()
	c, ns := setup(t)
	const name = "stuck"

	if _, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, nil); err != nil {
		t.Fatalf("install: %v", err)
	}
	setLatestStatus(t, c, ns, name, rcommon.StatusPendingInstall)
	if obs, err := c.Observe(ctx, Release{Namespace: ns, Name: name}, nil); err != nil || obs.State != StatePending || !obs.UpToDate {
		t.Errorf("Observe(pending-install) = %+v, %v; want pending, up to date", obs, err)
	}
	obs, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, nil)
	if err != nil {
		t.Fatalf("InstallOrUpgrade after pending-install: %v", err)
	}
	if obs.Revision != 1 || obs.State != StateDeployed {
		t.Errorf("after pending-install = %+v, want reinstalled deployed revision 1", obs)
	}

	if _, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, nil); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	setLatestStatus(t, c, ns, name, rcommon.StatusPendingUpgrade)
	if obs, err = c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, nil); err != nil {
		t.Fatalf("InstallOrUpgrade after pending-upgrade: %v", err)
	}
	if obs.Revision != 3 || obs.State != StateDeployed {
		t.Errorf("after pending-upgrade = %+v, want deployed revision 3", obs)
	}
}

func TestRetriesFailedFirstInstall(t *testing.T) {
	ctx := context.Background()
	c, ns := setup(t)
	const name = "broken"

	// The API server rejects "bogus" as a quota resource name, after Helm has
	// recorded the release.
	bad := map[string]any{"policies": map[string]any{"resourceQuota": map[string]any{
		"enabled": true, "quota": map[string]any{"bogus": "1"},
	}}}
	if _, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, bad); err == nil {
		t.Fatal("install with an invalid quota succeeded")
	} else if !strings.Contains(err.Error(), "failed to install release "+ns+"/"+name) {
		t.Errorf("install error = %q, want release context", err)
	} else if !reconcile.IsTerminal(err) {
		// The API server refuses the rendered ResourceQuota as invalid (422): the same values
		// render the same object again.
		t.Errorf("install error %q is transient, want terminal", err)
	} else {
		t.Logf("install error: %v", err)
	}
	obs, err := c.Observe(ctx, Release{Namespace: ns, Name: name}, bad)
	if err != nil || !obs.Exists || obs.State != StateFailed || !obs.UpToDate || !strings.Contains(obs.Description, "bogus") {
		t.Fatalf("Observe after failed install = %+v, %v; want failed with the API server's reason", obs, err)
	}

	if obs, err = c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, nil); err != nil {
		t.Fatalf("InstallOrUpgrade after failed install: %v", err)
	}
	if obs.Revision != 1 || obs.State != StateDeployed {
		t.Errorf("after failed install = %+v, want reinstalled deployed revision 1", obs)
	}
}

// TestBadChartRef: a chart path that does not exist is a terminal error, an
// unreachable registry a transient one; both name the chart.
func TestBadChartRef(t *testing.T) {
	backend(t)
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "no-such-chart")
	c, err := New(restConfig, Options{ChartRef: missing, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = c.InstallOrUpgrade(ctx, Release{Namespace: "default", Name: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "failed to install or upgrade release default/x: failed to load chart "+missing) {
		t.Errorf("InstallOrUpgrade with a missing chart: error = %v, want it to name the release and the chart", err)
	}
	if !reconcile.IsTerminal(err) {
		t.Errorf("missing chart: %v is transient, want terminal", err)
	}
	t.Logf("missing chart: %v", err)

	if err := Reachable(ctx, Options{ChartRef: missing}); err == nil || !reconcile.IsTerminal(err) {
		t.Errorf("Reachable(missing local chart) = %v, want a terminal error", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	oci := "oci://127.0.0.1:1/charts/vcluster"
	err = Reachable(ctx, Options{ChartRef: oci, ChartVersion: "0.21.2", CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "failed to load chart "+oci+" version 0.21.2") {
		t.Errorf("Reachable(unreachable registry) = %v, want pull error", err)
	}
	if reconcile.IsTerminal(err) {
		t.Errorf("unreachable registry: %v is terminal, want transient", err)
	}
	t.Logf("unreachable registry: %v", err)
	if err := Reachable(ctx, Options{ChartRef: chartDir, CacheDir: t.TempDir()}); err != nil {
		t.Errorf("Reachable(local chart) = %v", err)
	}
	if _, err := New(restConfig, Options{}); err == nil {
		t.Error("New without ChartRef succeeded")
	}
}

func TestIsLocalChart(t *testing.T) {
	for ref, want := range map[string]bool{
		"oci://ghcr.io/loft-sh/charts/vcluster":   false,
		"https://example.com/vcluster-0.21.2.tgz": false,
		"_tools/charts/vcluster":                  true,
		"/abs/vcluster-0.21.2.tgz":                true,
		"./vcluster":                              true,
	} {
		if got := IsLocalChart(ref); got != want {
			t.Errorf("IsLocalChart(%q) = %v, want %v", ref, got, want)
		}
	}
}

// setLatestStatus simulates an interrupted operation.
func setLatestStatus(t *testing.T, c *SDKClient, ns, name string, status rcommon.Status) {
	t.Helper()
	cfg, unlock, err := c.enter(context.Background(), Release{Namespace: ns, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	latest, _, err := history(cfg, name)
	if err != nil || latest == nil {
		t.Fatalf("history: %v, %v", latest, err)
	}
	latest.SetStatus(status, "simulated")
	if err := cfg.Releases.Update(latest); err != nil {
		t.Fatal(err)
	}
}

func expectQuantity(t *testing.T, what string, got resource.Quantity, want string) {
	t.Helper()
	if got.Cmp(resource.MustParse(want)) != 0 {
		t.Errorf("%s = %s, want %s", what, got.String(), want)
	}
}

func expectGone(t *testing.T, kind string, get func() error) {
	t.Helper()
	if err := get(); !apierrors.IsNotFound(err) {
		t.Errorf("%s: got error %v, want NotFound", kind, err)
	}
}

// TestValuesOutsideTheChartSchemaAreRefused: the vcluster chart's schema refuses unknown keys
// under exportKubeConfig (the seed's exportKubeConfig.enabled is one); the install fails with
// Helm's schema error instead of deploying something else.
func TestValuesOutsideTheChartSchemaAreRefused(t *testing.T) {
	c, ns := setup(t)
	_, err := c.InstallOrUpgrade(context.Background(), Release{Namespace: ns, Name: "schema"}, map[string]any{
		"exportKubeConfig": map[string]any{"enabled": true},
	})
	if err == nil || !strings.Contains(err.Error(), "exportKubeConfig") {
		t.Fatalf("want a schema error naming exportKubeConfig, got %v", err)
	}
	if !reconcile.IsTerminal(err) {
		t.Errorf("schema error %q is transient, want terminal", err)
	}
	var herr *Error
	if !errors.As(err, &herr) || herr.Namespace != ns || herr.Release != "schema" || herr.Op != "install" {
		t.Errorf("schema error = %#v, want an *Error for install of %s/schema", herr, ns)
	}
	// Nothing was recorded: the values were refused before Helm wrote a revision.
	if obs, err := c.Observe(context.Background(), Release{Namespace: ns, Name: "schema"}, nil); err != nil || obs.Exists {
		t.Errorf("Observe after schema error = %+v, %v; want no release", obs, err)
	}
}
