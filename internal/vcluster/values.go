package vcluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/syncer"
)

// Values are the default values of every Tenant's vCluster (docs/tenant.md), with the quota as the
// control-plane requests and limits, plus the isolation the seed left out: the chart's
// NetworkPolicy (with cloud metadata out of reach), ResourceQuota and LimitRange policies on, so
// one tenant's workloads cannot reach or starve another's on the shared backend, and the chart's
// pod security standard at the host namespace's level. Ingress sync to the shared backend is off unless the
// platform admin allows one ingress class (ingressClass); then the vCluster syncs Ingresses and
// config/policies/ingress-class.yaml refuses Ingresses of any other class in the backend's
// tenant namespaces. (The chart's sync.fromHost.ingressClasses would need a ClusterRole, which the
// manager's backend identity may not create.)
//
// The distro is k3s, the seed's, unless o.Distro names another; the exposure (o.Exposure, host:
// the vCluster's external host with ExposeIngress) sets the Service type, the control-plane
// Ingress, the certificate's extra SANs and the exported server.
func Values(t *kov1alpha1.Tenant, release, namespace, host string, o Options) map[string]any {
	environment, ingressClass := o.Environment, o.IngressClass
	res := map[string]any{
		"cpu":    t.Spec.Quota.CPU.String(),
		"memory": t.Spec.Quota.Memory.String(),
	}
	labels := map[string]any{
		"kubeopera.io/tenant-id": t.Spec.CloudSpaceID,
	}
	if environment != "" {
		labels["kubeopera.io/environment"] = environment
	}
	distro := o.Distro
	if distro == "" {
		distro = DistroK3s
	}
	exposure := o.Exposure.values(release, namespace, host)
	controlPlane := exposure["controlPlane"].(map[string]any)
	controlPlane["distro"] = map[string]any{distro: map[string]any{"enabled": true}}
	controlPlane["statefulSet"] = map[string]any{
		"resources": map[string]any{
			"requests": res,
			"limits":   copyMap(res),
		},
		"labels": labels,
	}
	values := map[string]any{
		"controlPlane":     controlPlane,
		"sync":             syncValues(ingressClass),
		"exportKubeConfig": exposure["exportKubeConfig"],
		// The chart turns vCluster's telemetry on by default: every vCluster would send usage
		// data to its vendor from the tenants' backend. The platform never volunteers that.
		"telemetry": map[string]any{"enabled": false},
		"policies": map[string]any{
			"networkPolicy": networkPolicyValues(),
			"resourceQuota": map[string]any{"enabled": true},
			"limitRange":    map[string]any{"enabled": true},
			// The vCluster 0.21 syncer (not the chart's templates) reads policies.podSecurityStandard
			// from its config (templates/config-secret.yaml renders every value into Secret
			// vc-config-<release>): it checks each virtual Pod against the level before syncing it
			// to the host and refuses it with a SyncError event the tenant sees
			// (pkg/controllers/resources/pods/syncer.go, validate_pod_security.go), and labels every
			// virtual namespace with it (pkg/controllers/podsecurity). The chart itself only adds a
			// RuntimeDefault seccomp profile to CoreDNS (templates/coredns-configmap.yaml). The
			// backend's own guard is the host namespace's Pod Security label (the same level,
			// syncer.PodSecurityLevel), which the tenant cannot change; this value makes the
			// refusal visible inside the vCluster instead of as a Pod that never appears.
			"podSecurityStandard": syncer.PodSecurityBaseline,
		},
	}
	if o.ServiceCIDR != "" {
		// vCluster 0.21 finds the host's Service range by creating a Service with ClusterIP
		// 4.4.4.4 and reading the range from the refusal (pkg/util/servicecidr); a
		// kube-apiserver with the ServiceCIDR allocator (Kubernetes 1.33+) no longer names the
		// range there, so vCluster falls back to 10.96.0.0/12 (pkg/setup/initialize.go lines
		// 68-81) and, on any other range, exits when it cannot give its virtual default/kubernetes
		// Service the host Service's ClusterIP ("failed to allocate IP ... the provided network
		// does not match the current range"). The top-level serviceCIDR (config/config.go lines
		// 69-70, deprecated but read at initialize.go line 68) skips the detection.
		values["serviceCIDR"] = o.ServiceCIDR
	}
	return values
}

