package helm

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/reconcile"

	"github.com/kubeopera/kubeopera/test/sim"

	"helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestSharedChart: the clients of several clusters share one chart load. A load that failed is
// retried by the next install (a transient error until then), and Observe works without the
// chart. Managed tells this package's releases from others.
func TestSharedChart(t *testing.T) {
	_, ns := setup(t)
	ns2, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "helm-test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.NewChartServer(t, chartDir, http.StatusServiceUnavailable)
	shared, err := NewSharedChart(Options{ChartRef: srv.ChartURL(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Two "targets": distinct configs (and so distinct transports) of the test's apiserver.
	targets := []struct {
		cfg *rest.Config
		ns  string
	}{{rest.CopyConfig(restConfig), ns}, {rest.CopyConfig(restConfig), ns2.Name}}
	clients := make([]*TargetClient, len(targets))
	for i, tg := range targets {
		if clients[i], err = shared.Client(tg.cfg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The chart server is down: installs fail, transiently; Observe needs no chart.
	if _, err := clients[0].InstallOrUpgrade(ctx, Release{Namespace: ns, Name: "shared"}, nil); err == nil || reconcile.IsTerminal(err) {
		t.Fatalf("InstallOrUpgrade with the chart server down = %v, want a transient error", err)
	} else {
		t.Logf("chart server down: %v", err)
	}
	if obs, err := clients[0].Observe(ctx, Release{Namespace: ns, Name: "shared"}, nil); err != nil || obs.Exists {
		t.Fatalf("Observe = %+v, %v; want no release and no error", obs, err)
	}
	failed := srv.Requests.Load()

	srv.Status.Store(http.StatusOK)
	for i, tg := range targets {
		obs, err := clients[i].InstallOrUpgrade(ctx, Release{Namespace: tg.ns, Name: "shared"}, map[string]any{"controlPlane": map[string]any{"statefulSet": map[string]any{"annotations": map[string]any{"n": fmt.Sprint(i)}}}})
		if err != nil || obs.State != StateDeployed || obs.Revision != 1 {
			t.Fatalf("target %d: InstallOrUpgrade = %+v, %v; want revision 1 deployed", i, obs, err)
		}
	}
	// A client made later reuses the loaded chart too.
	late, err := shared.Client(rest.CopyConfig(restConfig))
	if err != nil {
		t.Fatal(err)
	}
	if obs, err := late.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: "shared"}, map[string]any{"controlPlane": map[string]any{"statefulSet": map[string]any{"annotations": map[string]any{"n": "2"}}}}); err != nil || obs.Revision != 2 {
		t.Fatalf("late client: InstallOrUpgrade = %+v, %v; want revision 2", obs, err)
	}
	if n := srv.Requests.Load() - failed; n != 1 {
		t.Errorf("chart downloads after the server recovered = %d, want 1 for three clients", n)
	}

	// Managed tells this package's releases from others of the same kind.
	if ok, err := late.Managed(ctx, Release{Namespace: ns, Name: "shared"}); err != nil || !ok {
		t.Errorf("Managed(our release) = %v, %v; want true", ok, err)
	}
	if ok, err := late.Managed(ctx, Release{Namespace: ns, Name: "missing"}); err != nil || ok {
		t.Errorf("Managed(no release) = %v, %v; want false", ok, err)
	}
	cfg, err := late.configuration(Release{Namespace: ns, Name: "foreign"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := late.loadChart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(cfg) // as the Helm CLI installs: no labels of ours
	in.ReleaseName, in.Namespace = "foreign", ns
	in.WaitStrategy = helmkube.HookOnlyStrategy
	if _, err := in.Run(ch, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := late.Managed(ctx, Release{Namespace: ns, Name: "foreign"}); err != nil || ok {
		t.Errorf("Managed(a release made without this package) = %v, %v; want false", ok, err)
	}

	if _, err := NewSharedChart(Options{}); err == nil {
		t.Error("NewSharedChart without a chart reference succeeded")
	}
}
