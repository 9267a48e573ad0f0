package sim_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ssv1alpha1 "github.com/bitnami-labs/sealed-secrets/pkg/apis/sealedsecrets/v1alpha1"
	"github.com/bitnami-labs/sealed-secrets/pkg/kubeseal"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

// TestChartRepoServesIndexedCharts: the local chart repository serves an index.yaml (Helm's own
// index of the packaged charts) listing the real sealed-secrets chart and the stand-ins, and
// each package it names, with the digest the index states; nothing else.
func TestChartRepoServesIndexedCharts(t *testing.T) {
	requireFile(t, filepath.Join(framework.SealedSecretsChart(), "Chart.yaml"), "hack/build-tools.sh sealed-secrets-chart")
	repo := sim.NewChartRepo(t, append([]string{framework.SealedSecretsChart()}, sim.StandInCharts(framework.RepoRoot())...)...)
	if !strings.HasPrefix(repo.URL, "http://127.0.0.1:") {
		t.Fatalf("repository URL %s is not on loopback", repo.URL)
	}
	idx, err := repo.Index()
	if err != nil {
		t.Fatal(err)
	}
	// The versions the gitops-scaffolder's tree pins (internal/scaffolder/tree/templates).
	versions := map[string]string{"sealed-secrets": "2.17.6", "cert-manager": "v1.16.2", "ingress-nginx": "4.11.3",
		"kube-prometheus-stack": "66.3.1", "kyverno": "3.3.4", "aws-ebs-csi-driver": "2.37.0"}
	for name, version := range versions {
		cv, err := idx.Get(name, version)
		if err != nil {
			t.Errorf("index has no %s: %v", name, err)
			continue
		}
		if len(cv.URLs) != 1 {
			t.Errorf("%s urls = %v", name, cv.URLs)
			continue
		}
		body := httpGet(t, repo.URL+"/"+cv.URLs[0], http.StatusOK)
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != cv.Digest {
			t.Errorf("%s: package digest %x, index says %s", name, sum, cv.Digest)
		}
		if name == "sealed-secrets" && (cv.Version != "2.17.6" || cv.AppVersion != "0.32.1") {
			t.Errorf("sealed-secrets chart %s (app %s), want the module's chart 2.17.6 (app 0.32.1)", cv.Version, cv.AppVersion)
		}
		if name != "sealed-secrets" && !strings.Contains(cv.Annotations["kubeopera.io/stand-in-for"], name) {
			t.Errorf("stand-in %s does not say what it stands in for: %v", name, cv.Annotations)
		}
	}
	if idx := string(httpGet(t, repo.URL+"/index.yaml", http.StatusOK)); !strings.Contains(idx, "apiVersion: v1") {
		t.Errorf("index.yaml = %.200s", idx)
	}
	httpGet(t, repo.URL+"/", http.StatusNotFound)
	httpGet(t, repo.URL+"/../Chart.yaml", http.StatusNotFound)
}

