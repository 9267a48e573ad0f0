package flux_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/reconcile"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/test/framework"
)

// localChart is the local Flux chart hack/build-tools.sh assembles (with Flux's CRDs).
func localChart(t *testing.T) string {
	t.Helper()
	dir := framework.FluxChart()
	if _, err := os.Stat(filepath.Join(dir, "crds", "source.toolkit.fluxcd.io_gitrepositories.yaml")); err != nil {
		t.Fatalf("the local Flux chart is missing from %s: run `make tools` (hack/build-tools.sh flux-chart): %v", dir, err)
	}
	return dir
}

func newInstaller(t *testing.T, values map[string]any) *flux.Installer {
	t.Helper()
	i, err := flux.NewInstaller(flux.Options{ChartRef: localChart(t), CacheDir: t.TempDir(), Values: values, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// targetClient is a client of the target with the Kubernetes and Flux types.
func targetClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := flux.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// releaseSecrets lists Helm's release records of flux2 in flux-system.
func releaseSecrets(t *testing.T, c client.Client) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := c.List(t.Context(), list, client.InNamespace(flux.Namespace), client.MatchingLabels{"owner": "helm", "name": flux.ReleaseName}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestEnsureInstallsFlux(t *testing.T) {
	target := framework.StartBackend(t)
	c := targetClient(t, target.Config)
	ctx := t.Context()

	start := time.Now()
	res, err := newInstaller(t, nil).Ensure(ctx, target.Config)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	t.Logf("install took %s: %+v", time.Since(start).Round(time.Millisecond), res)
	if res.Adopted || res.Revision != 1 || res.ChartVersion != "0.1.0" || !strings.Contains(res.Message, "Installed Flux") {
		t.Fatalf("Ensure = %+v, want revision 1 of chart 0.1.0 installed", res)
	}
	for _, crd := range []string{"gitrepositories.source.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io", "ocirepositories.source.toolkit.fluxcd.io",
		"helmrepositories.source.toolkit.fluxcd.io", "helmreleases.helm.toolkit.fluxcd.io"} {
		if err := c.Get(ctx, client.ObjectKey{Name: crd}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s: %v", crd, err)
		}
	}
	for _, name := range []string{flux.SourceController, flux.KustomizeController, "helm-controller"} {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: name}, d); err != nil {
			t.Fatalf("Deployment %s: %v", name, err)
		}
		if d.Labels[flux.PartOfLabel] != flux.PartOfValue || d.Labels["app.kubernetes.io/component"] != name {
			t.Errorf("Deployment %s labels = %v", name, d.Labels)
		}
	}
	if n := len(releaseSecrets(t, c)); n != 1 {
		t.Errorf("release records = %d, want 1", n)
	}

	// No kubelet runs the controllers: Flux is not healthy.
	h, err := flux.CheckHealth(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	want := "source-controller: Deployment not Available (no Available condition yet); kustomize-controller: Deployment not Available (no Available condition yet); " +
		"helm-controller: Deployment not Available (no Available condition yet)"
	if h.Healthy || h.Message != want {
		t.Errorf("CheckHealth = %+v, want unhealthy: %s", h, want)
	}

	// Same values: a no-op. Other values: an upgrade.
	res, err = newInstaller(t, nil).Ensure(ctx, target.Config)
	if err != nil || res.Revision != 1 || !strings.Contains(res.Message, "up to date") {
		t.Fatalf("second Ensure = %+v, %v; want revision 1 up to date", res, err)
	}
	res, err = newInstaller(t, map[string]any{"logLevel": "debug"}).Ensure(ctx, target.Config)
	if err != nil || res.Revision != 2 || !strings.Contains(res.Message, "Upgraded Flux") {
		t.Fatalf("Ensure with other values = %+v, %v; want revision 2", res, err)
	}

	// A chart that does not exist is terminal; the release is left as it is.
	missing, err := flux.NewInstaller(flux.Options{ChartRef: filepath.Join(t.TempDir(), "no-such-chart"), CacheDir: t.TempDir(), Values: map[string]any{"logLevel": "error"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = missing.Ensure(ctx, target.Config); err == nil || !reconcile.IsTerminal(err) {
		t.Errorf("Ensure with a chart that does not exist = %v, want a terminal error", err)
	} else {
		t.Logf("terminal: %v", err)
	}
	// An unreachable target is transient.
	bad := rest.CopyConfig(target.Config)
	bad.Host = "https://127.0.0.1:1"
	bad.Timeout = 2 * time.Second
	if _, err := newInstaller(t, nil).Ensure(ctx, bad); err == nil || reconcile.IsTerminal(err) {
		t.Errorf("Ensure on an unreachable target = %v, want a transient error", err)
	}
}

// fluxInstallDeployment is a controller Deployment as someone else's Flux install has it (the
// labels `flux install` sets), without Helm's ownership annotations.
func fluxInstallDeployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: flux.Namespace, Name: name, Labels: map[string]string{
			flux.PartOfLabel: flux.PartOfValue, "app.kubernetes.io/component": name, "app.kubernetes.io/instance": flux.Namespace,
		}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "ghcr.io/fluxcd/" + name + ":v1.8.0"}}},
			},
		},
	}
}

