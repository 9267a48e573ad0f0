package provisioning

import (
	"context"
	"time"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/ledger"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// The cap on provisioning runs a workspace starts per hour (Runs.MaxPerHour) is kept in a ledger
// of its own: ConfigMap LedgerName in the workspace's backend namespace kcp-<fp>, which the
// tenant cannot reach and which outlives every HostCluster (only the workspace's deletion
// removes kcp-<fp>), so deleting and re-creating HostClusters does not reset the count. The
// provisioner's own run records are not counted instead: they live in its namespace, which the
// manager may not read, and finished runs are swept after the provisioner's retention.
//
// A run is reserved in the ledger right before its POST, with an update guarded by the
// ConfigMap's resourceVersion, so HostClusters of one workspace reconciled at once cannot start
// more runs than the cap between them. The reservation's key names the HostCluster (UID), the
// operation and the last run in its status: a POST that failed and is tried again reuses its
// reservation instead of counting twice, while every run that was started gets a new key.
const (
	// LedgerName is the ledger ConfigMap in kcp-<fp>.
	LedgerName = "kubeopera-provisioning-runs"
	// ledgerKey is its data key (internal/ledger: a JSON list of entries, oldest first).
	ledgerKey = "runs"
	// MaxRunsFlag is the manager flag that sets the cap, named in the tenant's message.
	MaxRunsFlag = "--max-provisioning-runs-per-workspace-per-hour"
)

// ledger is the workspace's ledger of provisioning runs.
func (r *Runs) ledger(c Cluster) ledger.Ledger {
	return ledger.Ledger{Reader: c.Backend.Reader, Client: c.Backend.Client, Namespace: c.Namespace, Name: LedgerName, Key: ledgerKey,
		Labels: map[string]string{kov1alpha1.ManagedByLabel: r.ManagedBy}, Window: time.Hour, Now: r.now}
}

// reservationKey names the run a HostCluster is about to start for op.
func reservationKey(hc *kov1alpha1.HostCluster, op api.Operation) string {
	last := "none"
	if runs := hc.Status.ProvisionRuns; len(runs) > 0 {
		last = runs[len(runs)-1].ID
	}
	return string(hc.UID) + "/" + string(op) + "/after-" + last
}

// checkQuota stalls the HostCluster with QuotaExceeded when its workspace started MaxPerHour
// runs in the last hour (a reservation of this very run does not count against it). It writes
// nothing.
func (r *Runs) checkQuota(ctx context.Context, c Cluster, op api.Operation) error {
	if r.MaxPerHour <= 0 {
		return nil
	}
	v, err := r.ledger(c).Check(ctx, reservationKey(c.HostCluster, op), r.MaxPerHour)
	if err != nil {
		return err
	}
	return r.underCap(v)
}

// reserve records the run the HostCluster is about to start in its workspace's ledger, or stalls
// it with QuotaExceeded when the cap is reached. A conflicting update (another pass of the same
// workspace reserved meanwhile) is a transient error: the pass is retried and counts again.
func (r *Runs) reserve(ctx context.Context, c Cluster, op api.Operation) error {
	if r.MaxPerHour <= 0 {
		return nil
	}
	v, err := r.ledger(c).Reserve(ctx, reservationKey(c.HostCluster, op), r.MaxPerHour)
	if err != nil {
		return err
	}
	return r.underCap(v)
}

// underCap is nil when the run fits the cap, else the QuotaExceeded outcome naming the limit and
// when the next run fits.
func (r *Runs) underCap(v ledger.Verdict) error {
	if v.Fits {
		return nil
	}
	return reconcile.Stalledf(kov1alpha1.QuotaExceededReason,
		"this workspace started %d provisioning runs in the last hour, the limit the platform admin set (%s=%d); nothing was started or copied. Set %s to a new value after %s to try again",
		v.Count, MaxRunsFlag, r.MaxPerHour, kov1alpha1.RetryAnnotation, v.Next.UTC().Format(time.RFC3339))
}
