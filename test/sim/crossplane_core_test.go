package sim_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	xrpkg "github.com/kubeopera/kubeopera/internal/crossplane/xr"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

var xrGVR = schema.GroupVersionResource{Group: "infra.kubeopera.io", Version: "v1alpha1", Resource: "managedclusters"}

// startCrossplane starts a backend with Crossplane and function-patch-and-transform running on
// it; its log goes to crossplane.log in the test's directory.
func startCrossplane(t *testing.T) (*sim.Crossplane, string) {
	t.Helper()
	b := framework.StartBackend(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "crossplane.log")
	if p := os.Getenv("XP_DEBUG_LOG"); p != "" {
		logPath = p
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	xp, err := sim.StartCrossplane(t.Context(), sim.CrossplaneOptions{
		KubeconfigPath: b.KubeconfigPath, ToolsDir: filepath.Dir(framework.ToolsBin()), Dir: filepath.Join(dir, "crossplane"), Log: logf,
	})
	if err != nil {
		raw, _ := os.ReadFile(logf.Name())
		t.Fatalf("%v\n%s", err, raw)
	}
	t.Cleanup(xp.Stop)
	return xp, b.KubeconfigPath
}

func TestStartCrossplane(t *testing.T) {
	startCrossplane(t)
}

func TestCrossplaneComposesAWS(t *testing.T) {
	_, kubeconfig := startCrossplane(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := sim.InstallAWSProviderCRDs(cfg, framework.RepoRoot()); err != nil {
		t.Fatal(err)
	}
	if err := sim.ApplyCrossplaneConfig(ctx, cfg, framework.RepoRoot()); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	const ns = "kcp-d37f1981a6be"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	x := xrpkg.New(xrpkg.Params{Name: "kc-default-eks-cluster", Namespace: ns, Provider: "AWS", Region: "eu-central-1", KubernetesVersion: "v1.31.2",
		NodeFlavor: "m5.large", NodeCount: 3, NodeDiskSizeGiB: 50, SubnetIDs: xrpkg.SubnetIDs("subnet-0aaa,subnet-0bbb"), KeyPair: "ops",
		CredentialsSecretName: "creds", CredentialsKey: "credentials", KubeconfigSecretName: "kc-default-eks-conn"})
	if _, err := dyn.Resource(xrGVR).Namespace(ns).Create(ctx, x.GetUnstructured(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	provider := &sim.AWSProvider{Backend: cfg, ReadyAfter: time.Second}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- provider.Run(pctx) }()
	t.Cleanup(func() { stop(); <-done })
	framework.Eventually(t, 2*time.Minute, "the XR Ready", func() (bool, string) {
		u, err := dyn.Resource(xrGVR).Namespace(ns).Get(ctx, "kc-default-eks-cluster", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready, reason, msg := xrpkg.Status(xrpkg.From(u))
		return ready, reason + ": " + msg
	})
	if os.Getenv("XP_DUMP") != "" {
		for _, gvr := range []schema.GroupVersionResource{sim.AWSProviderConfigGVR, sim.AWSRoleGVR, sim.AWSRolePolicyAttachmentGVR, sim.AWSClusterGVR, sim.AWSNodeGroupGVR, sim.AWSClusterAuthGVR, xrGVR} {
			l, _ := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			for _, u := range l.Items {
				u.SetManagedFields(nil)
				b, _ := json.MarshalIndent(u.Object, "", " ")
				t.Log(string(b))
			}
		}
	}
}
