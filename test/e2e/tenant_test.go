// Package e2e drives the product the way a tenant does, on a real kcp server and a real backend
// cluster: create workspaces, apply Tenant YAML, wait for conditions, read delivered Secrets.
package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/workspaces"
)

type tenancyWorkspace = tenancyv1alpha1.Workspace

// seedTenant is the seed's Tenant YAML; only the namespace is the tenant's choice.
func seedTenant(t *testing.T, namespace, tenantName, cloudSpaceID string) *kov1alpha1.Tenant {
	t.Helper()
	doc := fmt.Sprintf(`
apiVersion: kubeopera.io/v1alpha1
kind: Tenant
metadata:
  name: alice-default
  namespace: %s
spec:
  userID: "3f1a2b4c-0000-4000-8000-000000000001"
  tenantName: %q
  cloudSpaceID: %q
  quota:
    cpu: "2"
    memory: "4Gi"
`, namespace, tenantName, cloudSpaceID)
	tn := &kov1alpha1.Tenant{}
	if err := yaml.UnmarshalStrict([]byte(doc), tn); err != nil {
		t.Fatal(err)
	}
	return tn
}

func getTenant(ctx context.Context, c client.Client, namespace, name string) (*kov1alpha1.Tenant, error) {
	tn := &kov1alpha1.Tenant{}
	return tn, c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, tn)
}

func waitPhase(t *testing.T, c client.Client, namespace, name string, phase kov1alpha1.TenantPhase) *kov1alpha1.Tenant {
	t.Helper()
	var tn *kov1alpha1.Tenant
	eventually(t, 2*time.Minute, fmt.Sprintf("Tenant %s/%s phase %s", namespace, name, phase), func() (bool, string) {
		var err error
		tn, err = getTenant(context.Background(), c, namespace, name)
		if err != nil {
			return false, err.Error()
		}
		return tn.Status.Phase == phase, fmt.Sprintf("phase %q message %q", tn.Status.Phase, tn.Status.Message)
	})
	return tn
}

// helmRevisions lists the revisions Helm stored for release in namespace.
func helmRevisions(t *testing.T, c client.Client, namespace, release string) []string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := c.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": release}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Labels["version"])
	}
	return out
}

