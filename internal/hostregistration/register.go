package hostregistration

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/kubeopera/kubeopera/apis/fleet/v1alpha1"
)

// HostConflictError is Register's error when RegisteredCluster "host" records another cluster.
type HostConflictError struct {
	// Registered is the clusterUID of RegisteredCluster "host", Inspected the one Register was given.
	Registered, Inspected string
}

func (e *HostConflictError) Error() string {
	return fmt.Sprintf("RegisteredCluster %s already records another cluster as the host (clusterUID %s); "+
		"this cluster's kube-system UID is %s. Nothing was changed. To move the host to this cluster, "+
		"delete the old record first (kubectl delete registeredcluster %s in the platform workspace) and register again",
		fleetv1alpha1.HostName, e.Registered, e.Inspected, fleetv1alpha1.HostName)
}

// Register records the cluster facts describe as the host: RegisteredCluster "host" (isHost true,
// source self_registered) in the platform workspace c talks to.
//
//   - No "host" yet: it creates it, with status from facts and registeredAt now; created is true.
//   - "host" with the same clusterUID: it refreshes the status facts (observedAt now; registeredAt
//     and the object's creation unchanged) and returns it; created is false. A "host" whose
//     spec.isHost was turned off is made the host again.
//   - "host" with another clusterUID: a *HostConflictError naming both UIDs; nothing changes.
//
// A create that loses a race (AlreadyExists) reads the winner and applies the same rules. Nothing
// else is created, anywhere.
func Register(ctx context.Context, c client.Client, facts Facts, now time.Time) (rc *fleetv1alpha1.RegisteredCluster, created bool, err error) {
	if facts.ClusterUID == "" {
		return nil, false, fmt.Errorf("the inspected cluster has no UID (kube-system namespace UID)")
	}
	key := client.ObjectKey{Name: fleetv1alpha1.HostName}
	rc = &fleetv1alpha1.RegisteredCluster{}
	err = c.Get(ctx, key, rc)
	switch {
	case apierrors.IsNotFound(err):
		rc = &fleetv1alpha1.RegisteredCluster{
			ObjectMeta: metav1.ObjectMeta{Name: fleetv1alpha1.HostName},
			Spec: fleetv1alpha1.RegisteredClusterSpec{
				ClusterUID: facts.ClusterUID,
				Source:     fleetv1alpha1.SourceSelfRegistered,
				IsHost:     true,
			},
		}
		err = c.Create(ctx, rc)
		if err == nil {
			created = true
			break
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, false, fmt.Errorf("failed to create RegisteredCluster %s: %w", fleetv1alpha1.HostName, err)
		}
		// Another registration won the race: treat its object as found.
		rc = &fleetv1alpha1.RegisteredCluster{}
		if err := c.Get(ctx, key, rc); err != nil {
			return nil, false, fmt.Errorf("failed to read RegisteredCluster %s: %w", fleetv1alpha1.HostName, err)
		}
	case err != nil:
		return nil, false, fmt.Errorf("failed to read RegisteredCluster %s: %w", fleetv1alpha1.HostName, err)
	}

	if rc.Spec.ClusterUID != facts.ClusterUID {
		return nil, false, &HostConflictError{Registered: rc.Spec.ClusterUID, Inspected: facts.ClusterUID}
	}
	if !rc.Spec.IsHost {
		before := rc.DeepCopy()
		rc.Spec.IsHost = true
		if err := c.Patch(ctx, rc, client.MergeFrom(before)); err != nil {
			return nil, false, fmt.Errorf("failed to make RegisteredCluster %s the host again: %w", fleetv1alpha1.HostName, err)
		}
	}
	if err := patchStatus(ctx, c, rc, facts, now, created); err != nil {
		return nil, false, err
	}
	return rc, created, nil
}

// patchStatus writes facts into rc's status with one merge patch. registeredAt is set once: now
// when created, else the object's creation time should an earlier registration have stopped
// before its status was written.
func patchStatus(ctx context.Context, c client.Client, rc *fleetv1alpha1.RegisteredCluster, facts Facts, now time.Time, created bool) error {
	before := rc.DeepCopy()
	t := metav1.NewTime(now)
	st := &rc.Status
	if st.RegisteredAt == nil {
		registeredAt := rc.CreationTimestamp
		if created {
			registeredAt = t
		}
		st.RegisteredAt = &registeredAt
	}
	st.ObservedAt = &t
	st.Provider, st.Region = facts.Provider, facts.Region
	st.KubernetesVersion = facts.KubernetesVersion
	st.NodeCount, st.ReadyNodeCount = facts.NodeCount, facts.ReadyNodeCount
	st.NodeSummary = facts.NodeSummary()
	st.Nodes = facts.Nodes
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               fleetv1alpha1.ReadyCondition,
		Status:             metav1.ConditionTrue,
		Reason:             fleetv1alpha1.InspectedReason,
		Message:            fmt.Sprintf("Facts read from the cluster at %s", t.UTC().Format(time.RFC3339)),
		ObservedGeneration: rc.Generation,
		LastTransitionTime: t,
	})
	if err := c.Status().Patch(ctx, rc, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to write the status of RegisteredCluster %s: %w", fleetv1alpha1.HostName, err)
	}
	return nil
}
