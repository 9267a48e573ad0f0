package health

import (
	"regexp"
	"strings"
)

// UnknownProvider is the provider of a cluster whose nodes carry no providerID this package
// recognises, e.g. a bare kubeadm cluster without a cloud controller manager: the seed reports
// "unknown" rather than guessing.
const UnknownProvider = "unknown"

var (
	// awsRegion is the region at the start of an AWS availability zone: eu-north-1 of
	// eu-north-1a, us-west-2 of the Local Zone us-west-2-lax-1a, us-gov-west-1 of us-gov-west-1a.
	awsRegion = regexp.MustCompile(`^[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-[0-9]+`)
	// awsZone is a zone name ending in a digit and a letter, for regions awsRegion does not know.
	awsZone = regexp.MustCompile(`^(.*[0-9])[a-z]$`)
	// gceZone is a GCE zone: a region and a one-letter suffix, europe-west1-b.
	gceZone = regexp.MustCompile(`^([a-z]+-[a-z]+[0-9]+)-[a-z]$`)
)

// ParseProviderID returns the provider and region a node's .spec.providerID names. The formats
// are the ones the cloud controller managers write:
//
//   - aws:///<zone>/<instance-id>, or aws:////<instance-id> without a zone:
//     kubernetes/cloud-provider-aws, pkg/providers/v1/instances.go (KubernetesInstanceID).
//     The region is the zone minus its trailing letter (eu-north-1a: eu-north-1), as docs/fleet.md#provider-and-region
//     says; for a Local or Wavelength Zone (us-west-2-lax-1a) it is the parent region.
//   - gce://<project>/<zone>/<instance-name>: kubernetes/cloud-provider-gcp,
//     providers/gce/gce_util.go (providerIDRE). Provider "gcp"; the region is the zone minus
//     its "-<letter>" suffix (europe-west1-b: europe-west1).
//   - azure:///subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Compute/
//     virtualMachines/<name> (or .../virtualMachineScaleSets/<set>/virtualMachines/<n>):
//     kubernetes-sigs/cloud-provider-azure (providerIDRE). The ID names no location: region "".
//   - openstack:///<instance-id>, or openstack://<region>/<instance-id> when the CCM runs
//     with OS_CCM_REGIONAL=true: kubernetes/cloud-provider-openstack,
//     pkg/openstack/instancesv2.go (makeInstanceID).
//
// Anything else, including an empty providerID, is UnknownProvider with region "".
func ParseProviderID(providerID string) (provider, region string) {
	scheme, rest, ok := strings.Cut(providerID, "://")
	if !ok {
		return UnknownProvider, ""
	}
	switch scheme {
	case "aws":
		// rest is /<zone>/<id> or //<id>.
		parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
		if len(parts) != 2 || parts[1] == "" {
			return UnknownProvider, ""
		}
		return "aws", awsRegionOf(parts[0])
	case "gce":
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return UnknownProvider, ""
		}
		if m := gceZone.FindStringSubmatch(parts[1]); m != nil {
			return "gcp", m[1]
		}
		return "gcp", ""
	case "azure":
		if !strings.HasPrefix(rest, "/subscriptions/") {
			return UnknownProvider, ""
		}
		return "azure", ""
	case "openstack":
		region, id, ok := strings.Cut(rest, "/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return UnknownProvider, ""
		}
		return "openstack", region
	default:
		return UnknownProvider, ""
	}
}

// awsRegionOf returns the region of an availability zone, "" for no zone.
func awsRegionOf(zone string) string {
	if zone == "" {
		return ""
	}
	if m := awsRegion.FindString(zone); m != "" {
		return m
	}
	// A region naming scheme newer than awsRegion: drop the trailing letter, as the seed does.
	if m := awsZone.FindStringSubmatch(zone); m != nil {
		return m[1]
	}
	return ""
}
