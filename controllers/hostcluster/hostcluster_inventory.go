package hostcluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/health"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/internal/target"
)

// HealthBandUnknown is status.inventory.healthBand while the target is unreachable: its last
// score says nothing of it now (docs/fleet.md#unreachable).
const HealthBandUnknown = "unknown"

// refreshInventory reads version, nodes, provider and region, CPU and memory use, the health
// score and the cost estimate, at most every InventoryInterval once read (every pass while the
// cluster is not Ready yet is not needed: the first read and the periodic refresh are), and at
// once while the health is unknown (the target answers again after it was unreachable).
func (r *Reconciler) refreshInventory(ctx context.Context, s *scope) error {
	hc := s.hc
	if inv := hc.Status.Inventory; inv != nil && inv.HealthScore != nil && inv.ObservedAt != nil && r.now().Sub(inv.ObservedAt.Time) < r.InventoryInterval*4/5 {
		return nil
	}
	inv, err := health.Read(ctx, s.target.Clientset, r.ReadLimits)
	if err != nil {
		return err
	}
	now := metav1.NewTime(r.now())
	out := &kov1alpha1.HostClusterInventory{
		Provider:          inv.Provider,
		Region:            inv.Region,
		KubernetesVersion: inv.KubernetesVersion,
		NodeCount:         inv.NodeCount,
		ReadyNodeCount:    inv.ReadyNodeCount,
		Nodes:             fmt.Sprintf("%d/%d", inv.ReadyNodeCount, inv.NodeCount),
		HealthScore:       ptr.To(inv.Score.Value),
		HealthBand:        string(inv.Score.Band),
		CPUPercent:        wholePercent(inv.Facts.CPUPercent),
		MemoryPercent:     wholePercent(inv.Facts.MemoryPercent),
		UsageSource:       kov1alpha1.UsageSource(inv.UsageSource),
		ObservedAt:        &now,
		Cost:              costStatus(r.Prices, inv.InstanceTypes),
	}
	for _, p := range inv.Score.Summarize(32) {
		out.HealthPenalties = append(out.HealthPenalties, kov1alpha1.HealthPenalty{
			Reason: p.Reason, Detail: reconcile.Truncate(p.Detail), Points: strconv.FormatFloat(p.Points, 'f', -1, 64),
		})
	}
	hc.Status.Inventory = out
	return nil
}

// costStatus is the cost estimate of nodes counted by instance type with prices; nil when there
// is no price table or no node has a priced type.
func costStatus(prices *health.PriceTable, instanceTypes map[string]int32) *kov1alpha1.HostClusterCost {
	c, ok := prices.Estimate(instanceTypes)
	if !ok {
		return nil
	}
	return &kov1alpha1.HostClusterCost{
		Monthly:               strconv.FormatFloat(c.Monthly, 'f', 2, 64),
		Currency:              c.Currency,
		PricedNodes:           c.PricedNodes,
		UnpricedNodes:         c.UnpricedNodes,
		UnpricedInstanceTypes: c.UnpricedInstanceTypes,
	}
}

// markUnreachable records that the target's API server (server, as the kubeconfig names it)
// did not answer: since when (status.inventory.unreachableSince, kept from the first failure
// until it answers again) and that its health is unknown (no score, band unknown; the other facts
// stay as last read, observedAt says when). It returns the message for the conditions: the
// server, since when and the kind of failure (target.FailureClass), never the error's text,
// which can name the address a name resolved to; the whole error goes to the manager's log.
func (r *Reconciler) markUnreachable(ctx context.Context, hc *kov1alpha1.HostCluster, server string, cause error) string {
	if hc.Status.Inventory == nil {
		hc.Status.Inventory = &kov1alpha1.HostClusterInventory{}
	}
	inv := hc.Status.Inventory
	class := target.FailureClass(cause)
	log := ctrl.LoggerFrom(ctx)
	if inv.UnreachableSince == nil {
		inv.UnreachableSince = ptr.To(metav1.NewTime(r.now()))
		log.Info("The target's API server does not answer", "class", class, "error", cause.Error())
	} else {
		log.V(1).Info("The target's API server still does not answer", "class", class, "error", cause.Error(), "since", inv.UnreachableSince.Time)
	}
	inv.HealthScore, inv.HealthBand, inv.HealthPenalties = nil, HealthBandUnknown, nil
	return fmt.Sprintf("API server %s unreachable since %s (%s)", server, inv.UnreachableSince.UTC().Format(time.RFC3339), class)
}