// TestRealSealedSecretsUnsealThroughFlux is the proof of issue 22's real parts: on a real
// kube-apiserver target, the local Flux chart (with helm-controller) runs through sim.FluxPods as
// the real source-controller and helm-controller; a HelmRepository pointing at the local chart
// repository and a HelmRelease install the REAL sealed-secrets chart into kube-system; FluxPods
// runs its Deployment as the real sealed-secrets controller in a network namespace of its own
// with a pod-network address; the test fetches the controller's certificate through the API
// server's service proxy (as kubeseal and the gitops-scaffolder do), seals a Secret with
// sealed-secrets' Go library, applies the SealedSecret, and the real controller unseals it into
// a Secret with the sealed data. Needs root (the Pod's network namespace and veth pair).
// KUBEOPERA_TEST_FLUX_LOG=1 shows the controllers' log.
func TestRealSealedSecretsUnsealThroughFlux(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: the sealed-secrets controller's Pod gets its own network namespace and a pod-network address (veth pair, route), which needs root")
	}
	for _, bin := range []string{"source-controller", "kustomize-controller", "helm-controller", "sealed-secrets-controller"} {
		requireFile(t, filepath.Join(framework.ToolsBin(), bin), "make tools")
	}
	requireFile(t, filepath.Join(framework.FluxChart(), "crds", "helm.toolkit.fluxcd.io_helmreleases.yaml"), "hack/build-tools.sh flux-chart")
	requireFile(t, filepath.Join(framework.SealedSecretsChart(), "Chart.yaml"), "hack/build-tools.sh sealed-secrets-chart")

	target := framework.StartBackend(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	cs, err := kubernetes.NewForConfig(target.Config)
	if err != nil {
		t.Fatal(err)
	}

	logPath := filepath.Join(dir, "pods.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = logFile.Close()
		if t.Failed() || os.Getenv("KUBEOPERA_TEST_FLUX_LOG") != "" {
			if raw, err := os.ReadFile(logPath); err == nil {
				t.Logf("controllers' log (last 30000 bytes):\n%s", raw[max(0, len(raw)-30000):])
			}
		}
	})

	installer, err := flux.NewInstaller(flux.Options{ChartRef: framework.FluxChart(), CacheDir: t.TempDir(), Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := installer.Ensure(ctx, target.Config); err != nil {
		t.Fatal(err)
	}
	pods := &sim.FluxPods{Target: target.Config, BinDir: framework.ToolsBin(), WorkDir: filepath.Join(dir, "pods"), Log: logFile}
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- pods.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("FluxPods: %v", err)
		}
	})
	c, err := client.New(target.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "Flux (with helm-controller) to be healthy", func() (bool, string) {
		h, err := flux.CheckHealth(ctx, c)
		if err != nil {
			return false, err.Error()
		}
		return h.Healthy && strings.Contains(h.Message, "helm-controller"), h.Message
	})

	// Flux installs the real chart from the local chart repository.
	start := time.Now()
	repo, cert, err := sim.StartSealedSecrets(ctx, target.Config, t.TempDir(), 5*time.Minute,
		append([]string{framework.SealedSecretsChart()}, sim.StandInCharts(framework.RepoRoot())...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = repo.Close() })
	t.Logf("%s after the HelmRelease: the controller serves its certificate through the service proxy", time.Since(start).Round(time.Millisecond))

	// Helm's install waits for the Deployment's new ReplicaSet to be ready (FluxPods writes it as
	// the Deployment and ReplicaSet controllers would): the HelmRelease ends Ready, rather than
	// installing until its timeout and being uninstalled by its remediation.
	hrs := dynamic.NewForConfigOrDie(target.Config).Resource(schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"})
	framework.Eventually(t, 2*time.Minute, "the sealed-secrets HelmRelease to be Ready", func() (bool, string) {
		hr, err := hrs.Namespace(sim.FluxNamespace).Get(ctx, sim.SealedSecretsControllerName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(hr.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Ready" {
				return m["status"] == "True", fmt.Sprintf("Ready=%v %v: %v", m["status"], m["reason"], m["message"])
			}
		}
		return false, "no Ready condition yet"
	})

	// What the kubelet and the endpoints controller were played as: a Pod with a pod-network
	// address, Ready, and the Service's Endpoints pointing at it.
	podList, err := cs.CoreV1().Pods(sim.SealedSecretsNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sealed-secrets"})
	if err != nil || len(podList.Items) != 1 {
		t.Fatalf("Pods of the controller: %v, %v", podList, err)
	}
	pod := podList.Items[0]
	_, podNet, _ := net.ParseCIDR("10.244.128.0/17")
	if ip := net.ParseIP(pod.Status.PodIP); ip == nil || !podNet.Contains(ip) || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("Pod %s: phase %s, podIP %q; want Running with an address of 10.244.128.0/17", pod.Name, pod.Status.Phase, pod.Status.PodIP)
	}
	eps, err := cs.CoreV1().Endpoints(sim.SealedSecretsNamespace).Get(ctx, sim.SealedSecretsControllerName, metav1.GetOptions{}) //nolint:staticcheck // the service proxy reads Endpoints
	if err != nil || len(eps.Subsets) != 1 || len(eps.Subsets[0].Addresses) != 1 || eps.Subsets[0].Addresses[0].TargetRef.Name != pod.Name ||
		len(eps.Subsets[0].Ports) != 1 || eps.Subsets[0].Ports[0].Port != 8080 || eps.Subsets[0].Ports[0].Name != "http" {
		t.Errorf("Endpoints %s = %+v, %v; want the Pod's address on port http 8080", sim.SealedSecretsControllerName, eps, err)
	}
	// The controller made its sealing key as it does at its first start (a Secret labelled
	// sealedsecrets.bitnami.com/sealed-secrets-key=active in its namespace).
	keys, err := cs.CoreV1().Secrets(sim.SealedSecretsNamespace).List(ctx, metav1.ListOptions{LabelSelector: "sealedsecrets.bitnami.com/sealed-secrets-key=active"})
	if err != nil || len(keys.Items) != 1 {
		t.Fatalf("sealing keys: %v, %v", keys, err)
	}
	if !bytes.Equal(bytes.TrimSpace(keys.Items[0].Data["tls.crt"]), bytes.TrimSpace(cert)) {
		t.Errorf("the certificate served is not the one of the controller's key Secret %s", keys.Items[0].Name)
	}

	// Seal fresh credentials with sealed-secrets' library, as the gitops-scaffolder does.
	pub, err := kubeseal.ParseKey(bytes.NewReader(cert))
	if err != nil {
		t.Fatal(err)
	}
	password := randomString(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "postgres-credentials", Namespace: "default"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"username": []byte("kubeopera"), "password": []byte(password)},
	}
	sealed, err := ssv1alpha1.NewSealedSecret(scheme.Codecs, pub, secret)
	if err != nil {
		t.Fatal(err)
	}
	if raw := fmt.Sprint(sealed.Spec.EncryptedData); strings.Contains(raw, password) {
		t.Fatal("the SealedSecret holds the password in clear")
	}
	sealed.TypeMeta = metav1.TypeMeta{APIVersion: "bitnami.com/v1alpha1", Kind: "SealedSecret"}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sealed)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(target.Config)
	if err != nil {
		t.Fatal(err)
	}
	sealedGVR := schema.GroupVersionResource{Group: "bitnami.com", Version: "v1alpha1", Resource: "sealedsecrets"}
	if _, err := dc.Resource(sealedGVR).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	var got *corev1.Secret
	framework.Eventually(t, 2*time.Minute, "the controller to unseal postgres-credentials", func() (bool, string) {
		s, err := cs.CoreV1().Secrets("default").Get(ctx, "postgres-credentials", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			ss, _ := dc.Resource(sealedGVR).Namespace("default").Get(ctx, "postgres-credentials", metav1.GetOptions{})
			return false, fmt.Sprintf("no Secret yet; SealedSecret status %v", ss.Object["status"])
		}
		if err != nil {
			return false, err.Error()
		}
		got = s
		return true, ""
	})
	t.Logf("%s after applying the SealedSecret: the Secret exists", time.Since(applied).Round(time.Millisecond))
	if string(got.Data["username"]) != "kubeopera" || string(got.Data["password"]) != password || len(got.Data) != 2 {
		t.Errorf("unsealed Secret data keys %v do not match what was sealed", keysOf(got.Data))
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Kind != "SealedSecret" || got.OwnerReferences[0].Name != "postgres-credentials" {
		t.Errorf("unsealed Secret owners = %v, want the SealedSecret", got.OwnerReferences)
	}

	// A SealedSecret sealed for another name (strict scope: the name and namespace are part of
	// the encryption label) is refused by the real controller: no Secret, a status saying so.
	other := secret.DeepCopy()
	other.Name = "other-name"
	wrong, err := ssv1alpha1.NewSealedSecret(scheme.Codecs, pub, other)
	if err != nil {
		t.Fatal(err)
	}
	wrong.Name = "renamed"
	wrong.Spec.Template.Name = "renamed"
	wrong.TypeMeta = sealed.TypeMeta
	obj, err = runtime.DefaultUnstructuredConverter.ToUnstructured(wrong)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(sealedGVR).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the controller to refuse the renamed SealedSecret", func() (bool, string) {
		ss, err := dc.Resource(sealedGVR).Namespace("default").Get(ctx, "renamed", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(ss.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Synced" && m["status"] == "False" {
				return true, fmt.Sprint(m["message"])
			}
		}
		return false, fmt.Sprintf("status %v", ss.Object["status"])
	})
	if _, err := cs.CoreV1().Secrets("default").Get(ctx, "renamed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret was made from a SealedSecret sealed for another name: %v", err)
	}

	// A stand-in chart from the same repository installs through the real helm-controller too,
	// deploying only its ConfigMap.
	hrGVR := schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
	standIn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"name": "cert-manager", "namespace": flux.Namespace},
		"spec": map[string]any{
			"interval": "1m", "releaseName": "cert-manager", "targetNamespace": "cert-manager",
			"install": map[string]any{"createNamespace": true},
			"chart": map[string]any{"spec": map[string]any{"chart": "cert-manager", "version": "v1.16.2",
				"sourceRef": map[string]any{"kind": "HelmRepository", "name": sim.SealedSecretsRepository}}},
		},
	}}
	if _, err := dc.Resource(hrGVR).Namespace(flux.Namespace).Create(ctx, standIn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "the cert-manager stand-in installed by helm-controller", func() (bool, string) {
		cm, err := cs.CoreV1().ConfigMaps("cert-manager").Get(ctx, "cert-manager-stand-in", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(cm.Data["standInFor"], "cert-manager") && cm.Data["chart"] == "cert-manager-v1.16.2", fmt.Sprint(cm.Data)
	})

	// The controller crashes: its Pod is not Ready and its address leaves the Endpoints' ready
	// addresses until the kubelet restarts it (10 s back-off); it comes back with the same key.
	key := sim.SealedSecretsNamespace + "/" + sim.SealedSecretsControllerName
	pid := pods.PIDs()[key]
	if pid == 0 {
		t.Fatalf("no process for %s: %v", key, pods.PIDs())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	podReady := func() (bool, int32, string) {
		p, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, 0, err.Error()
		}
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		var restarts int32
		if len(p.Status.ContainerStatuses) == 1 {
			restarts = p.Status.ContainerStatuses[0].RestartCount
		}
		return ready, restarts, fmt.Sprintf("ready=%v restarts=%d conditions=%v", ready, restarts, p.Status.Conditions)
	}
	framework.Eventually(t, time.Minute, "the crashed controller's Pod to be not Ready, out of the Endpoints' ready addresses", func() (bool, string) {
		ready, _, msg := podReady()
		eps, err := cs.CoreV1().Endpoints(sim.SealedSecretsNamespace).Get(ctx, sim.SealedSecretsControllerName, metav1.GetOptions{}) //nolint:staticcheck // the service proxy reads Endpoints
		if err != nil {
			return false, err.Error()
		}
		notReady := len(eps.Subsets) == 1 && len(eps.Subsets[0].Addresses) == 0 && len(eps.Subsets[0].NotReadyAddresses) == 1
		return !ready && notReady, fmt.Sprintf("%s; endpoints %+v", msg, eps.Subsets)
	})
	framework.Eventually(t, time.Minute, "the kubelet to restart the controller", func() (bool, string) {
		ready, restarts, msg := podReady()
		return ready && restarts == 1, msg
	})
	again, err := sim.WaitSealedSecrets(ctx, target.Config, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, cert) {
		t.Error("the restarted controller serves another certificate: it did not keep its key")
	}
}

// requireFile fails the test naming how to make path when it is missing.
func requireFile(t *testing.T, path, how string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: run `%s`: %v", path, how, err)
	}
}

// httpGet returns the body of GET url and fails unless it answers want.
func httpGet(t *testing.T, url string, want int) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Errorf("GET %s = %d, want %d", url, resp.StatusCode, want)
	}
	return body
}

func randomString(t *testing.T) string {
	t.Helper()
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func keysOf(m map[string][]byte) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}
