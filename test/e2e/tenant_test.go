// Package e2e drives the product the way a tenant does, on a real kcp server and a real backend
// cluster: create workspaces, apply Tenant YAML, wait for conditions, read delivered Secrets.
// Every test makes its own workspaces in the suite's shared environment (env_test.go), so each
// names one behaviour and the tests run in parallel; the tests that stop the manager
// (restart_test.go) run alone.
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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
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
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("Tenant %s/%s phase %s", namespace, name, phase), func() (bool, string) {
		var err error
		tn, err = getTenant(context.Background(), c, namespace, name)
		if err != nil {
			return false, err.Error()
		}
		return tn.Status.Phase == phase, fmt.Sprintf("phase %q message %q", tn.Status.Phase, tn.Status.Message)
	})
	return tn
}

// waitReleaseDeployed waits until the Tenant says its release is deployed (condition
// ReleaseDeployed): installs run in the background after the Tenant shows Provisioning.
func waitReleaseDeployed(t *testing.T, c client.Client, namespace, name string) *kov1alpha1.Tenant {
	t.Helper()
	var tn *kov1alpha1.Tenant
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("Tenant %s/%s release deployed", namespace, name), func() (bool, string) {
		var err error
		if tn, err = getTenant(context.Background(), c, namespace, name); err != nil {
			return false, err.Error()
		}
		return reconcile.IsTrue(tn, kov1alpha1.ReleaseDeployedCondition), fmt.Sprintf("phase %q message %q", tn.Status.Phase, tn.Status.Message)
	})
	return tn
}

// helmRevisions lists the revisions Helm stored for release of the workspace logicalCluster. The
// Tenant controller keeps a vCluster release's records in kcp-<fp>, out of the host namespace
// where the vCluster syncer may write Secrets.
func helmRevisions(t *testing.T, c client.Client, logicalCluster, release string) []string {
	t.Helper()
	list := &corev1.SecretList{}
	if err := c.List(context.Background(), list, client.InNamespace(workspaces.Namespace(logicalCluster)), client.MatchingLabels{"owner": "helm", "name": release}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Labels["version"])
	}
	return out
}

// readyTenant creates tn in the workspace (client c, logical cluster lc), waits until it is
// Provisioning, plays its vCluster coming up and waits until it is Ready.
func (e *env) readyTenant(t *testing.T, c client.Client, lc string, tn *kov1alpha1.Tenant) (*kov1alpha1.Tenant, *sim.VClusterKubeconfig) {
	t.Helper()
	if err := c.Create(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, c, tn.Namespace, tn.Name, kov1alpha1.TenantPhaseProvisioning)
	vc := vclusterUp(t, e, workspaces.VClusterNamespace(lc, tn.Spec.TenantName), "vc-"+tn.Spec.TenantName)
	return waitPhase(t, c, tn.Namespace, tn.Name, kov1alpha1.TenantPhaseReady), vc
}

