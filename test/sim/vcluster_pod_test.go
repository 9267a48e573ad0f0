//go:build linux

package sim_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

// testExposure is the platform's choice the test installs with: the control-plane Ingress with
// TLS passthrough on <tenantName>-<fp>.<domain> (.test is reserved, RFC 6761), so the
// manager's exposure values (SANs, exported server, Ingress) meet the real vCluster.
var testExposure = vcluster.Exposure{Mode: vcluster.ExposeIngress, Domain: "tenants.example.test", IngressClass: vcluster.DefaultControlPlaneIngressClass}

// testVClusterValues are the manager's values for a Tenant's vCluster (vcluster.Values) with
// the host's Service range, as the manager reads it (vcluster.BackendServiceCIDR), and the k8s
// distro: k3s cannot be built from the Go module proxy; the k8s distro runs kube-apiserver and
// kube-controller-manager, which are in _tools/bin, with kine.
func testVClusterValues(release, namespace, host, serviceCIDR string, exposure vcluster.Exposure) map[string]any {
	t := &kov1alpha1.Tenant{Spec: kov1alpha1.TenantSpec{CloudSpaceID: "cs-0001",
		Quota: kov1alpha1.TenantQuota{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}}}
	return vcluster.Values(t, release, namespace, host, vcluster.Options{Environment: "test", Distro: vcluster.DistroK8s, Exposure: exposure, ServiceCIDR: serviceCIDR})
}

// syncedBuffer is a log the actor writes while the test reads it.
type syncedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// vclusterRun is a vCluster the test installed and VClusterPods runs.
type vclusterRun struct {
	backend            *rest.Config
	cs                 kubernetes.Interface
	pods               *sim.VClusterPods
	namespace, release string
	host               string // the external host with ExposeIngress
	kubeconfig         []byte // what vCluster wrote into vc-<release>
}