// setAvailable writes d's status as the Deployment controller does for an available rollout, or
// an unavailable one.
func setAvailable(t *testing.T, c client.Client, d *appsv1.Deployment, available bool) {
	t.Helper()
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	n, cond := int32(0), appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}
	if available {
		n, cond = 1, appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{cond}}
	if err := c.Status().Update(t.Context(), d); err != nil {
		t.Fatal(err)
	}
}

// TestEnsureAdoptsFlux: Flux's controllers already in flux-system, not installed by us, are
// adopted when healthy (nothing written) and not installed over when not.
func TestEnsureAdoptsFlux(t *testing.T) {
	target := framework.StartBackend(t)
	c := targetClient(t, target.Config)
	ctx := t.Context()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: flux.Namespace}}); err != nil {
		t.Fatal(err)
	}
	deps := []*appsv1.Deployment{fluxInstallDeployment(flux.SourceController), fluxInstallDeployment(flux.KustomizeController)}
	for _, d := range deps {
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	setAvailable(t, c, deps[0], true)
	setAvailable(t, c, deps[1], false)

	i := newInstaller(t, nil)
	_, err := i.Ensure(ctx, target.Config)
	if err == nil || reconcile.IsTerminal(err) || !strings.Contains(err.Error(), "kustomize-controller: Deployment not Available (MinimumReplicasUnavailable)") {
		t.Fatalf("Ensure over an unhealthy Flux of someone else = %v, want a transient error naming kustomize-controller", err)
	}
	t.Logf("unhealthy: %v", err)
	if n := len(releaseSecrets(t, c)); n != 0 {
		t.Fatalf("release records = %d after refusing, want 0", n)
	}

	setAvailable(t, c, deps[1], true)
	res, err := i.Ensure(ctx, target.Config)
	if err != nil || !res.Adopted || res.Revision != 0 {
		t.Fatalf("Ensure over a healthy Flux of someone else = %+v, %v; want adopted", res, err)
	}
	t.Logf("adopted: %s", res.Message)
	if n := len(releaseSecrets(t, c)); n != 0 {
		t.Errorf("release records = %d after adopting, want 0", n)
	}
	for _, d := range deps {
		got := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil || got.Generation != 1 || got.Spec.Template.Spec.Containers[0].Image != d.Spec.Template.Spec.Containers[0].Image {
			t.Errorf("Deployment %s changed by adoption: %v", d.Name, err)
		}
	}
	h, err := flux.CheckHealth(ctx, c)
	if err != nil || !h.Healthy || h.Message != "source-controller, kustomize-controller Available" {
		t.Errorf("CheckHealth = %+v, %v", h, err)
	}

	// Another Flux Deployment (found by the chart's labels) counts too.
	extra := fluxInstallDeployment("helm-controller")
	if err := c.Create(ctx, extra); err != nil {
		t.Fatal(err)
	}
	h, err = flux.CheckHealth(ctx, c)
	if err != nil || h.Healthy || h.Message != "helm-controller: Deployment not Available (no Available condition yet)" {
		t.Errorf("CheckHealth with helm-controller not available = %+v, %v", h, err)
	}
	setAvailable(t, c, extra, true)
	if h, err = flux.CheckHealth(ctx, c); err != nil || !h.Healthy || h.Message != "source-controller, kustomize-controller, helm-controller Available" {
		t.Errorf("CheckHealth = %+v, %v", h, err)
	}
}

