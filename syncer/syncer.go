// Package syncer moves objects between a tenant's workspace and the backend cluster.
//
// In: Secrets a CR references are read from the tenant's workspace (through the export's
// permission claim on secrets), only from the CR's own namespace, and copied into the workspace's
// backend namespace. Out: results (kubeconfigs, passwords) are delivered into the CR's namespace,
// owner-referenced to the CR so they go with it. Secret data is never logged or put into errors.
//
// The exports' secrets claim is scoped to Secrets labelled AccessLabel=AccessLabelValue: through
// the virtual workspace the manager neither sees nor touches any other Secret of a tenant (kcp
// answers NotFound). Delivered Secrets carry the label; a Secret a tenant references must carry it.
package syncer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// AccessLabel marks a workspace Secret the platform may reach: the exports' secrets claim
	// selects AccessLabel=AccessLabelValue, delivered Secrets carry it, and a Secret a tenant
	// references for credentials must carry it.
	AccessLabel = "kubeopera.io/platform-access"
	// AccessLabelValue is AccessLabel's only value.
	AccessLabelValue = "true"

	// SourceNamespaceAnnotation and SourceNameAnnotation record where a copied-in Secret came from.
	SourceNamespaceAnnotation = "kubeopera.io/source-namespace"
	SourceNameAnnotation      = "kubeopera.io/source-name"
	// SourceClusterAnnotation records the logical cluster a copied-in Secret came from.
	SourceClusterAnnotation = "kubeopera.io/source-cluster"
)

// MissingSecretError says a referenced Secret or key cannot be read in the CR's namespace. Through
// the export's virtual workspace a Secret without AccessLabel is indistinguishable from a missing
// one (kcp answers NotFound), so the message names both causes and the fix.
type MissingSecretError struct {
	Namespace, Name, Key string
}

func (e *MissingSecretError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("secret %s/%s has no key %q", e.Namespace, e.Name, e.Key)
	}
	return fmt.Sprintf("secret %s/%s not found or not labelled %s=%s; add the label so the platform may read it", e.Namespace, e.Name, AccessLabel, AccessLabelValue)
}

// UnsharedSecretError says a referenced Secret exists but does not carry AccessLabel, so the
// platform must not use it. The manager sees such a Secret only where the binding's secrets claim
// is not scoped to the label (a binding accepted with matchAll); the rule is the same everywhere.
type UnsharedSecretError struct {
	Namespace, Name string
}

func (e *UnsharedSecretError) Error() string {
	return fmt.Sprintf("secret %s/%s is not labelled %s=%s; add the label so the platform may read it", e.Namespace, e.Name, AccessLabel, AccessLabelValue)
}

// IsMissing reports whether err says a referenced Secret cannot be used as it is: missing, hidden
// from the platform, unlabelled or without the key (MissingSecretError, UnsharedSecretError).
// The tenant may still fix that, so it is waited for, not failed.
func IsMissing(err error) bool {
	var missing *MissingSecretError
	var unshared *UnsharedSecretError
	return errors.As(err, &missing) || errors.As(err, &unshared)
}

// Shared reports whether s carries AccessLabel=AccessLabelValue.
func Shared(s *corev1.Secret) bool { return s.Labels[AccessLabel] == AccessLabelValue }

// ReadReferencedSecret reads Secret name from owner's own namespace in the workspace. There is no
// way to name another namespace: a CR can only ever reference Secrets next to it. Only a Secret
// labelled AccessLabel=AccessLabelValue is returned: a missing or hidden one is a
// MissingSecretError, a visible unlabelled one an UnsharedSecretError.
func ReadReferencedSecret(ctx context.Context, ws client.Reader, owner client.Object, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := ws.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &MissingSecretError{Namespace: owner.GetNamespace(), Name: name}
		}
		return nil, fmt.Errorf("failed to read secret %s/%s: %w", owner.GetNamespace(), name, err)
	}
	if !Shared(s) {
		return nil, &UnsharedSecretError{Namespace: s.Namespace, Name: s.Name}
	}
	return s, nil
}

// CopyIn copies Secret secretName from owner's namespace in the workspace into backendNamespace as
// backendName, recording its origin in annotations. keys limits the copied keys (all when empty); a
// missing key is a MissingSecretError. The source must be shared (see ReadReferencedSecret).
func CopyIn(ctx context.Context, ws client.Reader, backend client.Client, logicalCluster string, owner client.Object, secretName, backendNamespace, backendName string, keys ...string) error {
	src, err := ReadReferencedSecret(ctx, ws, owner, secretName)
	if err != nil {
		return err
	}
	data := src.Data
	if len(keys) > 0 {
		data = map[string][]byte{}
		for _, k := range keys {
			v, ok := src.Data[k]
			if !ok {
				return &MissingSecretError{Namespace: src.Namespace, Name: src.Name, Key: k}
			}
			data[k] = v
		}
	}
	dst := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: backendNamespace,
		Name:      backendName,
		Annotations: map[string]string{
			SourceClusterAnnotation:   logicalCluster,
			SourceNamespaceAnnotation: src.Namespace,
			SourceNameAnnotation:      src.Name,
		},
	}, Type: src.Type, Data: data}
	return Store(ctx, backend, backend, dst, nil)
}

// Guard decides whether an existing Secret may be overwritten or deleted: it returns an error to
// refuse (Store returns it as is), nil to allow.
type Guard func(cur *corev1.Secret) error

// Store creates or updates Secret s (namespace and name set) with its labels, annotations, type and
// data, reading the current object once through r (uncached). An existing Secret is only updated
// when guard (if any) allows it.
func Store(ctx context.Context, r client.Reader, c client.Client, s *corev1.Secret, guard Guard) error {
	return store(ctx, r, c, s, guard, false)
}

