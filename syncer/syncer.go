// Package syncer moves objects between a tenant's workspace and the backend cluster.
//
// In: Secrets a CR references are read from the tenant's workspace (through the export's
// permission claim on secrets), only from the CR's own namespace, and copied into the workspace's
// backend namespace. Out: results (kubeconfigs, passwords) are delivered into the CR's namespace,
// owner-referenced to the CR so they go with it. Secret data is never logged or put into errors.
package syncer

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

const (
	// SourceNamespaceAnnotation and SourceNameAnnotation record where a copied-in Secret came from.
	SourceNamespaceAnnotation = "kubeopera.io/source-namespace"
	SourceNameAnnotation      = "kubeopera.io/source-name"
	// SourceClusterAnnotation records the logical cluster a copied-in Secret came from.
	SourceClusterAnnotation = "kubeopera.io/source-cluster"
)

// DirectClient returns an uncached client for a workspace cluster. Secrets are read and written
// through it so the manager never caches every Secret of every bound workspace.
func DirectClient(cl cluster.Cluster) (client.Client, error) {
	return client.New(cl.GetConfig(), client.Options{
		HTTPClient: cl.GetHTTPClient(),
		Scheme:     cl.GetScheme(),
		Mapper:     cl.GetRESTMapper(),
	})
}

// MissingSecretError says a referenced Secret or key does not exist in the CR's namespace.
type MissingSecretError struct {
	Namespace, Name, Key string
}

func (e *MissingSecretError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("secret %s/%s has no key %q", e.Namespace, e.Name, e.Key)
	}
	return fmt.Sprintf("secret %s/%s not found", e.Namespace, e.Name)
}

// ReadReferencedSecret reads Secret name from owner's own namespace in the workspace. There is no
// way to name another namespace: a CR can only ever reference Secrets next to it.
func ReadReferencedSecret(ctx context.Context, ws client.Reader, owner client.Object, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := ws.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &MissingSecretError{Namespace: owner.GetNamespace(), Name: name}
		}
		return nil, fmt.Errorf("failed to read secret %s/%s: %w", owner.GetNamespace(), name, err)
	}
	return s, nil
}

// CopyIn copies Secret secretName from owner's namespace in the workspace into backendNamespace as
// backendName, recording its origin in annotations. keys limits the copied keys (all when empty); a
// missing key is a MissingSecretError.
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
	cur := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKeyFromObject(s), cur)
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

// Deliver creates or updates Secret name in owner's namespace in the workspace, owner-referenced to
// owner (controller reference) so it is garbage-collected with it.
func Deliver(ctx context.Context, ws client.Client, owner client.Object, gvk schema.GroupVersionKind, name string, labels map[string]string, data map[string][]byte) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: owner.GetNamespace(),
			Name:      name,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(owner, gvk),
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	return Store(ctx, ws, ws, s, func(cur *corev1.Secret) error {
		if !metav1.IsControlledBy(cur, owner) {
			return fmt.Errorf("secret %s/%s already exists and is not owned by %s %s; refusing to overwrite it", s.Namespace, s.Name, gvk.Kind, owner.GetName())
		}
		return nil
	})
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
