package crossplane

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kubeopera/kubeopera/syncer"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	"github.com/kubeopera/kubeopera/workspaces"
)

// Objects writes and deletes the backend objects Crossplane acts on for one owner: a workspace
// object (e.g. "KubernetesCluster default/a") of one logical cluster. An object of that name that
// is not the owner's is never written or deleted.
type Objects struct {
	// Client reads and writes the backend.
	Client client.Client
	// LogicalCluster and Owner are whose the objects are (syncer.OwnedBy).
	LogicalCluster, Owner string
}

// NotOwnedError says an object of the name the owner would write exists and is another's.
type NotOwnedError struct {
	Kind, Namespace, Name, Owner string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("%s %s/%s on the backend belongs to %s", e.Kind, e.Namespace, e.Name, e.Owner)
}

// StalledReason makes the object stall with NameConflict: retrying cannot help.
func (e *NotOwnedError) StalledReason() string { return commonv1alpha1.NameConflictReason }

// InvalidError says the backend refuses an object as written (its kind's schema: a provider's CRD
// or a composite's XRD rules): the spec it was made from must change.
type InvalidError struct {
	Kind, Name string
	// Causes is what the backend says is wrong, field by field.
	Causes string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("the backend refuses %s %s: %s", e.Kind, e.Name, e.Causes)
}

// StalledReason makes the object stall with InvalidSpec: retrying cannot help.
func (e *InvalidError) StalledReason() string { return commonv1alpha1.InvalidSpecReason }

// Apply writes u for the owner (annotated with its workspace and itself) and returns it as stored.
// An object already holding everything u sets is not written again (each pass stays cheap, and
// Crossplane's own writes to the object do not race ours).
func (o Objects) Apply(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(u.GroupVersionKind())
	err := o.Client.Get(ctx, client.ObjectKeyFromObject(u), cur)
	switch {
	case err == nil && !syncer.OwnedBy(cur, o.LogicalCluster, o.Owner):
		return nil, &NotOwnedError{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Owner: cur.GetAnnotations()[syncer.OwnerAnnotation]}
	case err != nil && !apierrors.IsNotFound(err):
		return nil, err
	case err == nil && Contains(cur.Object["spec"], u.Object["spec"]) && Contains(cur.GetLabels(), u.GetLabels()):
		return cur, nil
	}
	u.SetAnnotations(map[string]string{workspaces.LogicalClusterAnnotation: o.LogicalCluster, syncer.OwnerAnnotation: o.Owner})
	if err := Apply(ctx, o.Client, u); err != nil {
		if apierrors.IsInvalid(err) {
			return nil, &InvalidError{Kind: u.GetKind(), Name: u.GetName(), Causes: invalidCauses(err)}
		}
		return nil, fmt.Errorf("failed to write %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return u, nil
}

// Delete deletes the owner's object of kind gvk at key (with opts) and reports whether it is gone:
// true when there is none, it is not the owner's, or its kind is not served (Crossplane's CRDs
// absent: nothing of it can exist). While it is not gone, cur is the object as read before the
// delete.
func (o Objects) Delete(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey, opts ...client.DeleteOption) (gone bool, cur *unstructured.Unstructured, err error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err = o.Client.Get(ctx, key, u)
	switch {
	case apierrors.IsNotFound(err) || NotServed(err):
		return true, nil, nil
	case err != nil:
		return false, nil, err
	case !syncer.OwnedBy(u, o.LogicalCluster, o.Owner):
		return true, nil, nil
	}
	if u.GetDeletionTimestamp() == nil {
		if err := o.Client.Delete(ctx, u.DeepCopy(), opts...); client.IgnoreNotFound(err) != nil {
			return false, nil, err
		}
	}
	return false, u, nil
}

// NotServed reports an error saying the kind is not served on the backend (its CRD absent).
func NotServed(err error) bool {
	return err != nil && (meta.IsNoMatchError(err) || strings.Contains(err.Error(), "no matches for kind"))
}

// invalidCauses is what a 422 from the backend says is wrong, field by field.
func invalidCauses(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return err.Error()
	}
	var causes []string
	for _, c := range status.Status().Details.Causes {
		causes = append(causes, strings.TrimSpace(c.Field+": "+c.Message))
	}
	return strings.Join(causes, "; ")
}

// Contains reports whether have holds everything of want (maps: every key of want, recursively;
// lists: the same length, element by element; values: equal as printed, so an int64 written and a
// number read back compare equal). Fields others added (resolved references, defaults) are
// ignored.
func Contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]string:
		h, _ := have.(map[string]string)
		for k, v := range w {
			if h[k] != v {
				return false
			}
		}
		return true
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !Contains(h[k], v) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !Contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		return fmt.Sprint(have) == fmt.Sprint(want)
	}
}

// Observe reads a Crossplane resource's Synced and Ready conditions (crossplane-runtime's) and
// says whether it is ready, and if not, with which reason and what it shows.
func Observe(u *unstructured.Unstructured, creating string) (ready bool, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	get := func(typ string) (status, reason, msg string) {
		for _, c := range conds {
			m, ok := c.(map[string]any)
			if ok && m["type"] == typ {
				status, _ = m["status"].(string)
				reason, _ = m["reason"].(string)
				msg, _ = m["message"].(string)
			}
		}
		return
	}
	ss, sr, sm := get("Synced")
	rs, rr, rm := get("Ready")
	what := fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
	switch {
	case ss == "False":
		return false, orDefault(sr, "NotSynced"), fmt.Sprintf("%s is not Synced (%s): %s", what, sr, sm)
	case rs == "True" && ss == "True":
		return true, "", ""
	case rs == "":
		return false, creating, what + " has no Ready condition yet"
	default:
		return false, orDefault(rr, creating), strings.TrimSuffix(fmt.Sprintf("%s is not Ready (%s): %s", what, rr, rm), ": ")
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