// StoreNew is Store for a Secret the caller expects not to exist yet (a first delivery): it is
// created first, one request, and read and updated as Store does only when it exists.
func StoreNew(ctx context.Context, r client.Reader, c client.Client, s *corev1.Secret, guard Guard) error {
	return store(ctx, r, c, s, guard, true)
}

func store(ctx context.Context, r client.Reader, c client.Client, s *corev1.Secret, guard Guard, fresh bool) error {
	if fresh {
		err := c.Create(ctx, s.DeepCopy())
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	cur := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKeyFromObject(s), cur)
	if fresh && apierrors.IsNotFound(err) {
		// It exists (the create said so) and cannot be read: not the caller's to write.
		return apierrors.NewAlreadyExists(corev1.Resource("secrets"), s.Name)
	}
	if err == nil && guard != nil {
		if err := guard(cur); err != nil {
			return err
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, s); err != nil {
			return fmt.Errorf("failed to create secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	if secretUpToDate(cur, s) {
		return nil
	}
	cur.Labels = mergeStrings(cur.Labels, s.Labels)
	cur.Annotations = mergeStrings(cur.Annotations, s.Annotations)
	if len(s.OwnerReferences) > 0 {
		cur.OwnerReferences = s.OwnerReferences
	}
	cur.Data = s.Data
	if err := c.Update(ctx, cur); err != nil {
		return fmt.Errorf("failed to update secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// DeliveryConflictError says a Secret of the delivered name already exists in the CR's namespace
// and is not the owner's; it is never overwritten. Unshared says the manager cannot even see it
// (it lacks AccessLabel): kcp refused the create with AlreadyExists.
type DeliveryConflictError struct {
	Namespace, Name string
	// Owner names the CR the Secret would be delivered for, e.g. "Tenant team-a/t".
	Owner    string
	Unshared bool
}

func (e *DeliveryConflictError) Error() string {
	if e.Unshared {
		return fmt.Sprintf("secret %s/%s already exists and is not shared with the platform (no label %s=%s); refusing to overwrite it (delete it so %s can deliver its Secret)", e.Namespace, e.Name, AccessLabel, AccessLabelValue, e.Owner)
	}
	return fmt.Sprintf("secret %s/%s already exists and is not owned by %s; refusing to overwrite it", e.Namespace, e.Name, e.Owner)
}

// Deliver creates or updates Secret name in owner's namespace in the workspace, owner-referenced to
// owner (controller reference) so it is garbage-collected with it, and labelled
// AccessLabel=AccessLabelValue (besides labels) so the platform may reach it again. A Secret of that
// name that owner does not control is never overwritten: a DeliveryConflictError.
func Deliver(ctx context.Context, ws client.Client, owner client.Object, gvk schema.GroupVersionKind, name string, labels map[string]string, data map[string][]byte) error {
	return deliver(ctx, ws, owner, gvk, name, labels, data, false)
}

// DeliverNew is Deliver for a Secret the caller expects not to exist yet (StoreNew).
func DeliverNew(ctx context.Context, ws client.Client, owner client.Object, gvk schema.GroupVersionKind, name string, labels map[string]string, data map[string][]byte) error {
	return deliver(ctx, ws, owner, gvk, name, labels, data, true)
}

func deliver(ctx context.Context, ws client.Client, owner client.Object, gvk schema.GroupVersionKind, name string, labels map[string]string, data map[string][]byte, fresh bool) error {
	conflict := &DeliveryConflictError{Namespace: owner.GetNamespace(), Name: name, Owner: gvk.Kind + " " + owner.GetNamespace() + "/" + owner.GetName()}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: owner.GetNamespace(),
			Name:      name,
			Labels:    mergeStrings(labels, map[string]string{AccessLabel: AccessLabelValue}),
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(owner, gvk),
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	err := store(ctx, ws, ws, s, func(cur *corev1.Secret) error {
		if !metav1.IsControlledBy(cur, owner) {
			return conflict
		}
		return nil
	}, fresh)
	if apierrors.IsAlreadyExists(err) {
		// The Secret was not visible to the read but exists: through the virtual workspace that is
		// a tenant's Secret without AccessLabel.
		conflict.Unshared = true
		return conflict
	}
	return err
}

// Undeliver deletes Secret name from owner's namespace when owner controls it.
func Undeliver(ctx context.Context, ws client.Client, owner client.Object, name string) error {
	return DeleteIf(ctx, ws, ws, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, func(cur *corev1.Secret) bool {
		return metav1.IsControlledBy(cur, owner)
	})
}

// DeleteIf deletes the Secret at key when owned says it is ours, reading it through r (uncached)
// and deleting exactly the object read (UID precondition). A missing Secret is not an error.
func DeleteIf(ctx context.Context, r client.Reader, c client.Client, key client.ObjectKey, owned func(*corev1.Secret) bool) error {
	cur := &corev1.Secret{}
	if err := r.Get(ctx, key, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !owned(cur) {
		return nil
	}
	if err := c.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("failed to delete secret %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	return nil
}

func secretUpToDate(cur, want *corev1.Secret) bool {
	if len(cur.Data) != len(want.Data) {
		return false
	}
	for k, v := range want.Data {
		if !bytes.Equal(cur.Data[k], v) {
			return false
		}
	}
	for k, v := range want.Labels {
		if cur.Labels[k] != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if cur.Annotations[k] != v {
			return false
		}
	}
	return true
}

func mergeStrings(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}
