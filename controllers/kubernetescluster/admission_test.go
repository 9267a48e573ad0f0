package kubernetescluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/kubernetescluster"
	imanager "github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
)

// TestKubernetesClustersPerWorkspaceAreCapped plays a tenant who creates more KubernetesClusters
// than the platform admin allows one workspace (each one costs a cloud's VPC, cluster and nodes),
// on real kcp and a real backend: the ones beyond the cap fail with QuotaExceeded, the limit
// named, and nothing is created for them; another workspace has a cap of its own; deleting one
// makes room for a retried one.
func TestKubernetesClustersPerWorkspaceAreCapped(t *testing.T) {
	h := fleettest.StartExport(t, imanager.PlatformProvider, "platform.edgeconnect.eu", "capped", "other")
	if err := (&kubernetescluster.Reconciler{Workspaces: h.Fleet, Backend: h.BackendStore(), PollInterval: 300 * time.Millisecond, MaxPerWorkspace: 2}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)
	ctx := t.Context()
	create := func(ws, name string) {
		t.Helper()
		// No ProviderConfig: an admitted cluster waits on it, so nothing but the admission runs.
		kc := &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: platformv1alpha1.KubernetesClusterSpec{
			MachineCapabilitiesRef: platformv1alpha1.LocalObjectReference{Name: "workers"}, NodeCount: 2, NodeDiskSize: ptr.To(resource.MustParse("50Gi")),
			Kubernetes:  platformv1alpha1.KubernetesSpec{Version: "1.31"},
			ProviderRef: platformv1alpha1.ProviderRef{Type: "OTC", ConfigRef: &platformv1alpha1.LocalObjectReference{Name: "provider"}}}}
		if err := h.WS[ws].Create(ctx, kc); err != nil {
			t.Fatal(err)
		}
	}
	admitted := func(ws, name string) *platformv1alpha1.KubernetesCluster {
		t.Helper()
		var kc *platformv1alpha1.KubernetesCluster
		framework.Eventually(t, time.Minute, ws+"/"+name+" admitted", func() (bool, string) {
			kc = &platformv1alpha1.KubernetesCluster{}
			if err := h.WS[ws].Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, kc); err != nil {
				return false, err.Error()
			}
			return reconcile.IsTrue(kc, platformv1alpha1.AdmittedCondition), fmt.Sprintf("phase %s: %s", kc.Status.Phase, kc.Status.Message)
		})
		return kc
	}

	// Created one after the other: a and b are first, c is over the cap.
	for _, name := range []string{"a", "b", "c"} {
		create("capped", name)
		if name != "c" {
			admitted("capped", name)
		}
	}
	var c *platformv1alpha1.KubernetesCluster
	framework.Eventually(t, time.Minute, "c refused for the cap", func() (bool, string) {
		c = &platformv1alpha1.KubernetesCluster{}
		if err := h.WS["capped"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "c"}, c); err != nil {
			return false, err.Error()
		}
		return c.Status.Phase == platformv1alpha1.KubernetesClusterPhaseFailed, fmt.Sprintf("phase %s: %s", c.Status.Phase, c.Status.Message)
	})
	cond := reconcile.GetCondition(c, platformv1alpha1.AdmittedCondition)
	if cond == nil || cond.Reason != commonv1alpha1.QuotaExceededReason || !strings.Contains(cond.Message, "at most 2 KubernetesClusters") {
		t.Fatalf("Admitted = %+v, want QuotaExceeded naming the limit of 2", cond)
	}
	if !strings.Contains(c.Status.Message, "at most 2 KubernetesClusters") {
		t.Errorf("message %q does not name the limit", c.Status.Message)
	}
	// Nothing was done for it: no later step ran (the ProviderConfig was never looked for).
	if got := reconcile.GetCondition(c, platformv1alpha1.CredentialsValidCondition); got != nil {
		t.Errorf("a step after the admission ran for the refused cluster: %+v", got)
	}

	// The cap is per workspace.
	for _, name := range []string{"a", "b"} {
		create("other", name)
		admitted("other", name)
	}

	// Deleting an admitted one makes room: the tenant retries c.
	if err := h.WS["capped"].Delete(ctx, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "a gone", func() (bool, string) {
		err := h.WS["capped"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "a"}, &platformv1alpha1.KubernetesCluster{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	if err := reconcile.PatchAnnotations(ctx, h.WS["capped"], c, map[string]*string{commonv1alpha1.RetryAnnotation: ptr.To("1")}); err != nil {
		t.Fatal(err)
	}
	admitted("capped", "c")
}
