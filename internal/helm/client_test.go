package helm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// binaryWait bounds how long TestMain waits for envtest binaries that are
// still being built.
const binaryWait = 5 * time.Minute

var (
	restConfig *rest.Config
	kube       kubernetes.Interface
	chartDir   string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	chartDir = filepath.Join(root, "test", "charts", "vcluster")
	assets := filepath.Join(root, "_tools", "bin")
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		assets = dir
	}
	if err := waitForBinaries(assets, binaryWait, "kube-apiserver", "etcd"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start envtest: %v\n", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to stop envtest: %v\n", err)
		}
	}()
	restConfig = cfg
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "failed to create clientset: %v\n", err)
		return 1
	}
	return m.Run()
}

// waitForBinaries polls dir until all binaries exist, for at most timeout.
func waitForBinaries(dir string, timeout time.Duration, names ...string) error {
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("envtest binaries %v not found in %s (build them into _tools/bin or set KUBEBUILDER_ASSETS)", missing, dir)
		}
		fmt.Fprintf(os.Stderr, "waiting for envtest binaries %v in %s\n", missing, dir)
		time.Sleep(10 * time.Second)
	}
}

// setup returns a client for the test chart and a fresh namespace.
func setup(t *testing.T) (*SDKClient, string) {
	t.Helper()
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
		"global": map[string]any{"labels": map[string]any{"tenant": "acme"}},
		"controlPlane": map[string]any{
			"distro": map[string]any{"k3s": map[string]any{"enabled": true}},
			"statefulSet": map[string]any{"resources": map[string]any{
				"requests": map[string]any{"cpu": "500m", "memory": "1Gi"},
				"limits":   map[string]any{"cpu": "2", "memory": "4Gi"},
			}},
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
		"unknownKey": map[string]any{"accepted": true},
	}
}

func TestInstallUpgradeUninstall(t *testing.T) {
	ctx := context.Background()
	c, ns := setup(t)
	const name = "acme"

	info, err := c.Observe(ctx, ns, name)
	if err != nil || info != nil {
		t.Fatalf("Observe(missing) = %+v, %v; want nil, nil", info, err)
	}
	if HashValues(map[string]any{"a": 1, "b": 2}) != HashValues(map[string]any{"b": 2, "a": 1}) || HashValues(map[string]any{"a": 1}) == HashValues(map[string]any{"a": 2}) {
		t.Error("HashValues must be stable across map order and differ for different values")
	}

	values := vclusterValues()
	info, err = c.InstallOrUpgrade(ctx, ns, name, values)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	want := ReleaseInfo{Name: name, Namespace: ns, Revision: 1, Status: release.StatusDeployed, ChartVersion: "0.21.2-test", ValuesHash: HashValues(values), Description: "Install complete"}
	if *info != want {
		t.Errorf("install = %+v, want %+v", *info, want)
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
	if _, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "vc-"+name, metav1.GetOptions{}); err != nil {
		t.Errorf("failed to get NetworkPolicy: %v", err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "vc-"+name, metav1.GetOptions{}); err != nil {
		t.Errorf("failed to get ServiceAccount: %v", err)
	}
	if _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("failed to get Service: %v", err)
	}

	info, err = c.Observe(ctx, ns, name)
	if err != nil || info == nil || info.Status != release.StatusDeployed || info.Revision != 1 {
		t.Fatalf("Observe = %+v, %v; want deployed revision 1", info, err)
	}

	// Same values again: an upgrade, not an "already exists" error.
	info, err = c.InstallOrUpgrade(ctx, ns, name, values)
	if err != nil {
		t.Fatalf("second InstallOrUpgrade: %v", err)
	}
	if info.Revision != 2 || info.Status != release.StatusDeployed {
		t.Errorf("second InstallOrUpgrade = %+v, want deployed revision 2", *info)
	}

	// Values are the complete desired state: disabling a policy removes it.
	values["policies"].(map[string]any)["networkPolicy"] = map[string]any{"enabled": false}
	if info, err = c.InstallOrUpgrade(ctx, ns, name, values); err != nil {
		t.Fatalf("third InstallOrUpgrade: %v", err)
	}
	if info.Revision != 3 || info.Status != release.StatusDeployed {
		t.Errorf("third InstallOrUpgrade = %+v, want deployed revision 3", *info)
	}
	expectGone(t, "NetworkPolicy", func() error {
		_, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "vc-"+name, metav1.GetOptions{})
		return err
	})

	if err := c.Uninstall(ctx, ns, name); err != nil {
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
	if info, err := c.Observe(ctx, ns, name); err != nil || info != nil {
		t.Errorf("Observe after Uninstall = %+v, %v; want nil, nil", info, err)
	}
	if err := c.Uninstall(ctx, ns, name); err != nil {
		t.Errorf("second Uninstall: %v", err)
	}
}