func TestTenantsOnKCP(t *testing.T) {
	e := setup(t)
	ctx := context.Background()

	acme, acmeLC := e.tenantWorkspace(t, "acme")
	globex, globexLC := e.tenantWorkspace(t, "globex")
	if acmeLC == globexLC {
		t.Fatal("two workspaces share a logical cluster")
	}

	t.Run("an invalid tenantName is refused at admission", func(t *testing.T) {
		bad := seedTenant(t, "default", "Bad_Name", "7e9d3a1b-bad")
		err := acme.Create(ctx, bad)
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.tenantName") || !strings.Contains(err.Error(), "should match") {
			t.Fatalf("want a validation error naming spec.tenantName, got %v", err)
		}
	})

	// Both workspaces create a Tenant with the SAME name and tenantName.
	acmeNS, globexNS := workspaces.VClusterNamespace(acmeLC, "alice-default"), workspaces.VClusterNamespace(globexLC, "alice-default")
	t.Run("same-named Tenants in two workspaces get isolated vClusters", func(t *testing.T) {
		if err := acme.Create(ctx, seedTenant(t, "default", "alice-default", "7e9d3a1b-acme")); err != nil {
			t.Fatal(err)
		}
		if err := globex.Create(ctx, seedTenant(t, "default", "alice-default", "unreachable-globex")); err != nil {
			t.Fatal(err)
		}
		if acmeNS == globexNS {
			t.Fatalf("both workspaces map to %s", acmeNS)
		}
		for _, ns := range []string{acmeNS, globexNS} {
			tn := waitPhase(t, map[string]client.Client{acmeNS: acme, globexNS: globex}[ns], "default", "alice-default", kov1alpha1.TenantPhaseProvisioning)
			if tn.Status.Namespace != ns || tn.Status.VClusterName != "vc-alice-default" {
				t.Errorf("status names %s/%s, want %s/vc-alice-default", tn.Status.Namespace, tn.Status.VClusterName, ns)
			}
			eventually(t, time.Minute, "Helm release vc-alice-default in "+ns, func() (bool, string) {
				revs := helmRevisions(t, e.backendC, ns, "vc-alice-default")
				return len(revs) == 1, fmt.Sprint(revs)
			})
			// The chart's objects landed in the workspace's own host namespace, with the quota
			// and the isolation policies on.
			sts := &appsv1.StatefulSet{}
			if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vc-alice-default"}, sts); err != nil {
				t.Fatal(err)
			}
			res := sts.Spec.Template.Spec.Containers[0].Resources
			if res.Limits.Cpu().String() != "2" || res.Limits.Memory().String() != "4Gi" || res.Requests.Memory().String() != "4Gi" {
				t.Errorf("vCluster resources %v do not carry the quota", res)
			}
			if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vc-vc-alice-default"}, &networkingv1.NetworkPolicy{}); err != nil {
				t.Errorf("NetworkPolicy missing in %s: %v", ns, err)
			}
			if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vc-vc-alice-default"}, &corev1.ResourceQuota{}); err != nil {
				t.Errorf("ResourceQuota missing in %s: %v", ns, err)
			}
			if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vc-vc-alice-default"}, &corev1.LimitRange{}); err != nil {
				t.Errorf("LimitRange missing in %s: %v", ns, err)
			}
			bns := &corev1.Namespace{}
			if err := e.backendC.Get(ctx, client.ObjectKey{Name: ns}, bns); err != nil {
				t.Fatal(err)
			}
			if bns.Labels[workspaces.FingerprintLabel] == "" || bns.Annotations[workspaces.LogicalClusterAnnotation] == "" {
				t.Errorf("backend namespace %s lacks the fingerprint label or logical cluster annotation: %v %v", ns, bns.Labels, bns.Annotations)
			}
		}
	})

	t.Run("a manager restart mid-Provisioning resumes without a second release", func(t *testing.T) {
		e.stopManager(t)
		e.startManager(t)
		// Give the new manager time to engage the workspaces and poll the Provisioning Tenants
		// many times (the requeue interval is 1s): it must not install a second time.
		time.Sleep(8 * time.Second)
		for _, ns := range []string{acmeNS, globexNS} {
			if revs := helmRevisions(t, e.backendC, ns, "vc-alice-default"); len(revs) != 1 || revs[0] != "1" {
				t.Fatalf("release revisions in %s after restart: %v, want [1]", ns, revs)
			}
		}
		// Now the vClusters come up.
		vclusterWritesKubeconfig(t, ctx, e.backendC, acmeNS, "vc-alice-default")
		vclusterWritesKubeconfig(t, ctx, e.backendC, globexNS, "vc-alice-default")
		for _, ns := range []string{acmeNS, globexNS} {
			if revs := helmRevisions(t, e.backendC, ns, "vc-alice-default"); len(revs) != 1 {
				t.Fatalf("release revisions in %s: %v, want one", ns, revs)
			}
		}
	})

	t.Run("Ready Tenants get their kubeconfig delivered into their own workspace", func(t *testing.T) {
		for _, tc := range []struct {
			c            client.Client
			cloudSpaceID string
			hostNS       string
			callbackOK   bool
		}{
			{acme, "7e9d3a1b-acme", acmeNS, true},
			{globex, "unreachable-globex", globexNS, false},
		} {
			tn := waitPhase(t, tc.c, "default", "alice-default", kov1alpha1.TenantPhaseReady)
			want := "tenant-" + tc.cloudSpaceID + "-kubeconfig"
			if tn.Status.KubeconfigSecret != want {
				t.Errorf("status.kubeconfigSecret = %q, want %q", tn.Status.KubeconfigSecret, want)
			}
			if !meta.IsStatusConditionTrue(tn.Status.Conditions, kov1alpha1.ReadyCondition) || tn.Status.ObservedGeneration != tn.Generation {
				t.Errorf("want Ready=True at observedGeneration %d, got %+v (observed %d)", tn.Generation, tn.Status.Conditions, tn.Status.ObservedGeneration)
			}
			if meta.FindStatusCondition(tn.Status.Conditions, kov1alpha1.ReconcilingCondition) != nil {
				t.Errorf("a Ready Tenant must not carry Reconciling: %+v", tn.Status.Conditions)
			}
			cb := meta.FindStatusCondition(tn.Status.Conditions, kov1alpha1.CallbackSucceededCondition)
			if cb == nil || (cb.Status == metav1.ConditionTrue) != tc.callbackOK {
				t.Errorf("CallbackSucceeded = %+v, want status %v", cb, tc.callbackOK)
			}

			s := &corev1.Secret{}
			if err := tc.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: want}, s); err != nil {
				t.Fatalf("delivered Secret: %v", err)
			}
			if s.Labels[kov1alpha1.TenantIDLabel] != tc.cloudSpaceID || s.Labels[kov1alpha1.ManagedByLabel] != "tenant-controller" {
				t.Errorf("delivered Secret labels %v", s.Labels)
			}
			if !metav1.IsControlledBy(s, tn) {
				t.Errorf("delivered Secret is not owned by the Tenant: %v", s.OwnerReferences)
			}
			kc, err := clientcmd.Load(s.Data["kubeconfig"])
			if err != nil {
				t.Fatalf("delivered kubeconfig does not parse: %v", err)
			}
			if got := kc.Clusters["my-vcluster"].Server; got != "https://vc-alice-default."+tc.hostNS+":443" {
				t.Errorf("kubeconfig server = %q, want the in-cluster short-DNS name", got)
			}
			if string(kc.AuthInfos["my-vcluster"].ClientKeyData) != "vcluster-client-key" {
				t.Error("delivered kubeconfig lost the vCluster credentials")
			}
			// The stored copy lives in the workspace's kcp-<fp> namespace.
			stored := &corev1.Secret{}
			if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(lcOf(tc.hostNS, acmeNS, acmeLC, globexLC)), Name: want}, stored); err != nil {
				t.Errorf("stored kubeconfig Secret: %v", err)
			}
		}
		calls := e.api.callsFor("7e9d3a1b-acme")
		if len(calls) == 0 {
			t.Fatal("kubeopera-api received no callback for the acme CloudSpace")
		}
		if calls[0].Auth != "Bearer e2e-token" || calls[0].Body["status"] != "active" || calls[0].Body["vcluster_id"] != "vc-alice-default" || calls[0].Body["namespace"] != acmeNS {
			t.Errorf("callback = %+v", calls[0])
		}
	})

	t.Run("a second Tenant reusing a tenantName in the same workspace is refused and removable", func(t *testing.T) {
		twin := seedTenant(t, "default", "alice-default", "twin-cloudspace")
		twin.Name = "alice-twin"
		if err := acme.Create(ctx, twin); err != nil {
			t.Fatal(err)
		}
		failed := waitPhase(t, acme, "default", "alice-twin", kov1alpha1.TenantPhaseFailed)
		c := meta.FindStatusCondition(failed.Status.Conditions, kov1alpha1.BackendNamespaceReadyCondition)
		if c == nil || c.Reason != kov1alpha1.NameConflictReason {
			t.Fatalf("want reason NameConflict, got %+v", failed.Status.Conditions)
		}
		if err := acme.Delete(ctx, failed); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "the twin gone", func() (bool, string) {
			_, err := getTenant(ctx, acme, "default", "alice-twin")
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		// The first Tenant's vCluster is untouched.
		if revs := helmRevisions(t, e.backendC, acmeNS, "vc-alice-default"); len(revs) != 1 {
			t.Fatalf("the first Tenant's release was affected: %v", revs)
		}
		if tn, err := getTenant(ctx, acme, "default", "alice-default"); err != nil || tn.Status.Phase != kov1alpha1.TenantPhaseReady {
			t.Fatalf("the first Tenant is no longer Ready: %v %v", err, tn.Status.Phase)
		}
	})

	t.Run("the admin reads metrics and probes", func(t *testing.T) {
		for _, path := range []string{"http://" + e.probeAddr + "/healthz", "http://" + e.probeAddr + "/readyz"} {
			if body := httpGet(t, path); !strings.Contains(body, "ok") {
				t.Errorf("%s = %q", path, body)
			}
		}
		metrics := httpGet(t, "http://"+e.metricsAddr+"/metrics")
		for _, want := range []string{`controller_runtime_reconcile_total{controller="tenant",result="success"}`, "kubeopera_orphan_backend_namespaces"} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if strings.Contains(metrics, "vcluster-client-key") || strings.Contains(metrics, b64("vcluster-client-key")) {
			t.Error("metrics carry secret material")
		}
	})

	t.Run("tenants cannot write status", func(t *testing.T) {
		tn, err := getTenant(ctx, acme, "default", "alice-default")
		if err != nil {
			t.Fatal(err)
		}
		base := tn.DeepCopy()
		tn.Status.Phase = kov1alpha1.TenantPhaseFailed
		err = acme.Status().Patch(ctx, tn, client.MergeFrom(base))
		if !apierrors.IsForbidden(err) {
			t.Fatalf("want Forbidden for a tenant's status write, got %v", err)
		}
	})

	t.Run("no secret data in status, events or logs", func(t *testing.T) {
		logs := e.managerLogs()
		for _, secret := range []string{"vcluster-client-key", b64("vcluster-client-key"), "e2e-token"} {
			if strings.Contains(logs, secret) {
				t.Errorf("manager logs contain secret material %q", secret)
			}
		}
		tn, _ := getTenant(ctx, acme, "default", "alice-default")
		raw, _ := yaml.Marshal(tn.Status)
		if strings.Contains(string(raw), b64("vcluster-client-key")) {
			t.Error("status contains secret material")
		}
		evs := &corev1.EventList{}
		if err := acme.List(ctx, evs, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		if len(evs.Items) == 0 {
			t.Error("the tenant was told nothing: no events in their namespace")
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, b64("vcluster-client-key")) || strings.Contains(ev.Message, "vcluster-client-key") {
				t.Errorf("event carries secret material: %s", ev.Message)
			}
		}
	})

	t.Run("a fingerprint collision is refused, and a retry annotation recovers", func(t *testing.T) {
		// Someone else's namespace sits where this Tenant's host namespace would go.
		hostNS := workspaces.VClusterNamespace(acmeLC, "collide")
		foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostNS, Annotations: map[string]string{workspaces.LogicalClusterAnnotation: "someone-else"}}}
		if err := e.backendC.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		tn := seedTenant(t, "default", "collide", "c0111de")
		tn.Name = "collide"
		if err := acme.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
		failed := waitPhase(t, acme, "default", "collide", kov1alpha1.TenantPhaseFailed)
		c := meta.FindStatusCondition(failed.Status.Conditions, kov1alpha1.BackendNamespaceReadyCondition)
		if c == nil || c.Reason != kov1alpha1.FingerprintCollisionReason {
			t.Fatalf("want BackendNamespaceReady reason FingerprintCollision, got %+v", failed.Status.Conditions)
		}
		if !meta.IsStatusConditionTrue(failed.Status.Conditions, kov1alpha1.StalledCondition) {
			t.Errorf("a Failed Tenant must be Stalled: %+v", failed.Status.Conditions)
		}
		if revs := helmRevisions(t, e.backendC, hostNS, "vc-collide"); len(revs) != 0 {
			t.Fatalf("something was written into the foreign namespace: %v", revs)
		}
		got := &corev1.Namespace{}
		if err := e.backendC.Get(ctx, client.ObjectKey{Name: hostNS}, got); err != nil || got.Annotations[workspaces.LogicalClusterAnnotation] != "someone-else" {
			t.Fatalf("the foreign namespace was touched: %v %v", err, got.Annotations)
		}

		// The admin removes the foreign namespace; the tenant asks for a retry.
		e.adminDeletesBackendNamespace(t, foreign)
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"kubeopera.io/retry":"1"}}}`))
		if err := acme.Patch(ctx, &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "collide"}}, patch); err != nil {
			t.Fatal(err)
		}
		waitPhase(t, acme, "default", "collide", kov1alpha1.TenantPhaseProvisioning)
		vclusterWritesKubeconfig(t, ctx, e.backendC, hostNS, "vc-collide")
		ready := waitPhase(t, acme, "default", "collide", kov1alpha1.TenantPhaseReady)
		if ready.Status.LastHandledRetry != "1" {
			t.Errorf("lastHandledRetry = %q", ready.Status.LastHandledRetry)
		}
	})

	t.Run("an admin retries a Failed Tenant by patching status.phase to Pending", func(t *testing.T) {
		hostNS := workspaces.VClusterNamespace(acmeLC, "admin-retry")
		foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostNS}}
		if err := e.backendC.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		tn := seedTenant(t, "default", "admin-retry", "ad31")
		tn.Name = "admin-retry"
		if err := acme.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
		waitPhase(t, acme, "default", "admin-retry", kov1alpha1.TenantPhaseFailed)
		e.adminDeletesBackendNamespace(t, foreign)
		// The platform admin writes status through the export's virtual workspace, as the
		// manager does; tenants cannot.
		admin := e.virtualWorkspaceClient(t, "kubeopera.io", acmeLC)
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"phase":"Pending"}}`))
		if err := admin.Status().Patch(ctx, &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "admin-retry"}}, patch); err != nil {
			t.Fatal(err)
		}
		waitPhase(t, acme, "default", "admin-retry", kov1alpha1.TenantPhaseProvisioning)
		vclusterWritesKubeconfig(t, ctx, e.backendC, hostNS, "vc-admin-retry")
		waitPhase(t, acme, "default", "admin-retry", kov1alpha1.TenantPhaseReady)
	})

	t.Run("a deleted Tenant cleans its backend", func(t *testing.T) {
		tn, err := getTenant(ctx, acme, "default", "alice-default")
		if err != nil {
			t.Fatal(err)
		}
		if err := acme.Delete(ctx, tn); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "Tenant gone", func() (bool, string) {
			_, err := getTenant(ctx, acme, "default", "alice-default")
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		if err := e.backendC.Get(ctx, client.ObjectKey{Name: acmeNS}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("host namespace %s still there: %v", acmeNS, err)
		}
		stored := client.ObjectKey{Namespace: workspaces.Namespace(acmeLC), Name: "tenant-7e9d3a1b-acme-kubeconfig"}
		if err := e.backendC.Get(ctx, stored, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("stored kubeconfig still there: %v", err)
		}
		if err := acme.Get(ctx, client.ObjectKey{Namespace: "default", Name: "tenant-7e9d3a1b-acme-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("delivered kubeconfig still there: %v", err)
		}
		// The other workspace's same-named vCluster is untouched.
		if revs := helmRevisions(t, e.backendC, globexNS, "vc-alice-default"); len(revs) != 1 {
			t.Errorf("globex's release was affected: %v", revs)
		}
	})

	t.Run("a deleted workspace cleans its backend namespaces through the terminator", func(t *testing.T) {
		if err := workspaces.DeleteWorkspace(ctx, e.kcp.Config, "root:orgs", "globex"); err != nil {
			t.Fatal(err)
		}
		orgs := e.workspaceClient(t, "root:orgs")
		eventually(t, 3*time.Minute, "workspace globex gone", func() (bool, string) {
			ws := &tenancyWorkspace{}
			err := orgs.Get(ctx, client.ObjectKey{Name: "globex"}, ws)
			return apierrors.IsNotFound(err), fmt.Sprintf("err=%v phase=%s", err, ws.Status.Phase)
		})
		list := &corev1.NamespaceList{}
		if err := e.backendC.List(ctx, list, client.MatchingLabels{workspaces.FingerprintLabel: workspaces.Fingerprint(globexLC)}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			var names []string
			for _, ns := range list.Items {
				names = append(names, ns.Name)
			}
			t.Errorf("backend namespaces of the deleted workspace remain: %v", names)
		}
		// acme's backend is untouched.
		if err := e.backendC.Get(ctx, client.ObjectKey{Name: workspaces.Namespace(acmeLC)}, &corev1.Namespace{}); err != nil {
			t.Errorf("acme's backend namespace is gone: %v", err)
		}
	})

	t.Run("a workspace deleted while the manager is down is cleaned when it comes back", func(t *testing.T) {
		initech, initechLC := e.tenantWorkspace(t, "initech")
		if err := initech.Create(ctx, seedTenant(t, "default", "peter", "1n17ech")); err != nil {
			t.Fatal(err)
		}
		hostNS := workspaces.VClusterNamespace(initechLC, "peter")
		waitPhase(t, initech, "default", "alice-default", kov1alpha1.TenantPhaseProvisioning)
		vclusterWritesKubeconfig(t, ctx, e.backendC, hostNS, "vc-peter")
		waitPhase(t, initech, "default", "alice-default", kov1alpha1.TenantPhaseReady)

		e.stopManager(t)
		if err := workspaces.DeleteWorkspace(ctx, e.kcp.Config, "root:orgs", "initech"); err != nil {
			t.Fatal(err)
		}
		// Nothing may happen to the backend while nobody is there to run the finalizers.
		time.Sleep(3 * time.Second)
		if revs := helmRevisions(t, e.backendC, hostNS, "vc-peter"); len(revs) != 1 {
			t.Fatalf("the release changed while the manager was down: %v", revs)
		}
		e.startManager(t)
		orgs := e.workspaceClient(t, "root:orgs")
		eventually(t, 3*time.Minute, "workspace initech gone", func() (bool, string) {
			ws := &tenancyWorkspace{}
			err := orgs.Get(ctx, client.ObjectKey{Name: "initech"}, ws)
			return apierrors.IsNotFound(err), fmt.Sprintf("err=%v phase=%s", err, ws.Status.Phase)
		})
		list := &corev1.NamespaceList{}
		if err := e.backendC.List(ctx, list, client.MatchingLabels{workspaces.FingerprintLabel: workspaces.Fingerprint(initechLC)}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 0 {
			t.Errorf("%d backend namespaces of the deleted workspace remain", len(list.Items))
		}
		if !strings.Contains(e.managerLogs(), `"tenant":{"name":"alice-default","namespace":"default"},"release":"vc-peter"`) {
			t.Error("the Tenant's finalizer did not run (no uninstall of vc-peter logged)")
		}
	})
}

// lcOf maps a host namespace back to its logical cluster for the two workspaces of the suite.
func lcOf(hostNS, acmeNS, acmeLC, globexLC string) string {
	if hostNS == acmeNS {
		return acmeLC
	}
	return globexLC
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // the test's own manager on loopback
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(body)
}
