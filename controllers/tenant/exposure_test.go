package tenant_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/tenant"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestTenantKubeconfigNamesTheExternalEndpoint: with the platform exposing vClusters through a
// load balancer or a TLS-passthrough ingress, a Tenant waits (saying so) until the backend gave
// its vCluster an address, then gets a kubeconfig naming that address, the in-cluster one under a
// second key, and status.endpoint naming it.
func TestTenantKubeconfigNamesTheExternalEndpoint(t *testing.T) {
	ingress := vcluster.Exposure{Mode: vcluster.ExposeIngress, Domain: "vc.example.org", IngressClass: "passthrough"}
	for name, tc := range map[string]struct {
		exposure vcluster.Exposure
		// start starts what gives the vCluster its address and returns the endpoint (empty: the
		// ingress host's) and what the tenant's DNS answers for it.
		start func(t *testing.T, s *suite, host string) (string, map[string]string)
		// waiting is what the Tenant says while there is none.
		waiting string
	}{
		"load balancer": {
			exposure: vcluster.Exposure{Mode: vcluster.ExposeLoadBalancer},
			start: func(t *testing.T, s *suite, host string) (string, map[string]string) {
				sim.StartLoadBalancers(t, s.admin, s.vclusters.DialService)
				var ip string
				framework.Eventually(t, time.Minute, "the Service has an address", func() (bool, string) {
					svc := &corev1.Service{}
					if err := s.backend.Get(t.Context(), client.ObjectKey{Namespace: host, Name: "vc-alice"}, svc); err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
						return false, fmt.Sprint(err)
					}
					ip = svc.Status.LoadBalancer.Ingress[0].IP
					return true, ""
				})
				return "https://" + ip + ":443", nil
			},
			waiting: "Waiting for the backend's load balancer to give Service",
		},
		"ingress": {
			exposure: ingress,
			start: func(t *testing.T, s *suite, _ string) (string, map[string]string) {
				ic := sim.StartIngressController(t, s.admin, "passthrough", s.vclusters.DialService)
				// The platform's wildcard DNS record points at the ingress controller.
				return "", map[string]string{ingress.Host("alice", workspaces.Fingerprint(s.lc["acme"])): ic.Address}
			},
			waiting: "Waiting for the ingress controller of class passthrough to admit Ingress",
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := setup(t, func(r *tenant.Reconciler) { r.Exposure = tc.exposure })
			s.chart.Status.Store(http.StatusOK)
			acme := s.ws["acme"]
			host := workspaces.VClusterNamespace(s.lc["acme"], "alice")
			newTenant(t, acme, "alice", "c0ffee01", "1")
			waitFor(t, acme, "alice", "deployed", func(tn *kov1alpha1.Tenant) bool {
				return cond(tn, kov1alpha1.ReleaseDeployedCondition) == "True/Succeeded"
			})
			s.vclusterUp(t, host, "vc-alice")
			tn := waitFor(t, acme, "alice", "waiting for an address", func(tn *kov1alpha1.Tenant) bool {
				return strings.Contains(tn.Status.Message, tc.waiting)
			})
			if tn.Status.Phase != kov1alpha1.TenantPhaseProvisioning || tn.Status.Endpoint != "" {
				t.Errorf("without an address: %s, endpoint %q", describe(tn), tn.Status.Endpoint)
			}

			want, hosts := tc.start(t, s, host)
			if want == "" {
				want = "https://" + ingress.Host("alice", workspaces.Fingerprint(s.lc["acme"])) + ":443"
			}
			tn = waitFor(t, acme, "alice", "Ready", func(tn *kov1alpha1.Tenant) bool { return tn.Status.Phase == kov1alpha1.TenantPhaseReady })
			if tn.Status.Endpoint != want {
				t.Errorf("status.endpoint = %q, want %q", tn.Status.Endpoint, want)
			}
			if msg := tn.Status.Conditions; !strings.Contains(fmt.Sprint(msg), want) {
				t.Errorf("KubeconfigDelivered does not name %s: %v", want, msg)
			}
			sec := &corev1.Secret{}
			if err := acme.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "tenant-c0ffee01-kubeconfig"}, sec); err != nil {
				t.Fatalf("delivered kubeconfig: %v", err)
			}
			for key, server := range map[string]string{
				tenant.DeliveredKubeconfigKey: want,
				tenant.InClusterKubeconfigKey: vcluster.InClusterServer("vc-alice", host),
			} {
				cfg, err := clientcmd.Load(sec.Data[key])
				if err != nil {
					t.Fatalf("key %s: %v", key, err)
				}
				for name, c := range cfg.Clusters {
					if c.Server != server {
						t.Errorf("key %s: cluster %s server = %q, want %q", key, name, c.Server, server)
					}
				}
			}
			// The tenant's kubectl, with what they received, reaches their real vCluster (whose
			// certificate covers a load balancer's address within vCluster's 2 s re-read).
			framework.Eventually(t, 30*time.Second, "kubectl get namespaces with the delivered kubeconfig", func() (bool, string) {
				out, err := framework.Kubectl(t.Context(), t, sec.Data[tenant.DeliveredKubeconfigKey], hosts, "get", "namespaces", "-o", "name")
				return err == nil && strings.Contains(out, "namespace/kube-system"), fmt.Sprintf("%q, %v", out, err)
			})
		})
	}
}
