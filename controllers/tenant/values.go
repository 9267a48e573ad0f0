package tenant

import (
	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

// vclusterValues are the seed's default values for every CloudSpace, with the quota as the
// control-plane requests and limits, plus the isolation the seed left out: the chart's
// NetworkPolicy, ResourceQuota and LimitRange policies on, so one tenant's workloads cannot reach
// or starve another's on the shared backend. Ingress sync to the shared backend is off unless the
// platform admin allows one ingress class (ingressClass); then the vCluster syncs Ingresses and
// config/policies/ingress-class.yaml refuses Ingresses of any other class in the backend's
// tenant namespaces. (The chart's sync.fromHost.ingressClasses would need a ClusterRole, which the
// manager's backend identity may not create.)
func vclusterValues(t *kov1alpha1.Tenant, release, namespace, environment, ingressClass string) map[string]any {
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
	return map[string]any{
		"controlPlane": map[string]any{
			"distro": map[string]any{
				"k3s": map[string]any{"enabled": true},
			},
			"statefulSet": map[string]any{
				"resources": map[string]any{
					"requests": res,
					"limits":   copyMap(res),
				},
				"labels": labels,
			},
		},
		"sync": syncValues(ingressClass),
		// vCluster always writes Secret vc-<release> (key "config"); the seed's
		// exportKubeConfig.enabled is not a key of the 0.21 chart's schema (which refuses unknown
		// keys), so only the server is set: the Service's in-cluster short-DNS name, which the
		// vCluster certificate covers.
		"exportKubeConfig": map[string]any{
			"server": "https://" + release + "." + namespace + ":443",
		},
		"policies": map[string]any{
			"networkPolicy": map[string]any{"enabled": true},
			"resourceQuota": map[string]any{"enabled": true},
			"limitRange":    map[string]any{"enabled": true},
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
