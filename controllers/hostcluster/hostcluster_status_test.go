package hostcluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

// hcWith is a provisioned HostCluster in phase, its Provisioned condition as given ("" none).
func hcWith(phase kov1alpha1.HostClusterPhase, provisioned metav1.ConditionStatus, applied string) *kov1alpha1.HostCluster {
	hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: kov1alpha1.HostClusterSpec{Mode: kov1alpha1.HostClusterModeProvisionVanilla}}
	hc.Status.Phase = phase
	if provisioned != "" {
		hc.Status.Conditions = []metav1.Condition{{Type: kov1alpha1.ProvisionedCondition, Status: provisioned, ObservedGeneration: 2}}
	}
	if applied != "" {
		hc.Status.Provisioning = &kov1alpha1.HostClusterProvisioningStatus{AppliedInputsHash: applied}
	}
	return hc
}

func TestPhaseOfADay2Run(t *testing.T) {
	cases := map[string]struct {
		hc   *kov1alpha1.HostCluster
		at   string
		want kov1alpha1.HostClusterPhase
	}{
		"a first build":                  {hc: hcWith(kov1alpha1.HostClusterPhasePending, "", ""), at: kov1alpha1.ProvisionedCondition, want: kov1alpha1.HostClusterPhaseProvisioning},
		"Ready, provisioned":             {hc: hcWith(kov1alpha1.HostClusterPhaseReady, metav1.ConditionTrue, "a"), at: kov1alpha1.ProvisionedCondition, want: kov1alpha1.HostClusterPhaseReady},
		"Ready, provisioning again":      {hc: hcWith(kov1alpha1.HostClusterPhaseReady, metav1.ConditionFalse, "a"), at: kov1alpha1.ProvisionedCondition, want: kov1alpha1.HostClusterPhaseProvisioning},
		"then on like after the build":   {hc: hcWith(kov1alpha1.HostClusterPhaseProvisioning, metav1.ConditionTrue, "b"), at: kov1alpha1.FluxReadyCondition, want: kov1alpha1.HostClusterPhaseBootstrappingFlux},
		"Ready stays Ready for the rest": {hc: hcWith(kov1alpha1.HostClusterPhaseReady, metav1.ConditionTrue, "a"), at: kov1alpha1.FluxReadyCondition, want: kov1alpha1.HostClusterPhaseReady},
	}
	for name, tc := range cases {
		if got := phase(tc.hc, tc.at); got != string(tc.want) {
			t.Errorf("%s: phase %s, want %s", name, got, tc.want)
		}
	}
}

func TestUpToDate(t *testing.T) {
	if upToDate(hcWith(kov1alpha1.HostClusterPhaseReady, metav1.ConditionFalse, "a"), "a") {
		t.Error("a cluster not provisioned is up to date")
	}
	if !upToDate(hcWith(kov1alpha1.HostClusterPhaseReady, metav1.ConditionTrue, "a"), "a") {
		t.Error("a cluster built from the current inputs is not up to date")
	}
	if upToDate(hcWith(kov1alpha1.HostClusterPhaseReady, metav1.ConditionTrue, "a"), "b") {
		t.Error("a cluster built from other inputs (nodeCount 2, now 5) is up to date: the change would be ignored")
	}
	// Built before the hash was recorded: taken as built from its current spec, and recorded.
	old := hcWith(kov1alpha1.HostClusterPhaseReady, metav1.ConditionTrue, "")
	if !upToDate(old, "a") || old.Status.Provisioning == nil || old.Status.Provisioning.AppliedInputsHash != "a" {
		t.Errorf("a cluster built before the hash was kept: status.provisioning %+v", old.Status.Provisioning)
	}
}