func TestInstallWithChartDefaults(t *testing.T) {
	ctx := context.Background()
	c, ns := setup(t)

	info, err := c.InstallOrUpgrade(ctx, ns, "plain", nil)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if info.Revision != 1 || info.Status != release.StatusDeployed {
		t.Errorf("install = %+v, want deployed revision 1", *info)
	}
	sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("failed to get StatefulSet: %v", err)
	}
	expectQuantity(t, "requests.memory", sts.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory], "256Mi")
	if n := len(sts.Spec.Template.Spec.InitContainers); n != 0 {
		t.Errorf("k3s disabled: got %d init containers, want 0", n)
	}
	for kind, get := range map[string]func() error{
		"NetworkPolicy": func() error {
			_, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "vc-plain", metav1.GetOptions{})
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

	if _, err := c.InstallOrUpgrade(ctx, ns, name, nil); err != nil {
		t.Fatalf("install: %v", err)
	}
	setLatestStatus(t, c, ns, name, release.StatusPendingInstall)
	info, err := c.InstallOrUpgrade(ctx, ns, name, nil)
	if err != nil {
		t.Fatalf("InstallOrUpgrade after pending-install: %v", err)
	}
	if info.Revision != 1 || info.Status != release.StatusDeployed {
		t.Errorf("after pending-install = %+v, want reinstalled deployed revision 1", *info)
	}

	if _, err := c.InstallOrUpgrade(ctx, ns, name, nil); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	setLatestStatus(t, c, ns, name, release.StatusPendingUpgrade)
	if info, err = c.InstallOrUpgrade(ctx, ns, name, nil); err != nil {
		t.Fatalf("InstallOrUpgrade after pending-upgrade: %v", err)
	}
	if info.Revision != 3 || info.Status != release.StatusDeployed {
		t.Errorf("after pending-upgrade = %+v, want deployed revision 3", *info)
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
	if _, err := c.InstallOrUpgrade(ctx, ns, name, bad); err == nil {
		t.Fatal("install with an invalid quota succeeded")
	} else if !strings.Contains(err.Error(), "failed to install release "+ns+"/"+name) {
		t.Errorf("install error = %q, want release context", err)
	} else {
		t.Logf("install error: %v", err)
	}
	info, err := c.Observe(ctx, ns, name)
	if err != nil || info == nil || info.Status != release.StatusFailed {
		t.Fatalf("Observe after failed install = %+v, %v; want failed", info, err)
	}

	if info, err = c.InstallOrUpgrade(ctx, ns, name, nil); err != nil {
		t.Fatalf("InstallOrUpgrade after failed install: %v", err)
	}
	if info.Revision != 1 || info.Status != release.StatusDeployed {
		t.Errorf("after failed install = %+v, want reinstalled deployed revision 1", *info)
	}
}

func TestBadChartRef(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "no-such-chart")
	c, err := New(restConfig, Options{ChartRef: missing, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = c.InstallOrUpgrade(ctx, "default", "x", nil)
	if err == nil || !strings.Contains(err.Error(), "failed to load chart "+missing) {
		t.Errorf("InstallOrUpgrade with a missing chart: error = %v, want it to name the chart", err)
	}
	t.Logf("missing chart: %v", err)

	if err := Reachable(ctx, Options{ChartRef: missing}); err == nil {
		t.Error("Reachable(missing local chart) = nil, want error")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	oci := "oci://127.0.0.1:1/charts/vcluster"
	err = Reachable(ctx, Options{ChartRef: oci, ChartVersion: "0.21.2", CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "failed to pull chart "+oci) {
		t.Errorf("Reachable(unreachable registry) = %v, want pull error", err)
	}
	t.Logf("unreachable registry: %v", err)
	if err := Reachable(ctx, Options{ChartRef: chartDir}); err != nil {
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
		"test/charts/vcluster":                    true,
		"/abs/vcluster-0.21.2.tgz":                true,
		"./vcluster":                              true,
	} {
		if got := IsLocalChart(ref); got != want {
			t.Errorf("IsLocalChart(%q) = %v, want %v", ref, got, want)
		}
	}
}

// setLatestStatus simulates an interrupted operation.
func setLatestStatus(t *testing.T, c *SDKClient, ns, name string, status release.Status) {
	t.Helper()
	nc, err := c.lock(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Unlock()
	latest, _, err := history(nc.cfg, name)
	if err != nil || latest == nil {
		t.Fatalf("history: %v, %v", latest, err)
	}
	latest.SetStatus(status, "simulated")
	if err := nc.cfg.Releases.Update(latest); err != nil {
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
	_, err := c.InstallOrUpgrade(context.Background(), ns, "schema", map[string]any{
		"exportKubeConfig": map[string]any{"enabled": true},
	})
	if err == nil || !strings.Contains(err.Error(), "exportKubeConfig") {
		t.Fatalf("want a schema error naming exportKubeConfig, got %v", err)
	}
}
