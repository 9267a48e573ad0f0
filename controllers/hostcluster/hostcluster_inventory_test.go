package hostcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/health"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// TestUnreachableReadyCluster: a Ready HostCluster whose target stops answering waits (never
// fails), shows Unreachable with since when and the kind of failure, and its health becomes
// unknown; its phase stays Ready (the Ready condition says what is wrong).
func TestUnreachableReadyCluster(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	earlier := now.Add(-7 * time.Minute)
	read := func() *kov1alpha1.HostClusterInventory {
		return &kov1alpha1.HostClusterInventory{
			KubernetesVersion: "v1.34.2", NodeCount: 3, ReadyNodeCount: 3, Nodes: "3/3", CPUPercent: ptr.To[int32](40),
			HealthScore: ptr.To[int32](92), HealthBand: "green", ObservedAt: &metav1.Time{Time: earlier},
			HealthPenalties: []kov1alpha1.HealthPenalty{{Reason: "PodsFailed", Detail: "4 pods failed", Points: "8"}},
		}
	}
	// The errors client-go returns, wrapping the address the name resolved to.
	refused := fmt.Errorf(`Get "https://api.edge.example:6443/version": %w`, &net.OpError{Op: "dial", Net: "tcp",
		Addr: &net.TCPAddr{IP: net.IPv4(10, 96, 0, 1), Port: 6443}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	timeout := fmt.Errorf(`Get "https://api.edge.example:6443/version": %w`, context.DeadlineExceeded)
	for name, tc := range map[string]struct {
		inv       *kov1alpha1.HostClusterInventory
		cause     error
		wantSince time.Time
		wantClass string
	}{
		"first failure, refused":   {inv: read(), cause: refused, wantSince: now, wantClass: "connection refused"},
		"first failure, timed out": {inv: read(), cause: timeout, wantSince: now, wantClass: "timed out"},
		"still unreachable: since the first failure": {inv: func() *kov1alpha1.HostClusterInventory {
			i := read()
			i.UnreachableSince = &metav1.Time{Time: earlier}
			return i
		}(), cause: refused, wantSince: earlier, wantClass: "connection refused"},
		"never read": {cause: refused, wantSince: now, wantClass: "connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{PollInterval: 10 * time.Second, AccessGiveUp: time.Minute, now: func() time.Time { return now }}
			hc := &kov1alpha1.HostCluster{Status: kov1alpha1.HostClusterStatus{Phase: kov1alpha1.HostClusterPhaseReady, Inventory: tc.inv}}
			err := r.unreachable(t.Context(), &scope{hc: hc}, "https://api.edge.example:6443", tc.cause)
			w, ok := reconcile.AsWaiting(err)
			if !ok {
				t.Fatalf("unreachable() = %v, want Waiting (a Ready cluster never fails for it)", err)
			}
			want := fmt.Sprintf("API server https://api.edge.example:6443 unreachable since %s (%s)", tc.wantSince.Format(time.RFC3339), tc.wantClass)
			if w.Reason != kov1alpha1.UnreachableReason || w.Message != want || w.After != r.PollInterval {
				t.Errorf("Waiting(%q, %q, %s), want (%q, %q, %s)", w.Reason, w.Message, w.After, kov1alpha1.UnreachableReason, want, r.PollInterval)
			}
			if strings.Contains(w.Message, "10.96.0.1") {
				t.Errorf("the message names the address behind the server: %q", w.Message)
			}
			inv := hc.Status.Inventory
			if inv == nil || inv.UnreachableSince == nil || !inv.UnreachableSince.Time.Equal(tc.wantSince) {
				t.Fatalf("unreachableSince = %v, want %s", inv, tc.wantSince)
			}
			if inv.HealthScore != nil || inv.HealthBand != HealthBandUnknown || inv.HealthPenalties != nil {
				t.Errorf("health while unreachable: score %v band %q penalties %v; want none, unknown, none", inv.HealthScore, inv.HealthBand, inv.HealthPenalties)
			}
			if tc.inv != nil && (inv.NodeCount != 3 || inv.ObservedAt == nil || !inv.ObservedAt.Time.Equal(earlier)) {
				t.Errorf("the facts as last read are gone: %+v", inv)
			}
			if got := phase(hc, kov1alpha1.AccessValidatedCondition); got != string(kov1alpha1.HostClusterPhaseReady) {
				t.Errorf("phase = %s, want Ready kept", got)
			}
		})
	}
}

// TestCostStatus: the estimate as status shows it; none without a price table or a priced node.
func TestCostStatus(t *testing.T) {
	prices := &health.PriceTable{Currency: "EUR", Hourly: map[string]float64{"s3.large.2": 0.0832}}
	for name, tc := range map[string]struct {
		prices *health.PriceTable
		types  map[string]int32
		want   *kov1alpha1.HostClusterCost
	}{
		"priced": {prices, map[string]int32{"s3.large.2": 2},
			&kov1alpha1.HostClusterCost{Monthly: "121.47", Currency: "EUR", PricedNodes: 2}},
		"partial": {prices, map[string]int32{"s3.large.2": 1, "s3.xlarge.4": 2, "": 1},
			&kov1alpha1.HostClusterCost{Monthly: "60.74", Currency: "EUR", PricedNodes: 1, UnpricedNodes: 3, UnpricedInstanceTypes: []string{"s3.xlarge.4"}}},
		"whole euros keep their cents": {&health.PriceTable{Currency: "EUR", Hourly: map[string]float64{"x": 1}}, map[string]int32{"x": 1},
			&kov1alpha1.HostClusterCost{Monthly: "730.00", Currency: "EUR", PricedNodes: 1}},
		"no priced node": {prices, map[string]int32{"": 3}, nil},
		"no price table": {nil, map[string]int32{"s3.large.2": 2}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, costStatus(tc.prices, tc.types)); diff != "" {
				t.Errorf("costStatus() (-want +got):\n%s", diff)
			}
		})
	}
}
