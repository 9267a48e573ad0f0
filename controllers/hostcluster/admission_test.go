package hostcluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestHostClustersPerWorkspaceAreCapped plays a tenant who creates more HostClusters than the
// platform admin allows one workspace, on real kcp and a real backend: the ones beyond the cap
// fail with QuotaExceeded, the limit named, and nothing is created for them (no backend copy, no
// delivered Secret, no later step); another workspace has a cap of its own; deleting one makes
// room for a retried one.
func TestHostClustersPerWorkspaceAreCapped(t *testing.T) {
	h := fleettest.Start(t, "capped", "other")
	installer, err := flux.NewInstaller(flux.Options{ChartRef: framework.FluxChart(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&hostcluster.Reconciler{Workspaces: h.Fleet, Backend: h.BackendStore(), Flux: installer, PollInterval: 500 * time.Millisecond, MaxPerWorkspace: 2}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)
	ctx := t.Context()
	create := func(ws, name string) {
		t.Helper()
		// Its kubeconfig Secret is never created: an admitted HostCluster waits on it.
		hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: kov1alpha1.HostClusterSpec{
			ClusterID: "c-" + name, Mode: kov1alpha1.HostClusterModeConnectExisting, Provider: "aws", Region: "eu-north-1",
			ConnectKubeconfigSecretRef: name + "-input", GitOpsRepoURL: "https://git.example.com/gitops-iac.git",
			GitOpsPath: "fluxcd/clusters/" + name, Domain: name + ".example.com"}}
		if err := h.WS[ws].Create(ctx, hc); err != nil {
			t.Fatal(err)
		}
	}
	get := func(ws, name string) *kov1alpha1.HostCluster {
		t.Helper()
		hc := &kov1alpha1.HostCluster{}
		if err := h.WS[ws].Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, hc); err != nil {
			t.Fatal(err)
		}
		return hc
	}
	admitted := func(ws, name string) {
		t.Helper()
		framework.Eventually(t, time.Minute, ws+"/"+name+" admitted", func() (bool, string) {
			hc := get(ws, name)
			return reconcile.IsTrue(hc, kov1alpha1.AdmittedCondition), fmt.Sprintf("phase %s: %s", hc.Status.Phase, hc.Status.Message)
		})
	}

	for _, name := range []string{"a", "b", "c"} {
		create("capped", name)
		if name != "c" {
			admitted("capped", name)
		}
	}
	var c *kov1alpha1.HostCluster
	framework.Eventually(t, time.Minute, "c refused for the cap", func() (bool, string) {
		c = get("capped", "c")
		return c.Status.Phase == kov1alpha1.HostClusterPhaseFailed, fmt.Sprintf("phase %s: %s", c.Status.Phase, c.Status.Message)
	})
	cond := reconcile.GetCondition(c, kov1alpha1.AdmittedCondition)
	if cond == nil || cond.Reason != kov1alpha1.QuotaExceededReason || !strings.Contains(cond.Message, "at most 2 HostClusters") {
		t.Fatalf("Admitted = %+v, want QuotaExceeded naming the limit of 2", cond)
	}
	for _, later := range []string{kov1alpha1.BackendNamespaceReadyCondition, kov1alpha1.AccessValidatedCondition, kov1alpha1.KubeconfigDeliveredCondition} {
		if got := reconcile.GetCondition(c, later); got != nil {
			t.Errorf("step condition %s set for the refused HostCluster: %+v", later, got)
		}
	}
	stored := &corev1.SecretList{}
	if err := h.Backend.List(ctx, stored, client.InNamespace(workspaces.Namespace(h.LC["capped"])), client.MatchingLabels{kov1alpha1.HostClusterIDLabel: "c-c"}); err != nil {
		t.Fatal(err)
	}
	if len(stored.Items) != 0 {
		t.Errorf("backend Secrets written for the refused HostCluster: %d", len(stored.Items))
	}

	// The cap is per workspace.
	for _, name := range []string{"a", "b"} {
		create("other", name)
		admitted("other", name)
	}

	// Deleting an admitted one makes room: the tenant retries c.
	if err := h.WS["capped"].Delete(ctx, get("capped", "a")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "a gone", func() (bool, string) {
		err := h.WS["capped"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "a"}, &kov1alpha1.HostCluster{})
		return err != nil && client.IgnoreNotFound(err) == nil, fmt.Sprint(err)
	})
	if err := reconcile.PatchAnnotations(ctx, h.WS["capped"], get("capped", "c"), map[string]*string{kov1alpha1.RetryAnnotation: ptr.To("1")}); err != nil {
		t.Fatal(err)
	}
	admitted("capped", "c")
}
