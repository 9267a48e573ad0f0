package tenant

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

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
			Labels:    map[string]string{kov1alpha1.ManagedByLabel: ControllerName, workspaces.FingerprintLabel: workspaces.Fingerprint(s.logicalCluster)},
			Annotations: map[string]string{
				workspaces.LogicalClusterAnnotation: s.logicalCluster,
				workspaces.OwnerAnnotation:          s.owner,
				CloudSpaceIDAnnotation:              id,
			},
		}}
	}
	// A Tenant not admitted yet most likely claims a new cloudSpaceID: create first, and read
	// only when the record exists.
	if !reconcile.IsTrue(s.tenant, kov1alpha1.AdmittedCondition) {
		err := r.Backend.Client.Create(ctx, claim())
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to record the claim of cloudSpaceID %q in %s: %w", id, r.ClaimsNamespace, err)
		}
	}
	for range 2 {
		cur := &corev1.ConfigMap{}
		err := r.Backend.Reader.Get(ctx, key, cur)
		if err == nil {
			if workspaces.OwnedBy(cur, s.logicalCluster, s.owner) {
				return nil
			}
			if cur.Annotations[workspaces.LogicalClusterAnnotation] == s.logicalCluster {
				return reconcile.Stalledf(kov1alpha1.NameConflictReason, "cloudSpaceID %q is already used by %s in this workspace", id, cur.Annotations[workspaces.OwnerAnnotation])
			}
			// Never say which workspace: that is another customer's business.
			return reconcile.Stalledf(kov1alpha1.NameConflictReason, "cloudSpaceID %q is already claimed by another workspace", id)
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to read the claim record of cloudSpaceID %q: %w", id, err)
		}
		err = r.Backend.Client.Create(ctx, claim())
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
	if err := r.Backend.Reader.Get(ctx, key, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !workspaces.OwnedBy(cur, s.logicalCluster, s.owner) {
		return nil
	}
	if err := r.Backend.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); client.IgnoreNotFound(err) != nil {
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
		return nil
	}
	list := &kov1alpha1.TenantList{}
	if err := s.ws.List(ctx, list); err != nil {
		return fmt.Errorf("failed to list the workspace's Tenants: %w", err)
	}
	ahead := AdmittedBefore(s.tenant, list.Items)
	return l.Check(s.tenant, ahead)
}

// AdmittedBefore returns the Tenants of all that count before t against the workspace's limits:
// not being deleted, not refused for the limits themselves, and either admitted already or created
// before t (ties broken by namespace/name).
func AdmittedBefore(t *kov1alpha1.Tenant, all []kov1alpha1.Tenant) []kov1alpha1.Tenant {
	var out []kov1alpha1.Tenant
	for i := range all {
		o := &all[i]
		if o.UID == t.UID || (o.Namespace == t.Namespace && o.Name == t.Name) || o.DeletionTimestamp != nil {
			continue
		}
		// A Tenant refused for the limits holds nothing and does not count against later ones.
		if c := reconcile.GetCondition(o, kov1alpha1.AdmittedCondition); c != nil && c.Reason == kov1alpha1.QuotaExceededReason {
			continue
		}
		if reconcile.IsTrue(o, kov1alpha1.AdmittedCondition) || earlier(o, t) {
			out = append(out, *o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return earlier(&out[i], &out[j]) })
	return out
}

func earlier(a, b *kov1alpha1.Tenant) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// Check returns a QuotaExceeded stall when t does not fit after the Tenants ahead of it.
func (l Limits) Check(t *kov1alpha1.Tenant, ahead []kov1alpha1.Tenant) error {
	if l.MaxTenants > 0 && len(ahead)+1 > l.MaxTenants {
		return reconcile.Stalledf(kov1alpha1.QuotaExceededReason,
			"this workspace may have at most %d Tenants (a limit set by the platform admin) and %d are ahead of this one; delete one, then retry", l.MaxTenants, len(ahead))
	}
	cpu, mem := t.Spec.Quota.CPU.DeepCopy(), t.Spec.Quota.Memory.DeepCopy()
	for i := range ahead {
		cpu.Add(ahead[i].Spec.Quota.CPU)
		mem.Add(ahead[i].Spec.Quota.Memory)
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

func exceeds(sum, limit resource.Quantity) bool {
	return !limit.IsZero() && sum.Cmp(limit) > 0
}
