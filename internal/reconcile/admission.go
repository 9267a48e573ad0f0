package reconcile

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// Ahead returns the objects of all that count before obj against a per-workspace limit the
// platform admin set, oldest first. Objects are admitted first come, first served, and what is
// admitted stays admitted: an object counts before obj when it is not obj, is not being deleted,
// was not itself refused for the limits (its admitted condition False with reason QuotaExceeded:
// it holds nothing), and either is admitted already or was created before obj (ties broken by
// namespace/name). admitted is the kind's admission condition.
func Ahead[T Object](obj Object, all []T, admitted string) []T {
	var out []T
	for _, o := range all {
		if o.GetUID() == obj.GetUID() || (o.GetNamespace() == obj.GetNamespace() && o.GetName() == obj.GetName()) || o.GetDeletionTimestamp() != nil {
			continue
		}
		if c := GetCondition(o, admitted); c != nil && c.Status != metav1.ConditionTrue && c.Reason == commonv1alpha1.QuotaExceededReason {
			continue
		}
		if IsTrue(o, admitted) || createdBefore(o, obj) {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return createdBefore(out[i], out[j]) })
	return out
}

// Pointers returns pointers to the elements of items (a list's Items), for Ahead.
func Pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// createdBefore orders objects by creation, then namespace, then name.
func createdBefore(a, b Object) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

// CountLimit is a per-workspace cap on how many objects of one kind a workspace may have, set by
// the platform admin; 0 means no limit.
type CountLimit struct {
	// Max is the cap; 0: no limit.
	Max int
	// Kind names the objects counted in messages, plural ("HostClusters").
	Kind string
}

// Check returns a QuotaExceeded stall when one more object does not fit after the ahead objects
// already counted.
func (l CountLimit) Check(ahead int) error {
	if l.Max <= 0 || ahead+1 <= l.Max {
		return nil
	}
	return Stalled(commonv1alpha1.QuotaExceededReason, fmt.Sprintf(
		"this workspace may have at most %d %s (a limit set by the platform admin) and %d are ahead of this one; nothing was created for it: delete one, then retry",
		l.Max, l.Kind, ahead))
}
