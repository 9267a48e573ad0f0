package kubernetescluster

import (
	"fmt"
	"strings"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
)

// phase is the KubernetesCluster's state machine (docs/kubernetescluster.md) as a pure function of
// its status and the step the pass stands at: Provisioning from the first Crossplane resource on
// (a Ready cluster stays Ready while later passes refresh it); before, the phase the skeleton set
// (Pending for a new attempt). Ready, Failed and Deleting are the skeleton's.
func phase(kc *platformv1alpha1.KubernetesCluster, at string) string {
	switch at {
	case platformv1alpha1.NetworkReadyCondition, platformv1alpha1.ClusterReadyCondition,
		platformv1alpha1.NodePoolReadyCondition, platformv1alpha1.KubeconfigDeliveredCondition:
		if kc.Status.Phase != platformv1alpha1.KubernetesClusterPhaseReady {
			return string(platformv1alpha1.KubernetesClusterPhaseProvisioning)
		}
	}
	return string(kc.Status.Phase)
}

// readyMessage says what a Ready KubernetesCluster has.
func readyMessage(kc *platformv1alpha1.KubernetesCluster) string {
	msg := fmt.Sprintf("Cluster ready with %d %s nodes; kubeconfig in Secret %s", kc.Spec.NodeCount, kc.Status.Flavor, kc.Status.KubeconfigSecret)
	if kc.Status.Endpoint != "" {
		msg += fmt.Sprintf(" (%s endpoint %s)", strings.ToLower(string(kc.Status.EndpointAccess)), kc.Status.Endpoint)
	}
	return msg
}
