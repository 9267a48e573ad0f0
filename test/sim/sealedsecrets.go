package sim

import (
	"context"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Where the sealed-secrets controller runs and how its certificate is fetched: kubeseal's
// defaults (sealed-secrets v0.32.2 cmd/kubeseal/main.go: --controller-name
// sealed-secrets-controller, --controller-namespace kube-system), which the chart meets with
// fullnameOverride sealed-secrets-controller in kube-system (helm/sealed-secrets README), and
// the certificate endpoint kubeseal reads through the API server's service proxy
// (pkg/kubeseal/kubeseal.go openCertCluster: GET /v1/cert.pem on the Service's port, service
// proxy scheme http). The chart's Service port is named http, port 8080 (values.yaml
// service.port, templates/service.yaml).
const (
	SealedSecretsControllerName = "sealed-secrets-controller"
	SealedSecretsNamespace      = "kube-system"
	SealedSecretsPortName       = "http"
	SealedSecretsCertPath       = "/v1/cert.pem"
	// SealedSecretsChartName is the chart's name in its Chart.yaml (and so in a chart
	// repository's index).
	SealedSecretsChartName = "sealed-secrets"
	// SealedSecretsRepository is the name of the HelmRepository InstallSealedSecrets writes in
	// flux-system.
	SealedSecretsRepository = "sealed-secrets"
)

var (
	helmRepositoryGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmrepositories"}
	helmReleaseGVR    = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
)

// SealedSecretsHelmObjects are the Flux objects that install the real sealed-secrets chart from
// the chart repository at repoURL (a ChartRepo serving SealedSecretsChart): a HelmRepository
// SealedSecretsRepository in flux-system (source-controller's type default: an HTTP Helm
// repository) and a HelmRelease SealedSecretsControllerName in flux-system whose release goes
// into kube-system with fullnameOverride sealed-secrets-controller, so that kubeseal's defaults
// find it. Field names: source-controller api v1 HelmRepositorySpec (url, interval) and
// helm-controller api v2 HelmReleaseSpec (chart.spec.{chart, version, sourceRef}, interval,
// releaseName, targetNamespace, install.createNamespace, values).
func SealedSecretsHelmObjects(repoURL string, interval time.Duration) []*unstructured.Unstructured {
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "HelmRepository",
		"metadata":   map[string]any{"name": SealedSecretsRepository, "namespace": FluxNamespace},
		"spec":       map[string]any{"url": repoURL, "interval": interval.String()},
	}}
	release := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2",
		"kind":       "HelmRelease",
		"metadata":   map[string]any{"name": SealedSecretsControllerName, "namespace": FluxNamespace},
		"spec": map[string]any{
			"interval":        interval.String(),
			"releaseName":     SealedSecretsControllerName,
			"targetNamespace": SealedSecretsNamespace,
			"install":         map[string]any{"createNamespace": true},
			"chart": map[string]any{"spec": map[string]any{
				"chart":     SealedSecretsChartName,
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": SealedSecretsRepository, "namespace": FluxNamespace},
				"interval":  interval.String(),
			}},
			"values": map[string]any{"fullnameOverride": SealedSecretsControllerName},
		},
	}}
	return []*unstructured.Unstructured{repo, release}
}

// InstallSealedSecrets creates (or replaces the spec of) SealedSecretsHelmObjects on the target,
// where Flux's source-controller and helm-controller run (the flux2 chart with FluxPods). What
// then happens is Flux's and the controller's: helm-controller installs the chart, FluxPods runs
// the controller's Deployment (sealed-secrets-controller in kube-system) as the real binary.
// Wait with WaitSealedSecrets.
func InstallSealedSecrets(ctx context.Context, target *rest.Config, repoURL string) error {
	dc, err := dynamic.NewForConfig(target)
	if err != nil {
		return err
	}
	for _, o := range SealedSecretsHelmObjects(repoURL, time.Minute) {
		gvr := helmRepositoryGVR
		if o.GetKind() == "HelmRelease" {
			gvr = helmReleaseGVR
		}
		ri := dc.Resource(gvr).Namespace(o.GetNamespace())
		cur, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = ri.Create(ctx, o, metav1.CreateOptions{})
		case err == nil:
			cur.Object["spec"] = o.Object["spec"]
			_, err = ri.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("failed to write %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// StartSealedSecrets is what a suite calls to have the real sealed-secrets controller on a
// target where Flux runs under FluxPods (the local Flux chart, helm-controller included; as
// root): it serves charts (the real sealed-secrets chart, framework.SealedSecretsChart(), and
// any stand-ins, StandInCharts) from a new ChartRepo in dir, installs the sealed-secrets chart
// through Flux (InstallSealedSecrets) and waits up to timeout for the controller to serve its
// certificate (WaitSealedSecrets). It returns the repository (Close it when done; its URL is
// what a GitOps tree's HelmRepository names) and the certificate (PEM).
func StartSealedSecrets(ctx context.Context, target *rest.Config, dir string, timeout time.Duration, charts ...string) (*ChartRepo, []byte, error) {
	repo, err := StartChartRepo(dir, charts...)
	if err != nil {
		return nil, nil, err
	}
	if err := InstallSealedSecrets(ctx, target, repo.URL); err != nil {
		_ = repo.Close()
		return nil, nil, err
	}
	cert, err := WaitSealedSecrets(ctx, target, timeout)
	if err != nil {
		_ = repo.Close()
		return nil, nil, err
	}
	return repo, cert, nil
}

// WaitSealedSecrets waits until the sealed-secrets controller's Deployment is Available (as the
// gitops-scaffolder waits before it fetches the certificate) and its certificate can be fetched
// through the service proxy, and returns that certificate (PEM). On timeout the error says what
// was last seen, the HelmRelease's Ready condition included.
func WaitSealedSecrets(ctx context.Context, target *rest.Config, timeout time.Duration) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(target)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(target)
	if err != nil {
		return nil, err
	}
	var cert []byte
	last := "nothing yet"
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(SealedSecretsNamespace).Get(ctx, SealedSecretsControllerName, metav1.GetOptions{})
		if err != nil {
			last = fmt.Sprintf("Deployment: %v; HelmRelease: %s", err, helmReleaseReady(ctx, dc))
			return false, nil
		}
		if !deploymentAvailable(d) {
			last = fmt.Sprintf("Deployment not Available (%d/%d available); HelmRelease: %s", d.Status.AvailableReplicas, replicas(d), helmReleaseReady(ctx, dc))
			return false, nil
		}
		if cert, err = SealedSecretsCert(ctx, cs); err != nil {
			last = "certificate: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the sealed-secrets controller is not serving its certificate after %s: %s", timeout, last)
	}
	return cert, nil
}

// SealedSecretsCert fetches the controller's certificate as kubeseal --fetch-cert does: through
// the API server's service proxy, GET /v1/cert.pem on the Service's http port.
func SealedSecretsCert(ctx context.Context, cs kubernetes.Interface) ([]byte, error) {
	rc, err := cs.CoreV1().Services(SealedSecretsNamespace).ProxyGet("http", SealedSecretsControllerName, SealedSecretsPortName, SealedSecretsCertPath, nil).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 1<<20))
}

// deploymentAvailable: condition Available True for the current generation.
func deploymentAvailable(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// helmReleaseReady describes the HelmRelease's Ready condition.
func helmReleaseReady(ctx context.Context, dc dynamic.Interface) string {
	hr, err := dc.Resource(helmReleaseGVR).Namespace(FluxNamespace).Get(ctx, SealedSecretsControllerName, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(hr.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return fmt.Sprintf("Ready=%v %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return "no Ready condition yet"
}
