package tenant

import (
	"fmt"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

// phase is the Tenant's state machine (docs/tenant.md#state-machine) as a pure function of its
// status and the step the pass stands at: Provisioning from the release on (a Ready Tenant waiting
// only for its kubeconfig to be delivered again stays Ready); before, the phase the skeleton set
// (Pending for a new attempt). Ready, Failed and Deleting are the skeleton's.
func phase(t *kov1alpha1.Tenant, at string) string {
	switch {
	case at == kov1alpha1.ReleaseDeployedCondition:
		return string(kov1alpha1.TenantPhaseProvisioning)
	case at == kov1alpha1.KubeconfigDeliveredCondition && t.Status.Phase != kov1alpha1.TenantPhaseReady:
		return string(kov1alpha1.TenantPhaseProvisioning)
	}
	return string(t.Status.Phase)
}

// readyMessage says what a Ready Tenant has.
func readyMessage(t *kov1alpha1.Tenant) string {
	return fmt.Sprintf("vCluster %s is ready; kubeconfig in Secret %s", t.Status.VClusterName, t.Status.KubeconfigSecret)
}
