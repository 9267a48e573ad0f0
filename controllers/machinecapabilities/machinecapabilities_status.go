package machinecapabilities

import (
	"fmt"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
)

// readyMessage says how many catalog flavors satisfy a Ready MachineCapabilities. It has no state
// machine of its own: the skeleton's phases are its phases.
func readyMessage(mc *platformv1alpha1.MachineCapabilities) string {
	return fmt.Sprintf("%d flavors of the catalog satisfy these capabilities", len(mc.Status.MatchingFlavors))
}
