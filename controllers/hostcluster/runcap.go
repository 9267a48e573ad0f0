package hostcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// The cap on provisioning runs a workspace starts per hour (Reconciler.MaxRunsPerHour) is kept
// in a ledger of its own: ConfigMap runLedgerName in the workspace's backend namespace kcp-<fp>,
// which the tenant cannot reach and which outlives every HostCluster (only the workspace's
// deletion removes kcp-<fp>), so deleting and re-creating HostClusters does not reset the count.
// The provisioner's own run records are not counted instead: they live in its namespace, which
// the manager may not read, and finished runs are swept after the provisioner's retention.
//
// A run is reserved in the ledger right before its POST, with an update guarded by the
// ConfigMap's resourceVersion, so HostClusters of one workspace reconciled at once cannot start
// more runs than the cap between them. The reservation's key names the HostCluster (UID), the
// operation and the last run in its status: a POST that failed and is tried again reuses its
// reservation instead of counting twice, while every run that was started gets a new key.
const (
	// runLedgerName is the ledger ConfigMap in kcp-<fp>.
	runLedgerName = "kubeopera-provisioning-runs"
	// runLedgerKey is its data key: a JSON list of ledgerEntry, oldest first.
	runLedgerKey = "runs"
	// runWindow is the cap's window.
	runWindow = time.Hour
	// maxRunsFlag is the manager flag that sets the cap, named in the tenant's message.
	maxRunsFlag = "--max-provisioning-runs-per-workspace-per-hour"
)

// ledgerEntry is one run reserved.
type ledgerEntry struct {
	// At is when it was reserved.
	At time.Time `json:"at"`
	// Key is reservationKey's.
	Key string `json:"key"`
}

// reservationKey names the run a HostCluster is about to start for op.
func reservationKey(s *scope, op api.Operation) string {
	last := "none"
	if runs := s.hc.Status.ProvisionRuns; len(runs) > 0 {
		last = runs[len(runs)-1].ID
	}
	return string(s.hc.UID) + "/" + string(op) + "/after-" + last
}

// checkRunQuota fails the HostCluster with QuotaExceeded when its workspace started
// MaxRunsPerHour runs in the last hour (a reservation of this very run does not count against
// it). It writes nothing.
func (r *Reconciler) checkRunQuota(ctx context.Context, s *scope, op api.Operation) error {
	if r.MaxRunsPerHour <= 0 {
		return nil
	}
	_, entries, err := r.readLedger(ctx, s)
	if err != nil {
		return err
	}
	return r.underCap(entries, reservationKey(s, op))
}

// recent are the entries of the hour before now (and any a clock ahead of this one wrote), oldest
// first.
func recent(entries []ledgerEntry, now time.Time) []ledgerEntry {
	since := now.Add(-runWindow)
	var out []ledgerEntry
	for _, e := range entries {
		if e.At.After(since) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// fits reports whether the run of key fits limit runs in the window: the window's entries
// (recent) other than key's are fewer than limit. It returns how many there are and, when the run
// does not fit, when it will: the window's oldest entry that must drop out first, plus an hour.
func fits(window []ledgerEntry, key string, limit int) (count int, next time.Time, ok bool) {
	var counted []ledgerEntry
	for _, e := range window {
		if e.Key != key {
			counted = append(counted, e)
		}
	}
	if len(counted) < limit {
		return len(counted), time.Time{}, true
	}
	return len(counted), counted[len(counted)-limit].At.Add(runWindow), false
}

// reserveRun records the run the HostCluster is about to start in its workspace's ledger, or
// fails it with QuotaExceeded when the cap is reached. A conflicting update (another pass of the
// same workspace reserved meanwhile) is a transient error: the pass is retried and counts again.
func (r *Reconciler) reserveRun(ctx context.Context, s *scope, op api.Operation) error {
	if r.MaxRunsPerHour <= 0 {
		return nil
	}
	cm, entries, err := r.readLedger(ctx, s)
	if err != nil {
		return err
	}
	key := reservationKey(s, op)
	for _, e := range entries {
		if e.Key == key {
			return nil
		}
	}
	if err := r.underCap(entries, key); err != nil {
		return err
	}
	raw, err := json.Marshal(append(entries, ledgerEntry{At: r.now().UTC(), Key: key}))
	if err != nil {
		return fmt.Errorf("failed to encode the provisioning run ledger: %w", err)
	}
	if cm == nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: runLedgerName,
			Labels: map[string]string{kov1alpha1.ManagedByLabel: ControllerName}}}
		cm.Data = map[string]string{runLedgerKey: string(raw)}
		err = r.Backend.Client.Create(ctx, cm)
	} else {
		cm.Data = map[string]string{runLedgerKey: string(raw)}
		// Update carries the resourceVersion read above: optimistic concurrency.
		err = r.Backend.Client.Update(ctx, cm)
	}
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return fmt.Errorf("the provisioning run ledger %s/%s changed meanwhile; counting again: %w", s.Namespace, runLedgerName, err)
	case err != nil:
		return fmt.Errorf("failed to record the provisioning run in ledger %s/%s: %w", s.Namespace, runLedgerName, err)
	}
	return nil
}

// underCap is nil when the run of key fits the cap (fits), else the QuotaExceeded outcome naming
// the limit and when the next run fits. window are the ledger's entries of the last hour.
func (r *Reconciler) underCap(window []ledgerEntry, key string) error {
	count, next, ok := fits(window, key, r.MaxRunsPerHour)
	if ok {
		return nil
	}
	return reconcile.Stalledf(kov1alpha1.QuotaExceededReason,
		"this workspace started %d provisioning runs in the last hour, the limit the platform admin set (%s=%d); nothing was started or copied. Set %s to a new value after %s to try again",
		count, maxRunsFlag, r.MaxRunsPerHour, kov1alpha1.RetryAnnotation, next.UTC().Format(time.RFC3339))
}

// readLedger reads the workspace's ledger (nil when there is none yet) and its entries of the
// last hour, oldest first (recent; older ones are dropped when the ledger is next written). A
// ledger that does not parse is an error: the cap is never lifted by a broken record.
func (r *Reconciler) readLedger(ctx context.Context, s *scope) (*corev1.ConfigMap, []ledgerEntry, error) {
	cm := &corev1.ConfigMap{}
	err := r.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: runLedgerName}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("failed to read the provisioning run ledger %s/%s: %w", s.Namespace, runLedgerName, err)
	}
	var all []ledgerEntry
	if raw := cm.Data[runLedgerKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &all); err != nil {
			return nil, nil, fmt.Errorf("the provisioning run ledger %s/%s does not parse: %w", s.Namespace, runLedgerName, err)
		}
	}
	return cm, recent(all, r.now()), nil
}
