package tenant

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces"
)

// CloudSpaceIDAnnotation carries the claimed cloudSpaceID on a claim record.
const CloudSpaceIDAnnotation = "kubeopera.io/cloudspace-id"

// ClaimName is the name of the backend claim record (a ConfigMap in the claims namespace) of a
// cloudSpaceID. IDs may hold upper-case letters, so the name is a hash.
func ClaimName(cloudSpaceID string) string {
	sum := sha256.Sum256([]byte(cloudSpaceID))
	return "cloudspace-" + hex.EncodeToString(sum[:])[:24]
}

// claimCloudSpace makes sure the Tenant's cloudSpaceID belongs to this Tenant of this workspace. A
// cloudSpaceID belongs to the first Tenant that claims it: the claim record is created atomically
// on the backend, so a Tenant of another workspace (or another Tenant of this one) with the same
// ID fails with NameConflict and kubeopera-api is never told about it.
func (r *Reconciler) claimCloudSpace(ctx context.Context, s *scope) error {
	id := s.tenant.Spec.CloudSpaceID
	key := client.ObjectKey{Namespace: r.ClaimsNamespace, Name: ClaimName(id)}
	claim := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace,
			Name:      key.Name,
			Labels:    map[string]string{kov1alpha1.ManagedByLabel: ControllerName, workspaces.FingerprintLabel: workspaces.Fingerprint(s.LogicalCluster)},
			Annotations: map[string]string{
				workspaces.LogicalClusterAnnotation: s.LogicalCluster,
				workspaces.OwnerAnnotation:          s.Owner,
				CloudSpaceIDAnnotation:              id,
			},
		}}
	}
	// A Tenant not admitted yet most likely claims a new cloudSpaceID: create first, and read
	// only when the record exists.
	if !reconcile.IsTrue(s.tenant, kov1alpha1.AdmittedCondition) {
		err := s.Backend.Client.Create(ctx, claim())
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to record the claim of cloudSpaceID %q in %s: %w", id, r.ClaimsNamespace, err)
		}
	}
	for range 2 {
		cur := &corev1.ConfigMap{}
		err := s.Backend.Reader.Get(ctx, key, cur)
		if err == nil {
			if s.Owns(cur) {
				return nil
			}
			if cur.Annotations[workspaces.LogicalClusterAnnotation] == s.LogicalCluster {
				return reconcile.Stalledf(kov1alpha1.NameConflictReason, "cloudSpaceID %q is already used by %s in this workspace", id, cur.Annotations[workspaces.OwnerAnnotation])
			}
			// Never say which workspace: that is another customer's business.
			return reconcile.Stalledf(kov1alpha1.NameConflictReason, "cloudSpaceID %q is already claimed by another workspace", id)
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to read the claim record of cloudSpaceID %q: %w", id, err)
		}
		err = s.Backend.Client.Create(ctx, claim())
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to record the claim of cloudSpaceID %q in %s: %w", id, r.ClaimsNamespace, err)
		}
		// Lost a race: look again who won.
	}
	return fmt.Errorf("claim record of cloudSpaceID %q keeps changing; retrying", id)
}

// releaseCloudSpace deletes the Tenant's claim record, only when it is this Tenant's.
func (r *Reconciler) releaseCloudSpace(ctx context.Context, s *scope) error {
	cur := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: r.ClaimsNamespace, Name: ClaimName(s.tenant.Spec.CloudSpaceID)}
	if err := s.Backend.Reader.Get(ctx, key, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !s.Owns(cur) {
		return nil
	}
	if err := s.Backend.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to release the claim of cloudSpaceID %q: %w", s.tenant.Spec.CloudSpaceID, err)
	}
	return nil
}

// checkLimits applies the platform admin's per-workspace limits before anything is written for a
// new Tenant. Tenants are admitted first come, first served: those already admitted and those
// created earlier (then by namespace/name) count before this one. Tenants being deleted do not
// count.
func (r *Reconciler) checkLimits(ctx context.Context, s *scope) error {
	l := r.Limits
	if l.MaxTenants == 0 && l.MaxCPU.IsZero() && l.MaxMemory.IsZero() {
		return l.Check(s.tenant, nil) // the quota itself is checked all the same
	}
	list := &kov1alpha1.TenantList{}
	if err := s.Workspace.List(ctx, list); err != nil {
		return fmt.Errorf("failed to list the workspace's Tenants: %w", err)
	}
	ahead := AdmittedBefore(s.tenant, list.Items)
	return l.Check(s.tenant, ahead)
}

// AdmittedBefore returns the Tenants of all that count before t against the workspace's limits
// (reconcile.Ahead: first come, first served; admitted ones stay admitted).
func AdmittedBefore(t *kov1alpha1.Tenant, all []kov1alpha1.Tenant) []kov1alpha1.Tenant {
	ahead := reconcile.Ahead(t, reconcile.Pointers(all), kov1alpha1.AdmittedCondition)
	out := make([]kov1alpha1.Tenant, len(ahead))
	for i, o := range ahead {
		out[i] = *o
	}
	return out
}

// Check returns a QuotaExceeded stall when t does not fit after the Tenants ahead of it.
//
// A quota that is not greater than zero is refused (InvalidSpec) whatever the limits: the schema
// refuses it at admission, and a Tenant written before that rule must not offset the sums of the
// others. Such a Tenant ahead of t counts as zero.
func (l Limits) Check(t *kov1alpha1.Tenant, ahead []kov1alpha1.Tenant) error {
	for _, q := range []struct {
		field string
		value resource.Quantity
	}{{"spec.quota.cpu", t.Spec.Quota.CPU}, {"spec.quota.memory", t.Spec.Quota.Memory}} {
		if q.value.Sign() <= 0 {
			return reconcile.Stalledf(kov1alpha1.InvalidSpecReason, "%s must be greater than zero (it is %s)", q.field, q.value.String())
		}
	}
	if err := (reconcile.CountLimit{Max: l.MaxTenants, Kind: "Tenants"}).Check(len(ahead)); err != nil {
		return err
	}
	cpu, mem := t.Spec.Quota.CPU.DeepCopy(), t.Spec.Quota.Memory.DeepCopy()
	for i := range ahead {
		addPositive(&cpu, ahead[i].Spec.Quota.CPU)
		addPositive(&mem, ahead[i].Spec.Quota.Memory)
	}
	if exceeds(cpu, l.MaxCPU) {
		return reconcile.Stalledf(kov1alpha1.QuotaExceededReason,
			"the Tenants of this workspace would have %s CPU in all, over the limit of %s set by the platform admin", cpu.String(), l.MaxCPU.String())
	}
	if exceeds(mem, l.MaxMemory) {
		return reconcile.Stalledf(kov1alpha1.QuotaExceededReason,
			"the Tenants of this workspace would have %s memory in all, over the limit of %s set by the platform admin", mem.String(), l.MaxMemory.String())
	}
	return nil
}

// addPositive adds q to sum when q is greater than zero.
func addPositive(sum *resource.Quantity, q resource.Quantity) {
	if q.Sign() > 0 {
		sum.Add(q)
	}
}

func exceeds(sum, limit resource.Quantity) bool {
	return !limit.IsZero() && sum.Cmp(limit) > 0
}
