package xr

import (
	"slices"
	"testing"
)

func TestSubnetIDs(t *testing.T) {
	for in, want := range map[string][]string{
		"":                       nil,
		"subnet-a":               {"subnet-a"},
		"subnet-a,subnet-b":      {"subnet-a", "subnet-b"},
		" subnet-a , subnet-b ,": {"subnet-a", "subnet-b"},
		"subnet-b,subnet-a,,":    {"subnet-b", "subnet-a"},
		",,":                     nil,
	} {
		if got := SubnetIDs(in); !slices.Equal(got, want) {
			t.Errorf("SubnetIDs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewWritesSubnetIDsAsAList(t *testing.T) {
	x := New(Params{Name: "n", Namespace: "ns", Provider: "AWS", SubnetIDs: []string{"subnet-a", "subnet-b"}})
	if got := x.Object["spec"].(map[string]any)["subnetIDs"]; !slices.Equal(got.([]any), []any{"subnet-a", "subnet-b"}) {
		t.Errorf("spec.subnetIDs = %v", got)
	}
	if _, ok := New(Params{Name: "n"}).Object["spec"].(map[string]any)["subnetIDs"]; ok {
		t.Error("spec.subnetIDs written without subnets")
	}
}
