package workspaces

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

func TestFingerprint(t *testing.T) {
	tests := map[string]struct {
		logicalCluster string
		want           string
	}{
		// sha256("root") = 4813494d137e1631bba301d5acab6e7bb7aa74ce1185d456565ef51d737677b2
		"root": {logicalCluster: "root", want: "4813494d137e"},
		// sha256("1bg4baqdjkcw9lz4") computed independently with sha256sum.
		"generated name": {logicalCluster: "1bg4baqdjkcw9lz4", want: "1de339c9f447"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Fingerprint(tc.logicalCluster); got != tc.want {
				t.Errorf("Fingerprint(%q) = %q, want %q", tc.logicalCluster, got, tc.want)
			}
		})
	}
}

func TestLogicalClusterStripsProviderPrefix(t *testing.T) {
	tests := map[string]struct {
		in   multicluster.ClusterName
		want string
	}{
		"kubeopera export":  {in: "kubeopera.io#1bg4baqdjkcw9lz4", want: "1bg4baqdjkcw9lz4"},
		"platform export":   {in: "platform.edgeconnect.eu#1bg4baqdjkcw9lz4", want: "1bg4baqdjkcw9lz4"},
		"no provider given": {in: "1bg4baqdjkcw9lz4", want: "1bg4baqdjkcw9lz4"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := LogicalCluster(tc.in); got != tc.want {
				t.Errorf("LogicalCluster(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if Namespace(LogicalCluster("kubeopera.io#x")) != Namespace(LogicalCluster("platform.edgeconnect.eu#x")) {
		t.Error("both exports must map a workspace to one backend namespace")
	}
}

func TestNamesAreValidAndDistinct(t *testing.T) {
	long := strings.Repeat("a", 32)
	tests := map[string]struct {
		got    string
		want   string
		maxLen int
	}{
		"vcluster namespace": {got: VClusterNamespace("root", "alice-default"), want: "kcp-4813494d137e-vc-alice-default", maxLen: 63},
		"long tenant name":   {got: VClusterNamespace("root", long), maxLen: 63},
		"object name":        {got: ObjectName("default", "my-cluster", 63), want: "default-my-cluster", maxLen: 63},
		"long object name":   {got: ObjectName(strings.Repeat("n", 63), strings.Repeat("m", 253), 63), maxLen: 63},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.want != "" && tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
			if len(tc.got) > tc.maxLen {
				t.Errorf("%q is %d characters, more than %d", tc.got, len(tc.got), tc.maxLen)
			}
			if errs := validation.IsDNS1123Label(tc.got); len(errs) > 0 {
				t.Errorf("%q is not a valid namespace name: %v", tc.got, errs)
			}
		})
	}

	// Two long names that share their first 63 characters must still differ.
	a := ObjectName(strings.Repeat("n", 40), strings.Repeat("m", 60)+"a", 63)
	b := ObjectName(strings.Repeat("n", 40), strings.Repeat("m", 60)+"b", 63)
	if a == b {
		t.Errorf("distinct inputs gave the same name %q", a)
	}
	// The namespace/name boundary is never ambiguous.
	if ObjectName("a-b", "c", 63) == ObjectName("a", "b-c", 63) {
		t.Error("namespace a-b name c and namespace a name b-c gave the same name")
	}
	if VClusterNamespace("ws-a", "t") == VClusterNamespace("ws-b", "t") {
		t.Error("two workspaces gave the same vCluster namespace")
	}
}