// TestDeploymentHealthRules: what CheckHealth counts as available, a Deployment at a time.
func TestDeploymentHealthRules(t *testing.T) {
	target := framework.StartBackend(t)
	c := targetClient(t, target.Config)
	ctx := t.Context()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: flux.Namespace}}); err != nil {
		t.Fatal(err)
	}
	h, err := flux.CheckHealth(ctx, c)
	if err != nil || h.Healthy || h.Message != "source-controller: Deployment not found; kustomize-controller: Deployment not found" {
		t.Fatalf("CheckHealth without Flux = %+v, %v", h, err)
	}
	sc := fluxInstallDeployment(flux.SourceController)
	if err := c.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	setAvailable(t, c, sc, true)
	kc := fluxInstallDeployment(flux.KustomizeController)
	if err := c.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}

	for name, tc := range map[string]struct {
		status appsv1.DeploymentStatus
		want   string // "" = healthy
	}{
		"available": {status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}}},
		"no status yet": {status: appsv1.DeploymentStatus{},
			want: "kustomize-controller: Deployment not Available (no Available condition yet)"},
		"generation not observed": {status: appsv1.DeploymentStatus{ObservedGeneration: 0,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
			want: "kustomize-controller: Deployment generation 1 not observed yet (observed 0)"},
		"unavailable": {status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}}},
			want: "kustomize-controller: Deployment not Available (MinimumReplicasUnavailable)"},
		"deadline exceeded": {status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "too slow"}}},
			want: "kustomize-controller: Deployment rollout failed (ProgressDeadlineExceeded: too slow)"},
		"rollout in progress": {status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
			want: "kustomize-controller: Deployment rollout in progress (1 old replicas terminating)"},
		"new replica not available": {status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
			want: "kustomize-controller: Deployment not Available (available 0/1)"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(kc), kc); err != nil {
				t.Fatal(err)
			}
			kc.Status = tc.status
			if err := c.Status().Update(ctx, kc); err != nil {
				t.Fatal(err)
			}
			h, err := flux.CheckHealth(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && !h.Healthy || tc.want != "" && (h.Healthy || h.Message != tc.want) {
				t.Errorf("CheckHealth = %+v, want %q (\"\" = healthy)", h, tc.want)
			}
		})
	}
}

// ensureCtx bounds a step of a test.
func ensureCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// CheckHealth lists at most 50 of Flux's Deployments: more is no Flux, and the check stops with
// a read limit error instead of reading them all (a real API server pages the list at the limit
// and hands back a continue token).
func TestCheckHealthStopsAtFiftyDeployments(t *testing.T) {
	target := framework.StartBackend(t)
	c := targetClient(t, target.Config)
	ctx := t.Context()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: flux.Namespace}}); err != nil {
		t.Fatal(err)
	}
	for i := range 51 {
		if err := c.Create(ctx, fluxInstallDeployment(fmt.Sprintf("controller-%02d", i))); err != nil {
			t.Fatal(err)
		}
	}
	_, err := flux.CheckHealth(ctx, c)
	if le, ok := readlimit.As(err); !ok || le.Error() != "the cluster's Flux Deployment list in flux-system exceeded 50 items" {
		t.Fatalf("CheckHealth with 51 Flux Deployments = %v, want the item cap", err)
	}
	if err := c.Delete(ctx, fluxInstallDeployment("controller-50")); err != nil {
		t.Fatal(err)
	}
	if _, err := flux.CheckHealth(ctx, c); err != nil {
		t.Errorf("CheckHealth with 50 Flux Deployments: %v", err)
	}
}
