package overview

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/health"
)

func TestHostClusterRow(t *testing.T) {
	observed := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	base := kov1alpha1.HostCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kubeopera-system", Name: "edge"},
		Spec:       kov1alpha1.HostClusterSpec{ClusterID: "c-1", Mode: kov1alpha1.HostClusterModeConnectExisting, Provider: "aws", Region: "eu-north-1"},
	}
	for _, tc := range []struct {
		name string
		hc   func(*kov1alpha1.HostCluster)
		want Cluster
	}{{
		name: "new: Pending, the spec's provider, no health",
		hc:   func(*kov1alpha1.HostCluster) {},
		want: Cluster{Workspace: "lc", Namespace: "kubeopera-system", Name: "edge", ClusterID: "c-1", Source: "connect_existing",
			Phase: "Pending", Provider: "aws", Region: "eu-north-1"},
	}, {
		name: "inventory read: what was read wins, with the health and its penalties",
		hc: func(hc *kov1alpha1.HostCluster) {
			hc.Status.Phase = kov1alpha1.HostClusterPhaseReady
			hc.Status.Message = "ready"
			hc.Status.Conditions = []metav1.Condition{{Type: kov1alpha1.ReadyCondition, Status: metav1.ConditionTrue}}
			hc.Status.Inventory = &kov1alpha1.HostClusterInventory{
				Provider: "gce", Region: "europe-west1", KubernetesVersion: "v1.34.0", NodeCount: 3, ReadyNodeCount: 2,
				CPUPercent: ptr.To[int32](40), MemoryPercent: ptr.To[int32](70), HealthScore: ptr.To[int32](95), HealthBand: "green", UsageSource: kov1alpha1.UsageSourceRequests,
				HealthPenalties: []kov1alpha1.HealthPenalty{{Reason: "NodeNotReady", Detail: "node n-2 is not Ready", Points: "5"}},
				ObservedAt:      &metav1.Time{Time: observed},
			}
		},
		want: Cluster{Workspace: "lc", Namespace: "kubeopera-system", Name: "edge", ClusterID: "c-1", Source: "connect_existing",
			Phase: "Ready", Message: "ready", Ready: true, Provider: "gce", Region: "europe-west1", Version: "v1.34.0",
			NodesReady: 2, NodesTotal: 3, CPUPercent: ptr.To[int32](40), MemoryPercent: ptr.To[int32](70), UsageSource: "Requests", ObservedAt: &observed,
			Health: &Health{Score: 95, Band: "green", Penalties: []Penalty{{Reason: "NodeNotReady", Detail: "node n-2 is not Ready", Points: "5"}}}},
	}, {
		name: "an inventory never read (no observedAt) is no health, not a score of 0",
		hc: func(hc *kov1alpha1.HostCluster) {
			hc.Status.Phase = kov1alpha1.HostClusterPhaseValidatingAccess
			hc.Status.Inventory = &kov1alpha1.HostClusterInventory{}
		},
		want: Cluster{Workspace: "lc", Namespace: "kubeopera-system", Name: "edge", ClusterID: "c-1", Source: "connect_existing",
			Phase: "ValidatingAccess", Provider: "aws", Region: "eu-north-1"},
	}, {
		name: "usage from the metrics API and a partial cost estimate",
		hc: func(hc *kov1alpha1.HostCluster) {
			hc.Status.Phase = kov1alpha1.HostClusterPhaseReady
			hc.Status.Conditions = []metav1.Condition{{Type: kov1alpha1.ReadyCondition, Status: metav1.ConditionTrue}}
			hc.Status.Inventory = &kov1alpha1.HostClusterInventory{
				NodeCount: 3, ReadyNodeCount: 3, CPUPercent: ptr.To[int32](12), MemoryPercent: ptr.To[int32](30),
				UsageSource: kov1alpha1.UsageSourceMetricsAPI, HealthScore: ptr.To[int32](100), HealthBand: "green",
				Cost:       &kov1alpha1.HostClusterCost{Monthly: "60.74", Currency: "USD", PricedNodes: 2, UnpricedNodes: 1, UnpricedInstanceTypes: []string{"g5.48xlarge"}},
				ObservedAt: &metav1.Time{Time: observed},
			}
		},
		want: Cluster{Workspace: "lc", Namespace: "kubeopera-system", Name: "edge", ClusterID: "c-1", Source: "connect_existing",
			Phase: "Ready", Ready: true, Provider: "aws", Region: "eu-north-1",
			NodesReady: 3, NodesTotal: 3, CPUPercent: ptr.To[int32](12), MemoryPercent: ptr.To[int32](30), UsageSource: "MetricsAPI", ObservedAt: &observed,
			Cost:   &Cost{Monthly: "60.74", Currency: "USD", PricedNodes: 2, UnpricedNodes: 1, UnpricedInstanceTypes: []string{"g5.48xlarge"}, Partial: true},
			Health: &Health{Score: 100, Band: "green", Penalties: []Penalty{}}},
	}, {
		name: "unreachable after it was read: Ready False, the facts as last read, no health",
		hc: func(hc *kov1alpha1.HostCluster) {
			hc.Status.Phase = kov1alpha1.HostClusterPhaseReady
			hc.Status.Message = "API server https://edge.example:6443 unreachable since 2026-11-30T04:00:00Z (connection refused)"
			hc.Status.Conditions = []metav1.Condition{{Type: kov1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: kov1alpha1.UnreachableReason}}
			hc.Status.Inventory = &kov1alpha1.HostClusterInventory{
				KubernetesVersion: "v1.34.0", NodeCount: 3, ReadyNodeCount: 3, HealthBand: "unknown",
				ObservedAt: &metav1.Time{Time: observed}, UnreachableSince: &metav1.Time{Time: observed.Add(time.Hour)},
			}
		},
		want: Cluster{Workspace: "lc", Namespace: "kubeopera-system", Name: "edge", ClusterID: "c-1", Source: "connect_existing",
			Phase: "Ready", Message: "API server https://edge.example:6443 unreachable since 2026-11-30T04:00:00Z (connection refused)",
			Unreachable: true, UnreachableSince: ptr.To(observed.Add(time.Hour)),
			Provider: "aws", Region: "eu-north-1", Version: "v1.34.0", NodesReady: 3, NodesTotal: 3, ObservedAt: &observed},
	}, {
		name: "unreachable and never read",
		hc: func(hc *kov1alpha1.HostCluster) {
			hc.Status.Phase = kov1alpha1.HostClusterPhaseValidatingAccess
			hc.Status.Inventory = &kov1alpha1.HostClusterInventory{HealthBand: "unknown", UnreachableSince: &metav1.Time{Time: observed}}
		},
		want: Cluster{Workspace: "lc", Namespace: "kubeopera-system", Name: "edge", ClusterID: "c-1", Source: "connect_existing",
			Phase: "ValidatingAccess", Provider: "aws", Region: "eu-north-1", Unreachable: true, UnreachableSince: &observed},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			hc := base.DeepCopy()
			tc.hc(hc)
			if diff := cmp.Diff(tc.want, hostClusterRow("lc", hc)); diff != "" {
				t.Errorf("hostClusterRow() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTTLCache(t *testing.T) {
	now := time.Unix(0, 0)
	calls := 0
	fail := false
	c := &ttlCache[int]{ttl: 10 * time.Second, now: func() time.Time { return now }, fetch: func(context.Context) (int, error) {
		if fail {
			return 0, errors.New("down")
		}
		calls++
		return calls, nil
	}}
	get := func() (int, error) { return c.get(context.Background()) }
	if v, _ := get(); v != 1 {
		t.Fatalf("first get = %d, want 1", v)
	}
	now = now.Add(9 * time.Second)
	if v, _ := get(); v != 1 || calls != 1 {
		t.Fatalf("within the ttl: %d after %d fetches, want the cached 1", v, calls)
	}
	now = now.Add(2 * time.Second)
	if v, _ := get(); v != 2 {
		t.Fatalf("after the ttl: %d, want a fresh 2", v)
	}
	now = now.Add(11 * time.Second)
	fail = true
	if _, err := get(); err == nil {
		t.Fatal("a failed fetch after the ttl: no error, want it (never a stale value passed off as fresh)")
	}
}

func TestLiveNodes(t *testing.T) {
	got := liveNodes([]health.NodeFacts{
		{Name: "a", Ready: true},
		{Name: "b", MemoryPressure: true, NetworkUnavailable: true},
	})
	want := []Node{{Name: "a", Ready: true}, {Name: "b", Conditions: []string{"MemoryPressure", "NetworkUnavailable"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("liveNodes() mismatch (-want +got):\n%s", diff)
	}
	many := make([]health.NodeFacts, maxNodes+3)
	if n := len(liveNodes(many)); n != maxNodes {
		t.Errorf("liveNodes of %d nodes lists %d, want %d", len(many), n, maxNodes)
	}
}
