package hostcluster

import (
	"fmt"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// phaseOrder is the order of the phases a HostCluster goes through (docs/hostcluster.md).
var phaseOrder = map[kov1alpha1.HostClusterPhase]int{
	kov1alpha1.HostClusterPhasePending:              1,
	kov1alpha1.HostClusterPhaseValidatingAccess:     2,
	kov1alpha1.HostClusterPhaseProvisioning:         3,
	kov1alpha1.HostClusterPhaseBootstrappingFlux:    4,
	kov1alpha1.HostClusterPhaseGeneratingGitOpsTree: 5,
	kov1alpha1.HostClusterPhaseInstallingKubeOpera:  6,
	kov1alpha1.HostClusterPhaseReady:                7,
}

// phase is the HostCluster's state machine as a pure function of its status and the step the
// pass stands at: Pending → ValidatingAccess (connect_existing) or Provisioning (provision_*) →
// BootstrappingFlux → GeneratingGitOpsTree → InstallingKubeOpera; the skeleton makes it Ready,
// Failed or Deleting, and Pending for a new attempt. The phase only moves forward within an
// attempt, and a Ready cluster stays Ready while later passes refresh it (its Ready condition
// says when something is wrong). The skeleton writes each phase before the next begins
// (PublishPhases), so kubectl get -w shows every one.
func phase(hc *kov1alpha1.HostCluster, at string) string {
	cur := hc.Status.Phase
	var next kov1alpha1.HostClusterPhase
	connect := hc.Spec.Mode == kov1alpha1.HostClusterModeConnectExisting
	switch at {
	case kov1alpha1.ProvisionedCondition:
		if !connect && !reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition) {
			next = kov1alpha1.HostClusterPhaseProvisioning
			if cur == kov1alpha1.HostClusterPhaseReady {
				// A built cluster provisioned again (a changed spec.provisioning): the tenant
				// sees it in Provisioning until the run applied, then the phases that follow.
				return string(next)
			}
		}
	case kov1alpha1.AccessValidatedCondition:
		if connect {
			next = kov1alpha1.HostClusterPhaseValidatingAccess
		}
	case kov1alpha1.FluxReadyCondition:
		next = kov1alpha1.HostClusterPhaseBootstrappingFlux
	case kov1alpha1.GitOpsTreeGeneratedCondition:
		next = kov1alpha1.HostClusterPhaseGeneratingGitOpsTree
	case kov1alpha1.KubeOperaInstalledCondition, kov1alpha1.AdminBootstrappedCondition:
		next = kov1alpha1.HostClusterPhaseInstallingKubeOpera
	}
	if cur == kov1alpha1.HostClusterPhaseReady || next == "" || phaseOrder[next] <= phaseOrder[cur] {
		return string(cur)
	}
	return string(next)
}

// readyMessage says what is ready and, plainly, whether an admin account was created
// (docs/hostcluster.md#admin-bootstrap).
func readyMessage(hc *kov1alpha1.HostCluster) string {
	msg := fmt.Sprintf("Flux healthy, pointed at %s; the apps Kustomization is Ready. Kubeconfig in Secret %s.", hc.Spec.GitOpsPath, hc.Status.KubeconfigSecret)
	if hc.Spec.AdminEmail == "" {
		return msg + " No admin account was created: spec.adminEmail and spec.adminUsername are unset."
	}
	return msg + fmt.Sprintf(" Super-admin account %s created; its password is in Secret %s/%s.", hc.Spec.AdminEmail, hc.Namespace, hc.Status.AdminPasswordSecretRef)
}
