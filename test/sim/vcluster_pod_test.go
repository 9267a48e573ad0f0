//go:build linux

package sim_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
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
	"k8s.io/client-go/tools/clientcmd"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

// testVClusterValues are the manager's values for a Tenant's vCluster (vcluster.Values) with
// what a test must change: the k8s distro instead of the seed's k3s (k3s cannot be built from the
// Go module proxy; the k8s distro runs kube-apiserver and kube-controller-manager, which are in
// _tools/bin, with kine), telemetry off (nothing a test runs may send data off the machine;
// the chart's default is on), the host's Service CIDR as serviceCIDR, and an extra name for
// the proxy's certificate (testExtraSAN). vCluster 0.21 finds
// the host's range by creating a Service with ClusterIP 4.4.4.4 and reading the range from the
// error (vcluster pkg/util/servicecidr, "The range of valid IPs is "); a kube-apiserver since
// the ServiceCIDR allocator (1.33) answers "the provided network does not match the current
// range" without it, so vCluster falls back to 10.96.0.0/12 (initialize.go:68-75) and then
// cannot create the virtual default/kubernetes Service with the host Service's ClusterIP: it
// exits ("sync kubernetes service ... failed to allocate IP"). The top-level serviceCIDR value
// (config.go:69-70, read at initialize.go:68) skips the detection.
func testVClusterValues(release, namespace, serviceCIDR string) map[string]any {
	t := &kov1alpha1.Tenant{Spec: kov1alpha1.TenantSpec{CloudSpaceID: "cs-0001",
		Quota: kov1alpha1.TenantQuota{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}}}
	values := vcluster.Values(t, release, namespace, "test", "")
	cp := values["controlPlane"].(map[string]any)
	cp["distro"] = map[string]any{"k8s": map[string]any{"enabled": true}}
	values["telemetry"] = map[string]any{"enabled": false}
	values["serviceCIDR"] = serviceCIDR
	cp["proxy"] = map[string]any{"extraSANs": []any{testExtraSAN}}
	return values
}

// testExtraSAN stands for an endpoint outside the host cluster that the proxy's certificate
// must cover (controlPlane.proxy.extraSANs; .test is reserved, RFC 6761).
const testExtraSAN = "vc-demo-0123456789ab.tenants.example.test"

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

// TestVClusterPodsRunTheRealVCluster: the real chart, installed through the project's Helm
// client with the manager's values, makes the real `vcluster start` run where its StatefulSet's
// Pod would (VClusterPods plays only the kubelet and kube-proxy); vCluster itself writes Secret
// vc-<release>, whose kubeconfig works through the Service's address with kubectl, and what is
// created through it is synced to the host by vCluster's syncer.
func TestVClusterPodsRunTheRealVCluster(t *testing.T) {
	backend := framework.StartBackend(t)
	bin := framework.ToolsBin()
	for _, name := range []string{"vcluster", "kine", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s is missing from %s: run `make tools` (hack/build-tools.sh)", name, bin)
		}
	}
	chart := filepath.Join(framework.RepoRoot(), "_tools", "charts", "vcluster")
	if _, err := os.Stat(filepath.Join(chart, "Chart.yaml")); err != nil {
		t.Fatalf("vCluster's chart is missing from %s: run `make tools` (hack/build-tools.sh vcluster-chart)", chart)
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is not on PATH: %v", err)
	}
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(backend.Config)
	if err != nil {
		t.Fatal(err)
	}
	const namespace, release = "kcp-0123456789ab-vc-demo", "vc-demo"
	// The host's Service range: the kube-apiserver keeps it as ServiceCIDR "kubernetes"
	// (networking.k8s.io/v1, from --service-cluster-ip-range).
	cidr, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
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
	obs, err := hc.InstallOrUpgrade(ctx, helm.Release{Namespace: namespace, Name: release}, testVClusterValues(release, namespace, strings.Join(cidr.Spec.CIDRs, ",")))
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

	// Every cluster of the kubeconfig names exportKubeConfig.server, with the CA kept
	// (vcluster pkg/setup/controllers.go:214-227).
	raw := secret.Data[sim.VClusterKubeconfigKey]
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	wantServer := "https://" + release + "." + namespace + ":443"
	for name, c := range cfg.Clusters {
		if c.Server != wantServer || len(c.CertificateAuthorityData) == 0 {
			t.Errorf("cluster %s of the kubeconfig: server %q (want %q), %d bytes of CA", name, c.Server, wantServer, len(c.CertificateAuthorityData))
		}
	}

	addr, err := pods.ServiceAddress(namespace, release, 443)
	if err != nil {
		t.Fatal(err)
	}
	// The test reaches the Service at addr, checking the proxy's certificate against the names
	// it covers: <service>.<namespace> (vcluster pkg/server/cert/syncer.go:99-102) and
	// controlPlane.proxy.extraSANs (syncer.go:200), which vCluster reads again every 2 s with
	// the Service's load-balancer ingress addresses (syncer.go:120-127, 162-170, 233-254).
	kubectlVia := func(serverName string) func(args ...string) string {
		kc := framework.KubeconfigWithServer(t, raw, "https://"+addr, serverName)
		path := filepath.Join(t.TempDir(), "vcluster.kubeconfig")
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			t.Fatal(err)
		}
		return func(args ...string) string {
			t.Helper()
			cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", path, "--request-timeout", "20s"}, args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %s (server name %s): %v\n%s", strings.Join(args, " "), serverName, err, out)
			}
			return string(out)
		}
	}
	run := kubectlVia(release + "." + namespace)
	out := run("get", "namespaces", "-o", "name")
	for _, want := range []string{"namespace/default", "namespace/kube-system"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get namespaces through the vCluster's Service: no %s in\n%s", want, out)
		}
	}
	run("create", "namespace", "demo")
	kubectlVia(testExtraSAN)("--namespace", "demo", "create", "service", "clusterip", "web", "--tcp=80:8080")

	// The syncer creates the host Service as <name>-x-<namespace>-x-<vCluster name> in the
	// vCluster's namespace (vcluster pkg/util/translate/single_namespace.go:59-63,
	// SafeConcatName: translate.go:165-172).
	host := "web-x-demo-x-" + release
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Services(namespace).Get(ctx, host, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the Service web created in the vCluster was not synced to the host as %s/%s: %v", namespace, host, err)
	}
}
