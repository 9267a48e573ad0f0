package health

import "testing"

func TestParseProviderID(t *testing.T) {
	tests := map[string]struct {
		providerID   string
		wantProvider string
		wantRegion   string
		reason       string
	}{
		"aws":                     {"aws:///eu-north-1a/i-0abc", "aws", "eu-north-1", "the seed's example"},
		"aws us-east-1":           {"aws:///us-east-1f/i-08736224042c4ee75", "aws", "us-east-1", ""},
		"aws ap-southeast-2":      {"aws:///ap-southeast-2c/i-0abc", "aws", "ap-southeast-2", ""},
		"aws GovCloud":            {"aws:///us-gov-west-1a/i-0abc", "aws", "us-gov-west-1", ""},
		"aws Local Zone":          {"aws:///us-west-2-lax-1a/i-0abc", "aws", "us-west-2", "the parent region"},
		"aws unknown zone scheme": {"aws:///eusc-de-east-1a/i-0abc", "aws", "eusc-de-east-1", "the seed's rule"},
		"aws Fargate":             {"aws:///eu-west-1b/fargate-ip-10-0-1-2.eu-west-1.compute.internal", "aws", "eu-west-1", ""},
		"aws without zone":        {"aws:////i-0abc", "aws", "", "the CCM's zone-less form"},
		"aws garbage zone":        {"aws:///nonsense/i-0abc", "aws", "", "no guessing"},
		"aws no instance":         {"aws:///eu-north-1a/", "unknown", "", ""},
		"aws too many segments":   {"aws:///eu-north-1a/i-0abc/extra", "unknown", "", ""},
		"gce":                     {"gce://my-project/europe-west1-b/gke-pool-1-abcd", "gcp", "europe-west1", ""},
		"gce us-central1":         {"gce://p/us-central1-a/n", "gcp", "us-central1", ""},
		"gce odd zone":            {"gce://p/zone/n", "gcp", "", "no guessing"},
		"gce missing name":        {"gce://p/us-central1-a", "unknown", "", ""},
		"azure VM": {"azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/aks-1",
			"azure", "", "the ID names no location"},
		"azure scale set": {"azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/vmss/virtualMachines/0",
			"azure", "", ""},
		"azure garbage":       {"azure://invalid-id", "unknown", "", ""},
		"openstack":           {"openstack:///9b1c3e0a-0000-4000-8000-000000000000", "openstack", "", ""},
		"openstack regional":  {"openstack://RegionOne/9b1c3e0a-0000-4000-8000-000000000000", "openstack", "RegionOne", "OS_CCM_REGIONAL"},
		"openstack no id":     {"openstack:///", "unknown", "", ""},
		"empty":               {"", "unknown", "", "a bare kubeadm cluster"},
		"no scheme":           {"i-0abc", "unknown", "", ""},
		"kind":                {"kind://docker/kind/kind-control-plane", "unknown", "", "not a cloud"},
		"unknown cloud":       {"digitalocean://12345", "unknown", "", ""},
		"scheme case matters": {"AWS:///eu-north-1a/i-0abc", "unknown", "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			provider, region := ParseProviderID(tc.providerID)
			if provider != tc.wantProvider || region != tc.wantRegion {
				t.Errorf("ParseProviderID(%q) = %q, %q; want %q, %q (%s)",
					tc.providerID, provider, region, tc.wantProvider, tc.wantRegion, tc.reason)
			}
		})
	}
}
