package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// One run at a time per cluster (docs/provisioner.md#one-run-at-a-time): every run of a cluster
// (a workspace fingerprint and a clusterID: one Terraform state) holds the cluster's Lease
// provision-lock-<hash> in the jobs namespace, naming the run in spec.holderIdentity. Create
// takes the Lease for its new run, still suspended, before anything runs: with a create when there
// is none, else with an update under the Lease's resourceVersion, and only when the run it names
// has ended (or is gone). Two Creates racing for one cluster, in one provisioner or in two, cannot
// both win: the loser's run is deleted before it ever started and the caller is answered 409,
// naming the active run. The Lease is owned by the Job of the run that holds it, so it goes with
// that run when the sweep deletes it.

// ActiveRunError is Create's refusal while another run of the same cluster has not ended.
type ActiveRunError struct {
	ClusterID string
	// RunID is the active run, Operation what it does.
	RunID     string
	Operation api.Operation
}

func (e *ActiveRunError) Error() string {
	op := ""
	if e.Operation != "" {
		op = " (" + string(e.Operation) + ")"
	}
	return fmt.Sprintf("cluster %s has an active run %s%s: one run at a time per cluster, never two on one Terraform state; ask again once it has ended", e.ClusterID, e.RunID, op)
}

// LockName is the Lease of a cluster's runs: provision-lock- and 16 hex characters of the sha256
// of <workspace fingerprint>/<clusterID>.
func LockName(fp, clusterID string) string {
	sum := sha256.Sum256([]byte(fp + "/" + clusterID))
	return "provision-lock-" + hex.EncodeToString(sum[:8])
}

// lock makes run r (its Job, still suspended) the holder of its cluster's Lease, or returns an
// *ActiveRunError when the current holder's run has not ended.
func (c *Client) lock(ctx context.Context, r run, job *batchv1.Job) error {
	leases := c.cs.CoordinationV1().Leases(c.cfg.Namespace)
	name := LockName(r.req.WorkspaceFingerprint, r.req.ClusterID)
	owner := []metav1.OwnerReference{{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job", Name: job.Name, UID: job.UID}}
	for attempt := 0; attempt < 5; attempt++ {
		meta := r.meta(name)
		meta.OwnerReferences = owner
		_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: meta, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(r.id)}}, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create Lease %s: %w", name, err)
		}
		cur, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // released meanwhile (its Job was swept): create it again
		}
		if err != nil {
			return fmt.Errorf("failed to read Lease %s: %w", name, err)
		}
		holder := ptr.Deref(cur.Spec.HolderIdentity, "")
		active, op, err := c.active(ctx, holder)
		if err != nil {
			return err
		}
		if active {
			return &ActiveRunError{ClusterID: r.req.ClusterID, RunID: holder, Operation: op}
		}
		cur.Spec.HolderIdentity = ptr.To(r.id)
		cur.OwnerReferences = owner
		cur.Labels = r.labels()
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to update Lease %s: %w", name, err)
		}
		// Another Create took it meanwhile: look again at who holds it.
	}
	return fmt.Errorf("lease %s kept changing; try again", name)
}

// held returns an *ActiveRunError when the cluster of req has a run that has not ended, by its
// Lease, before anything is created for a new run: a caller asking again and again while a run
// is active costs two reads. lock decides; this only spares the work.
func (c *Client) held(ctx context.Context, req api.CreateRequest) error {
	cur, err := c.cs.CoordinationV1().Leases(c.cfg.Namespace).Get(ctx, LockName(req.WorkspaceFingerprint, req.ClusterID), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("failed to read the cluster's Lease: %w", err)
	}
	holder := ptr.Deref(cur.Spec.HolderIdentity, "")
	active, op, err := c.active(ctx, holder)
	if err != nil || !active {
		return err
	}
	return &ActiveRunError{ClusterID: req.ClusterID, RunID: holder, Operation: op}
}

// active reports whether run id has not ended, and its operation: its Job exists, is not being
// deleted and has no terminal condition (an abandoned run counts as ended, jobrun.JobOutcome).
func (c *Client) active(ctx context.Context, id string) (bool, api.Operation, error) {
	if !jobrun.ValidID(id) {
		return false, "", nil
	}
	job, err := c.cs.BatchV1().Jobs(c.cfg.Namespace).Get(ctx, api.JobName(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, "", nil
	case err != nil:
		return false, "", fmt.Errorf("failed to read Job %s: %w", api.JobName(id), err)
	case job.Labels[api.LabelRun] != id || job.DeletionTimestamp != nil:
		return false, "", nil
	}
	return jobrun.JobOutcome(job, c.cfg.Now()).End == jobrun.Running, api.Operation(job.Labels[api.LabelOperation]), nil
}