// The distros a Tenant's vCluster may run (the chart's controlPlane.distro keys).
const (
	// DistroK3s is the seed's distro and the production default.
	DistroK3s = "k3s"
	// DistroK8s runs kube-apiserver and kube-controller-manager with kine as the store.
	DistroK8s = "k8s"
)

// Options are the platform admin's choices every vCluster is installed with.
type Options struct {
	// Environment is a label of the control plane (ENVIRONMENT).
	Environment string
	// IngressClass, when set, lets the vCluster sync Ingresses of that class to the backend.
	IngressClass string
	// Distro is the chart's distro (DistroK3s when empty).
	Distro string
	// Exposure is how the vCluster is reached from outside the backend.
	Exposure Exposure
	// ServiceCIDR is the backend's Service range (vCluster's top-level serviceCIDR value); empty
	// leaves vCluster to detect it.
	ServiceCIDR string
}

// chartEgressExcept are the egress exceptions of the vCluster 0.21 chart's NetworkPolicy for
// tenant workloads (chart/values.yaml policies.networkPolicy.outgoingConnections.ipBlock.except:
// the carrier-grade NAT, loopback and private ranges). Helm replaces lists rather than merging
// them, so setting the list repeats them.
var chartEgressExcept = []string{"100.64.0.0/10", "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}

// linkLocal is 169.254.0.0/16, where clouds serve instance metadata and credentials
// (169.254.169.254 on AWS, GCP, Azure and OpenStack; 169.254.170.2 for ECS task roles).
const linkLocal = "169.254.0.0/16"

// networkPolicyValues turn on the chart's NetworkPolicies (templates/networkpolicy.yaml:
// vc-work-<release> for the synced workloads, vc-cp-<release> for the control plane) and let
// tenant workloads reach 0.0.0.0/0 except the chart's private ranges and link-local addresses:
// a tenant's Pod on the backend cannot ask the node's cloud metadata service for the node's
// credentials. outgoingConnections.platform (egress from the control plane to pods labelled
// app=loft in any namespace, for vCluster Platform) is off: the platform does not run it.
func networkPolicyValues() map[string]any {
	except := make([]any, 0, len(chartEgressExcept)+1)
	for _, cidr := range chartEgressExcept {
		except = append(except, cidr)
	}
	except = append(except, linkLocal)
	return map[string]any{
		"enabled": true,
		"outgoingConnections": map[string]any{
			"platform": false,
			"ipBlock": map[string]any{
				"cidr":   "0.0.0.0/0",
				"except": except,
			},
		},
	}
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// syncValues: service accounts sync to the host (the seed's values); Ingresses only when an
// ingress class is allowed.
func syncValues(ingressClass string) map[string]any {
	sync := map[string]any{
		"toHost": map[string]any{
			"ingresses":       map[string]any{"enabled": ingressClass != ""},
			"serviceAccounts": map[string]any{"enabled": true},
		},
	}
	return sync
}

// BackendServiceCIDR reads the backend's Service range from its ServiceCIDR "kubernetes"
// (networking.k8s.io/v1, Kubernetes 1.33+: the API server's --service-cluster-ip-range), for
// Options.ServiceCIDR: its first range. Empty when the backend has none (an older Kubernetes,
// where vCluster's own detection works).
func BackendServiceCIDR(ctx context.Context, cs kubernetes.Interface) (string, error) {
	list, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("failed to read the backend's ServiceCIDRs: %w", err)
	}
	for _, sc := range list.Items {
		if sc.Name == "kubernetes" && len(sc.Spec.CIDRs) > 0 {
			return sc.Spec.CIDRs[0], nil
		}
	}
	return "", nil
}