// checkDelivered checks what a Ready Tenant of workspace lc (client c) shows the tenant: the
// status, the kubeconfig Secret delivered into its namespace with the vCluster's credentials and
// the in-cluster server, and the stored copy in the workspace's kcp-<fp> namespace.
func (e *env) checkDelivered(t *testing.T, c client.Client, lc string, tn *kov1alpha1.Tenant, vc *sim.VClusterKubeconfig, callbackOK bool) {
	t.Helper()
	ctx := context.Background()
	hostNS := workspaces.VClusterNamespace(lc, tn.Spec.TenantName)
	want := "tenant-" + tn.Spec.CloudSpaceID + "-kubeconfig"
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
	if cb == nil || (cb.Status == metav1.ConditionTrue) != callbackOK {
		t.Errorf("CallbackSucceeded = %+v, want status %v", cb, callbackOK)
	}

	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tn.Namespace, Name: want}, s); err != nil {
		t.Fatalf("delivered Secret: %v", err)
	}
	if s.Labels[kov1alpha1.TenantIDLabel] != tn.Spec.CloudSpaceID || s.Labels[kov1alpha1.ManagedByLabel] != "tenant-controller" {
		t.Errorf("delivered Secret labels %v", s.Labels)
	}
	if !metav1.IsControlledBy(s, tn) {
		t.Errorf("delivered Secret is not owned by the Tenant: %v", s.OwnerReferences)
	}
	kc, err := clientcmd.Load(s.Data["kubeconfig"])
	if err != nil {
		t.Fatalf("delivered kubeconfig does not parse: %v", err)
	}
	kctx := kc.Contexts[kc.CurrentContext]
	if kctx == nil || kc.Clusters[kctx.Cluster] == nil || kc.AuthInfos[kctx.AuthInfo] == nil {
		t.Fatalf("delivered kubeconfig has no usable current context %q", kc.CurrentContext)
	}
	// The platform exposes vClusters through load balancers: the kubeconfig names the address
	// the backend's load balancer gave the vCluster's Service; the in-cluster one is the second.
	svc := &corev1.Service{}
	if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: "vc-" + tn.Spec.TenantName}, svc); err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
		t.Fatalf("the vCluster's Service has no load balancer address: %+v, %v", svc.Status, err)
	}
	external := "https://" + svc.Status.LoadBalancer.Ingress[0].IP + ":443"
	if got := kc.Clusters[kctx.Cluster].Server; got != external || tn.Status.Endpoint != external {
		t.Errorf("kubeconfig server = %q, status.endpoint = %q, want the load balancer's %s", got, tn.Status.Endpoint, external)
	}
	if string(kc.AuthInfos[kctx.AuthInfo].ClientKeyData) != string(vc.ClientKeyPEM) {
		t.Error("delivered kubeconfig lost the vCluster credentials")
	}
	inCluster, err := clientcmd.Load(s.Data["kubeconfig-in-cluster"])
	if err != nil {
		t.Fatalf("delivered in-cluster kubeconfig does not parse: %v", err)
	}
	for name, c := range inCluster.Clusters {
		if c.Server != "https://vc-"+tn.Spec.TenantName+"."+hostNS+":443" {
			t.Errorf("in-cluster kubeconfig cluster %s server = %q, want the in-cluster short-DNS name", name, c.Server)
		}
	}
	// The stored copy lives in the workspace's kcp-<fp> namespace.
	stored := &corev1.Secret{}
	if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(lc), Name: want}, stored); err != nil {
		t.Errorf("stored kubeconfig Secret: %v", err)
	}
}

func TestInvalidTenantNameIsRefusedAtAdmission(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	acme, _, _ := e.tenantWorkspace(t, "invalid")
	bad := seedTenant(t, "default", "Bad_Name", "7e9d3a1b-bad")
	err := acme.Create(context.Background(), bad)
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.tenantName") || !strings.Contains(err.Error(), "should match") {
		t.Fatalf("want a validation error naming spec.tenantName, got %v", err)
	}
	// A negative quota would offset the workspace's sums against its limits: kcp refuses it (the
	// schema's CEL rule on the quantity).
	negative := seedTenant(t, "default", "alice-default", "7e9d3a1b-negative")
	negative.Spec.Quota.CPU = resource.MustParse("-1000")
	err = acme.Create(context.Background(), negative)
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.quota.cpu must be greater than zero") {
		t.Fatalf("want a validation error for the negative quota, got %v", err)
	}
}