// startVCluster installs the real chart with the manager's values for exposure on a new
// backend, runs its Pod with VClusterPods until the test ends, and waits for vCluster to write
// its kubeconfig Secret.
func startVCluster(t *testing.T, exposure vcluster.Exposure) *vclusterRun {
	t.Helper()
	backend := framework.StartBackend(t)
	bin := framework.ToolsBin()
	for _, name := range []string{"vcluster", "kine", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s is missing from %s: run `make tools` (hack/build-tools.sh)", name, bin)
		}
	}
	chart := framework.VClusterChart()
	if _, err := os.Stat(filepath.Join(chart, "Chart.yaml")); err != nil {
		t.Fatalf("vCluster's chart is missing from %s: run `make tools` (hack/build-tools.sh vcluster-chart)", chart)
	}
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(backend.Config)
	if err != nil {
		t.Fatal(err)
	}
	const namespace, release = "kcp-0123456789ab-vc-demo", "vc-demo"
	host := exposure.Host("demo", "0123456789ab")
	// The host's Service range, as the manager reads it.
	serviceCIDR, err := vcluster.BackendServiceCIDR(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	log := &syncedBuffer{}
	pods := &sim.VClusterPods{Host: backend.Config, BinDir: bin, WorkDir: t.TempDir(), Log: log}
	runCtx, stop := context.WithCancel(context.Background())
	var runErr error
	done := make(chan struct{})
	go func() { runErr = pods.Run(runCtx); close(done) }()
	t.Cleanup(func() {
		stop()
		<-done
		if runErr != nil {
			t.Errorf("VClusterPods: %v", runErr)
		}
		if t.Failed() {
			t.Logf("VClusterPods' log:\n%s", log.String())
		}
	})

	hc, err := helm.New(backend.Config, helm.Options{ChartRef: chart, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := hc.InstallOrUpgrade(ctx, helm.Release{Namespace: namespace, Name: release}, testVClusterValues(release, namespace, host, serviceCIDR, exposure))
	if err != nil {
		t.Fatalf("install the vCluster chart: %v", err)
	}
	if obs.State != helm.StateDeployed || obs.ChartVersion != "0.21.0" {
		t.Fatalf("release %s: %+v, want Deployed from chart 0.21.0", release, obs)
	}

	// vCluster writes Secret vc-<release> once its control plane runs (vcluster
	// pkg/setup/controllers.go:272, pkg/util/kubeconfig/kubeconfig.go:114).
	start := time.Now()
	var secret *corev1.Secret
	err = wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("VClusterPods ended: %v", runErr)
		default:
		}
		secret, err = cs.CoreV1().Secrets(namespace).Get(ctx, sim.VClusterKubeconfigSecretName(release), metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("vCluster did not write Secret %s in %s: %v", sim.VClusterKubeconfigSecretName(release), namespace, err)
	}
	keys := make([]string, 0, len(secret.Data))
	for k := range secret.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	t.Logf("vCluster wrote Secret %s %s after %s; keys %v", secret.Name, secret.Type, time.Since(start).Round(time.Second), keys)

	return &vclusterRun{backend: backend.Config, cs: cs, pods: pods, namespace: namespace, release: release, host: host, kubeconfig: secret.Data[sim.VClusterKubeconfigKey]}
}

// TestVClusterPodsRunTheRealVCluster: the real chart, installed through the project's Helm
// client with the manager's values, makes the real `vcluster start` run where its StatefulSet's
// Pod would (VClusterPods plays only the kubelet and kube-proxy); vCluster itself writes Secret
// vc-<release>, whose kubeconfig works unchanged with kubectl through the control-plane Ingress
// (IngressController) and, with the in-cluster name, through the Service's address; what is
// created through it is synced to the host by vCluster's syncer.
func TestVClusterPodsRunTheRealVCluster(t *testing.T) {
	vc := startVCluster(t, testExposure)
	ctx, cs, pods, namespace, release, host, raw := t.Context(), vc.cs, vc.pods, vc.namespace, vc.release, vc.host, vc.kubeconfig
	ingress := sim.StartIngressController(t, vc.backend, testExposure.IngressClass, pods.DialService)

	// Every cluster of the kubeconfig names exportKubeConfig.server, with the CA kept
	// (vcluster pkg/setup/controllers.go:214-227).
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cfg.Clusters {
		if c.Server != vcluster.IngressServer(host) || len(c.CertificateAuthorityData) == 0 {
			t.Errorf("cluster %s of the kubeconfig: server %q (want %q), %d bytes of CA", name, c.Server, vcluster.IngressServer(host), len(c.CertificateAuthorityData))
		}
	}

	// The kubeconfig as vCluster wrote it works through the ingress controller: the host name
	// resolves to its address, which routes by SNI to the Service, which DialService reaches; the
	// proxy's certificate covers the host (controlPlane.proxy.extraSANs, syncer.go:200, and the
	// ingress host, syncer.go:195-197).
	kubectl := func(kubeconfig []byte, args ...string) string {
		t.Helper()
		out, err := framework.Kubectl(ctx, t, kubeconfig, map[string]string{host: ingress.Address}, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := kubectl(raw, "get", "namespaces", "-o", "name")
	for _, want := range []string{"namespace/default", "namespace/kube-system"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get namespaces through the vCluster's Ingress: no %s in\n%s", want, out)
		}
	}
	kubectl(raw, "create", "namespace", "demo")

	// ServiceAddress reaches the Service too; the certificate covers <service>.<namespace>
	// (vcluster pkg/server/cert/syncer.go:99-102).
	addr, err := pods.ServiceAddress(namespace, release, 443)
	if err != nil {
		t.Fatal(err)
	}
	inCluster := framework.KubeconfigWithServer(t, raw, "https://"+addr, release+"."+namespace)
	kubectl(inCluster, "--namespace", "demo", "create", "service", "clusterip", "web", "--tcp=80:8080")

	// The syncer creates the host Service as <name>-x-<namespace>-x-<vCluster name> in the
	// vCluster's namespace (vcluster pkg/util/translate/single_namespace.go:59-63,
	// SafeConcatName: translate.go:165-172).
	synced := "web-x-demo-x-" + release
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Services(namespace).Get(ctx, synced, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the Service web created in the vCluster was not synced to the host as %s/%s: %v", namespace, synced, err)
	}
}

// TestVClusterPodsLoadBalancerAddress: with the load-balancer exposure, the address the load
// balancer controller gives the vCluster's Service (LoadBalancers, through DialService) is one
// vCluster adds to its proxy's certificate by itself (vcluster pkg/server/cert/syncer.go:120-127
// and 162-170, read again every 2 s: syncer.go:233-254), so the kubeconfig with that server
// (vcluster.LoadBalancerServer, what the Tenant controller delivers) works unchanged.
func TestVClusterPodsLoadBalancerAddress(t *testing.T) {
	vc := startVCluster(t, vcluster.Exposure{Mode: vcluster.ExposeLoadBalancer})
	ctx := t.Context()
	sim.StartLoadBalancers(t, vc.backend, vc.pods.DialService)
	var server string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		svc, err := vc.cs.CoreV1().Services(vc.namespace).Get(ctx, vc.release, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		server = vcluster.LoadBalancerServer(svc)
		return server != "", nil
	})
	if err != nil {
		t.Fatalf("the load balancer controller gave Service %s/%s no address: %v", vc.namespace, vc.release, err)
	}
	cfg, err := clientcmd.Load(vc.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	kc, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Until vCluster has read the address (every 2 s), its certificate does not cover it.
	var out string
	var kerr error
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		out, kerr = framework.Kubectl(ctx, t, kc, nil, "get", "namespaces", "-o", "name")
		return kerr == nil, nil
	})
	if err != nil {
		t.Fatalf("kubectl get namespaces at %s: %v", server, kerr)
	}
	if !strings.Contains(out, "namespace/kube-system") {
		t.Errorf("kubectl get namespaces at %s: no namespace/kube-system in\n%s", server, out)
	}
}
