package syncer

import (
	"strings"
	"testing"

	"github.com/kubeopera/kubeopera/workspaces"

	"github.com/google/go-cmp/cmp"
)

func TestPodSecurityLabels(t *testing.T) {
	const lc = "1bg4baqdjkcw9lz4" // fingerprint 1de339c9f447 (TestFingerprint)
	restricted := map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "v1.35",
		"pod-security.kubernetes.io/warn":            "restricted",
		"pod-security.kubernetes.io/warn-version":    "v1.35",
		"pod-security.kubernetes.io/audit":           "restricted",
		"pod-security.kubernetes.io/audit-version":   "v1.35",
	}
	baseline := map[string]string{
		"pod-security.kubernetes.io/enforce":         "baseline",
		"pod-security.kubernetes.io/enforce-version": "v1.35",
		"pod-security.kubernetes.io/warn":            "baseline",
		"pod-security.kubernetes.io/warn-version":    "v1.35",
		"pod-security.kubernetes.io/audit":           "restricted",
		"pod-security.kubernetes.io/audit-version":   "v1.35",
	}
	longHost := workspaces.VClusterNamespace(lc, strings.Repeat("a", 50))
	tests := map[string]struct {
		namespace string
		want      map[string]string
	}{
		"the workspace's namespace kcp-<fp> holds only platform objects": {
			namespace: "kcp-1de339c9f447", want: restricted,
		},
		"a vCluster host namespace runs the tenant's synced Pods": {
			namespace: "kcp-1de339c9f447-vc-alice", want: baseline,
		},
		"a shortened vCluster host namespace keeps its prefix": {
			namespace: longHost, want: baseline,
		},
		"another suffixed namespace of the workspace": {
			namespace: "kcp-1de339c9f447-crossplane", want: restricted,
		},
		"a suffix that only starts like vc": {
			namespace: "kcp-1de339c9f447-vcx-alice", want: restricted,
		},
		"another workspace's vCluster host namespace is not this one's": {
			namespace: "kcp-4813494d137e-vc-alice", want: restricted,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodSecurityLabels(lc, tc.namespace)); diff != "" {
				t.Errorf("PodSecurityLabels(%s) (-want +got):\n%s", tc.namespace, diff)
			}
		})
	}
	if len(longHost) != 63 || !strings.HasPrefix(longHost, "kcp-1de339c9f447-vc-") {
		t.Errorf("VClusterNamespace of a long tenantName = %q, want 63 characters with the host prefix", longHost)
	}
	// What the manager creates carries them, next to the fingerprint label.
	ns := newNamespace(lc, "kcp-1de339c9f447-vc-alice", "Tenant default/alice")
	for k, v := range baseline {
		if ns.Labels[k] != v {
			t.Errorf("new host namespace label %s = %q, want %q", k, ns.Labels[k], v)
		}
	}
	if ns.Labels[workspaces.FingerprintLabel] != "1de339c9f447" {
		t.Errorf("new host namespace fingerprint label = %q", ns.Labels[workspaces.FingerprintLabel])
	}
}