func TestSameNamedTenantsInTwoWorkspacesGetIsolatedVClusters(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "acme")
	globex, globexLC, _ := e.tenantWorkspace(t, "globex")
	if acmeLC == globexLC {
		t.Fatal("two workspaces share a logical cluster")
	}

	// Both workspaces create a Tenant with the SAME name and tenantName.
	acmeNS, globexNS := workspaces.VClusterNamespace(acmeLC, "alice-default"), workspaces.VClusterNamespace(globexLC, "alice-default")
	if acmeNS == globexNS {
		t.Fatalf("both workspaces map to %s", acmeNS)
	}
	tenants := []struct {
		c            client.Client
		lc, ns       string
		cloudSpaceID string
	}{
		{acme, acmeLC, acmeNS, "7e9d3a1b-isolated-acme"},
		{globex, globexLC, globexNS, "7e9d3a1b-isolated-globex"},
	}
	for _, tc := range tenants {
		if err := tc.c.Create(ctx, seedTenant(t, "default", "alice-default", tc.cloudSpaceID)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range tenants {
		ns := tc.ns
		tn := waitReleaseDeployed(t, tc.c, "default", "alice-default")
		if tn.Status.Namespace != ns || tn.Status.VClusterName != "vc-alice-default" {
			t.Errorf("status names %s/%s, want %s/vc-alice-default", tn.Status.Namespace, tn.Status.VClusterName, ns)
		}
		framework.Eventually(t, time.Minute, "Helm release vc-alice-default in "+ns, func() (bool, string) {
			revs := helmRevisions(t, e.backendC, tc.lc, "vc-alice-default")
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
		for _, name := range []string{"vc-work-vc-alice-default", "vc-cp-vc-alice-default"} {
			if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &networkingv1.NetworkPolicy{}); err != nil {
				t.Errorf("NetworkPolicy %s missing in %s: %v", name, ns, err)
			}
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

	// Both vClusters come up; each workspace gets its own vCluster's kubeconfig.
	vcs := map[string]*sim.VClusterKubeconfig{}
	for _, tc := range tenants {
		vcs[tc.ns] = vclusterUp(t, e, tc.ns, "vc-alice-default")
	}
	for _, tc := range tenants {
		tn := waitPhase(t, tc.c, "default", "alice-default", kov1alpha1.TenantPhaseReady)
		e.checkDelivered(t, tc.c, tc.lc, tn, vcs[tc.ns], true)
	}
}

func TestReadyTenantGetsItsKubeconfigDeliveredAndKubeoperaAPICalled(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	acme, acmeLC, _ := e.tenantWorkspace(t, "delivery")
	acmeNS := workspaces.VClusterNamespace(acmeLC, "alice-default")
	tn, vc := e.readyTenant(t, acme, acmeLC, seedTenant(t, "default", "alice-default", "7e9d3a1b-acme"))
	e.checkDelivered(t, acme, acmeLC, tn, vc, true)

	// The tenant uses what they received, where they sit: kubectl with the delivered kubeconfig
	// reaches the real virtual cluster through the load balancer's address.
	delivered := &corev1.Secret{}
	if err := acme.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: tn.Status.KubeconfigSecret}, delivered); err != nil {
		t.Fatal(err)
	}
	kubeconfig := delivered.Data["kubeconfig"]
	// vCluster adds the load balancer's address to its certificate within its 2 s re-read.
	framework.Eventually(t, 30*time.Second, "kubectl get namespaces with the delivered kubeconfig", func() (bool, string) {
		out, err := framework.Kubectl(t.Context(), t, kubeconfig, nil, "get", "namespaces", "-o", "name")
		return err == nil && strings.Contains(out, "namespace/default") && strings.Contains(out, "namespace/kube-system"), fmt.Sprintf("%q, %v", out, err)
	})
	// What the tenant creates in it, vCluster's syncer puts on the backend: a Service in a new
	// namespace appears in the host namespace as <name>-x-<namespace>-x-<vCluster name>
	// (vcluster pkg/util/translate/single_namespace.go lines 59-63).
	if out, err := framework.Kubectl(t.Context(), t, kubeconfig, nil, "create", "namespace", "team-a"); err != nil {
		t.Fatalf("kubectl create namespace: %q, %v", out, err)
	}
	if out, err := framework.Kubectl(t.Context(), t, kubeconfig, nil, "-n", "team-a", "create", "service", "clusterip", "web", "--tcp=80:8080"); err != nil {
		t.Fatalf("kubectl create service: %q, %v", out, err)
	}
	framework.Eventually(t, 2*time.Minute, "the vCluster's syncer put the tenant's Service on the backend", func() (bool, string) {
		err := e.backendC.Get(context.Background(), client.ObjectKey{Namespace: acmeNS, Name: "web-x-team-a-x-vc-alice-default"}, &corev1.Service{})
		return err == nil, fmt.Sprint(err)
	})

	calls := e.api.CallsFor("7e9d3a1b-acme")
	if len(calls) == 0 {
		t.Fatal("kubeopera-api received no callback for the acme CloudSpace")
	}
	if calls[0].Auth != "Bearer e2e-token" || calls[0].Body["status"] != "active" || calls[0].Body["vcluster_id"] != "vc-alice-default" || calls[0].Body["namespace"] != acmeNS {
		t.Errorf("callback = %+v", calls[0])
	}
	if calls[0].Body["kubeconfig_secret"] != "tenant-7e9d3a1b-acme-kubeconfig" || !strings.HasPrefix(calls[0].ContentType, "application/json") {
		t.Errorf("callback = %+v, want kubeconfig_secret tenant-7e9d3a1b-acme-kubeconfig and a JSON body (docs/tenant.md#callback)", calls[0])
	}
}

func TestUnreachableKubeoperaAPIDoesNotKeepTheTenantFromReady(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	globex, globexLC, _ := e.tenantWorkspace(t, "unreachable")
	tn, vc := e.readyTenant(t, globex, globexLC, seedTenant(t, "default", "alice-default", "unreachable-globex"))
	e.checkDelivered(t, globex, globexLC, tn, vc, false)
	if len(e.api.CallsFor("unreachable-globex")) == 0 {
		t.Error("the manager never tried kubeopera-api for the unreachable CloudSpace")
	}
}

func TestSecondTenantReusingATenantNameIsRefusedAndRemovable(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "twin")
	e.readyTenant(t, acme, acmeLC, seedTenant(t, "default", "alice-default", "7e9d3a1b-twin-first"))

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
	framework.Eventually(t, time.Minute, "the twin gone", func() (bool, string) {
		_, err := getTenant(ctx, acme, "default", "alice-twin")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// The first Tenant's vCluster is untouched.
	if revs := helmRevisions(t, e.backendC, acmeLC, "vc-alice-default"); len(revs) != 1 {
		t.Fatalf("the first Tenant's release was affected: %v", revs)
	}
	if tn, err := getTenant(ctx, acme, "default", "alice-default"); err != nil || tn.Status.Phase != kov1alpha1.TenantPhaseReady {
		t.Fatalf("the first Tenant is no longer Ready: %v %v", err, tn.Status.Phase)
	}
}

func TestAdminReadsMetricsAndProbes(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	acme, acmeLC, _ := e.tenantWorkspace(t, "metrics")
	// A Ready Tenant: at least one successful tenant reconcile, and key material to look for.
	_, vc := e.readyTenant(t, acme, acmeLC, seedTenant(t, "default", "alice-default", "7e9d3a1b-metrics"))

	metricsAddr, probeAddr := e.addrs()
	for _, path := range []string{"http://" + probeAddr + "/healthz", "http://" + probeAddr + "/readyz"} {
		if body := httpGet(t, path); !strings.Contains(body, "ok") {
			t.Errorf("%s = %q", path, body)
		}
	}
	// /metrics is HTTPS behind the manager's authentication/authorization filter: nobody reads it
	// without a token, nor with a valid token lacking get on /metrics; a scraper bound to
	// kubeopera-metrics-reader does.
	url := "https://" + metricsAddr + "/metrics"
	reader, stranger := e.metricsTokens(t)
	for _, c := range []struct {
		who, token string
		want       int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		// controller-runtime's filter answers a token the TokenReview rejects with 500
		// "Authentication failed" (v0.23 filters.go): refused all the same.
		{"a bogus token", "not-a-token", http.StatusInternalServerError},
		{"a ServiceAccount without kubeopera-metrics-reader", stranger, http.StatusForbidden},
	} {
		if code, body := metricsGet(t, url, c.token); code != c.want || strings.Contains(body, "controller_runtime") {
			t.Errorf("GET %s as %s = %d, want %d and no metrics", url, c.who, code, c.want)
		}
	}
	if code, _ := metricsGet(t, "http://"+metricsAddr+"/metrics", ""); code == http.StatusOK {
		t.Errorf("/metrics is served over plain HTTP")
	}
	code, metrics := metricsGet(t, url, reader)
	if code != http.StatusOK {
		t.Fatalf("GET %s as kubeopera-metrics-reader = %d: %s", url, code, metrics)
	}
	for _, want := range []string{`controller_runtime_reconcile_total{controller="tenant",result="success"}`, "kubeopera_orphan_backend_namespaces"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, secret := range secretMaterial(vc) {
		if strings.Contains(metrics, secret) {
			t.Error("metrics carry secret material")
		}
	}
}

func TestTenantsCannotWriteStatus(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	acme, _, _ := e.tenantWorkspace(t, "status")
	if err := acme.Create(ctx, seedTenant(t, "default", "alice-default", "7e9d3a1b-status")); err != nil {
		t.Fatal(err)
	}
	// Once the manager wrote a status, the tenant tries to overwrite it.
	tn := waitPhase(t, acme, "default", "alice-default", kov1alpha1.TenantPhaseProvisioning)
	base := tn.DeepCopy()
	tn.Status.Phase = kov1alpha1.TenantPhaseFailed
	err := acme.Status().Patch(ctx, tn, client.MergeFrom(base))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want Forbidden for a tenant's status write, got %v", err)
	}
}

func TestNoSecretDataInStatusEventsOrLogs(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "nosecrets")
	tn, vc := e.readyTenant(t, acme, acmeLC, seedTenant(t, "default", "alice-default", "7e9d3a1b-nosecrets"))
	material := secretMaterial(vc)

	logs := e.managerLogs()
	// The check below proves something only if the manager logged this Tenant's reconciles.
	if !strings.Contains(logs, acmeLC) || !strings.Contains(logs, "Phase changed") {
		t.Errorf("the manager logged nothing about workspace %s; the log check would prove nothing", acmeLC)
	}
	for _, secret := range append(material, "e2e-token") {
		if strings.Contains(logs, secret) {
			t.Errorf("manager logs contain secret material %q", secret)
		}
	}
	raw, _ := yaml.Marshal(tn.Status)
	for _, secret := range material {
		if strings.Contains(string(raw), secret) {
			t.Error("status contains secret material")
		}
	}
	evs := &corev1.EventList{}
	if err := acme.List(ctx, evs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 {
		t.Error("the tenant was told nothing: no events in their namespace")
	}
	for _, ev := range evs.Items {
		for _, secret := range material {
			if strings.Contains(ev.Message, secret) {
				t.Errorf("event carries secret material: %s", ev.Message)
			}
		}
	}
}

func TestFingerprintCollisionIsRefusedAndRetryAnnotationRecovers(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "collision")
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
	if revs := helmRevisions(t, e.backendC, acmeLC, "vc-collide"); len(revs) != 0 {
		t.Fatalf("a release was installed although the host namespace collided: %v", revs)
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
	vclusterUp(t, e, hostNS, "vc-collide")
	ready := waitPhase(t, acme, "default", "collide", kov1alpha1.TenantPhaseReady)
	if ready.Status.LastHandledRetry != "1" {
		t.Errorf("lastHandledRetry = %q", ready.Status.LastHandledRetry)
	}
}

func TestAdminRetriesFailedTenantByPatchingStatusPhaseToPending(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "adminretry")
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
	vclusterUp(t, e, hostNS, "vc-admin-retry")
	waitPhase(t, acme, "default", "admin-retry", kov1alpha1.TenantPhaseReady)
}

func TestDeletedTenantCleansItsBackend(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "deltenant")
	globex, globexLC, _ := e.tenantWorkspace(t, "deltenant-other")
	acmeNS := workspaces.VClusterNamespace(acmeLC, "alice-default")
	tn, _ := e.readyTenant(t, acme, acmeLC, seedTenant(t, "default", "alice-default", "7e9d3a1b-deltenant"))
	e.readyTenant(t, globex, globexLC, seedTenant(t, "default", "alice-default", "7e9d3a1b-deltenant-other"))

	if err := acme.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "Tenant gone", func() (bool, string) {
		_, err := getTenant(ctx, acme, "default", "alice-default")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := e.backendC.Get(ctx, client.ObjectKey{Name: acmeNS}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("host namespace %s still there: %v", acmeNS, err)
	}
	stored := client.ObjectKey{Namespace: workspaces.Namespace(acmeLC), Name: "tenant-7e9d3a1b-deltenant-kubeconfig"}
	if err := e.backendC.Get(ctx, stored, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("stored kubeconfig still there: %v", err)
	}
	if err := acme.Get(ctx, client.ObjectKey{Namespace: "default", Name: "tenant-7e9d3a1b-deltenant-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("delivered kubeconfig still there: %v", err)
	}
	if revs := helmRevisions(t, e.backendC, acmeLC, "vc-alice-default"); len(revs) != 0 {
		t.Errorf("release records still in %s: %v", workspaces.Namespace(acmeLC), revs)
	}
	// The other workspace's same-named vCluster is untouched.
	if revs := helmRevisions(t, e.backendC, globexLC, "vc-alice-default"); len(revs) != 1 {
		t.Errorf("the other workspace's release was affected: %v", revs)
	}
}

func TestDeletedWorkspaceIsCleanedThroughTheTerminator(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "delws-other")
	globex, globexLC, globexName := e.tenantWorkspace(t, "delws")
	e.readyTenant(t, acme, acmeLC, seedTenant(t, "default", "alice-default", "7e9d3a1b-delws-other"))
	e.readyTenant(t, globex, globexLC, seedTenant(t, "default", "alice-default", "7e9d3a1b-delws"))

	if err := workspaces.DeleteWorkspace(ctx, e.kcp.Config, "root:orgs", globexName); err != nil {
		t.Fatal(err)
	}
	orgs := e.workspaceClient(t, "root:orgs")
	framework.Eventually(t, 3*time.Minute, "workspace "+globexName+" gone", func() (bool, string) {
		ws := &tenancyWorkspace{}
		err := orgs.Get(ctx, client.ObjectKey{Name: globexName}, ws)
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
	// The other workspace's backend is untouched.
	if err := e.backendC.Get(ctx, client.ObjectKey{Name: workspaces.Namespace(acmeLC)}, &corev1.Namespace{}); err != nil {
		t.Errorf("the other workspace's backend namespace is gone: %v", err)
	}
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
