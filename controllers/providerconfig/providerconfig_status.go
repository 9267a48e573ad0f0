package providerconfig

import (
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
)

// readyMessage says what a Ready ProviderConfig gives Crossplane. A ProviderConfig has no state
// machine of its own: the skeleton's phases (Pending, Ready, Failed, Deleting) are its phases.
func readyMessage(*platformv1alpha1.ProviderConfig) string {
	return "Credentials are well-formed and handed to Crossplane in the workspace's backend namespace"
}
