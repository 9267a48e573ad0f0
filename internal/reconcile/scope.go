package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"
)

// Scope is the workspace↔backend layer of one pass, which every controller's scope embeds: the
// object's workspace (its clients, logical cluster and event recorder), its backend namespace
// kcp-<fp> and the identity its backend objects carry. Kind.Reconcile builds it from the
// request. Its methods return outcomes already mapped (Waiting, Stalled, or a transient error), so
// a controller keeps only its domain steps.
type Scope struct {
	// Request is the request being reconciled.
	Request mcreconcile.Request
	// Object is the object reconciled, as read at the start of the pass.
	Object Object
	// GVK is the object's kind, for the owner references of delivered Secrets.
	GVK schema.GroupVersionKind
	// LogicalCluster is the object's workspace.
	LogicalCluster string
	// Workspace reads the object's kind from the shared cache and writes the workspace.
	Workspace client.Client
	// Direct reads and writes the workspace uncached (Secrets, which are never cached; the fresh
	// read before an external job is started).
	Direct client.Client
	// Recorder emits events into the object's workspace.
	Recorder events.EventRecorder
	// Backend reads (uncached) and writes the backend cluster.
	Backend syncer.Backend
	// Namespace is the workspace's backend namespace, kcp-<fp>.
	Namespace string
	// Owner identifies the object on the backend objects that are exclusively its:
	// "<Kind> <namespace>/<name>".
	Owner string
	// Labels are put on every Secret stored or delivered for the object.
	Labels map[string]string
	// NamedBy says which spec field the names of the object's Secrets derive from (e.g.
	// `clusterID "7e9d3a1b"`): a stored Secret of that name that is another object's is a
	// NameConflict that says so.
	NamedBy string
	// Poll is how soon a step that waits on the tenant (a referenced Secret missing) looks again.
	Poll time.Duration
}

// Event tells the object's owner what happened (see Event).
func (s *Scope) Event(eventType, reason, note string) {
	Event(s.Recorder, s.Object, eventType, reason, note)
}

// Owns reports whether a backend object (a namespace, a stored Secret) is this object's.
func (s *Scope) Owns(obj metav1.Object) bool {
	return syncer.OwnedBy(obj, s.LogicalCluster, s.Owner)
}

// ReferencedSecret reads Secret name from the object's own namespace in its workspace (never
// another). A missing one, or one not labelled for the platform, is waited for with
// CredentialsMissing: the tenant may still add it or its label, and the message says how.
func (s *Scope) ReferencedSecret(ctx context.Context, name string) (*corev1.Secret, error) {
	src, err := syncer.ReadReferencedSecret(ctx, s.Direct, s.Object, name)
	if err != nil {
		if syncer.IsMissing(err) {
			return nil, Waiting(commonv1alpha1.CredentialsMissingReason, err.Error(), s.Poll)
		}
		return nil, err
	}
	return src, nil
}

// EnsureNamespaces makes the claimed backend namespaces exist for the object's workspace
// (syncer.Backend.EnsureNamespaces: all checked before any is created). One that belongs to
// another workspace stalls the object with FingerprintCollision, one claimed by another object of
// this workspace with NameConflict; nothing is written then.
func (s *Scope) EnsureNamespaces(ctx context.Context, claims ...syncer.NamespaceClaim) error {
	err := s.Backend.EnsureNamespaces(ctx, s.LogicalCluster, claims...)
	switch {
	case syncer.IsCollision(err):
		return Stalled(commonv1alpha1.FingerprintCollisionReason, err.Error())
	case syncer.IsClaimed(err):
		return Stalled(commonv1alpha1.NameConflictReason, err.Error())
	case syncer.IsAccessPending(err):
		// Looked at again in a moment, not waited for in a worker.
		return Waiting(commonv1alpha1.WaitingReason, err.Error(), AccessRecheck)
	}
	return err
}

// AccessRecheck is how soon an object whose backend namespace's RoleBinding was not in effect yet
// is looked at again (syncer.Backend.DeferAccess).
const AccessRecheck = 250 * time.Millisecond

// Store creates or updates Secret name in kcp-<fp>, labelled with Labels and annotated with the
// workspace and Owner. A Secret of that name that is another object's is never overwritten: the
// object stalls with NameConflict.
func (s *Scope) Store(ctx context.Context, name string, typ corev1.SecretType, data map[string][]byte) error {
	return s.store(ctx, name, typ, data, false)
}

func (s *Scope) store(ctx context.Context, name string, typ corev1.SecretType, data map[string][]byte, fresh bool) error {
	stored := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      name,
			Labels:    s.Labels,
			Annotations: map[string]string{
				workspaces.LogicalClusterAnnotation: s.LogicalCluster,
				syncer.OwnerAnnotation:              s.Owner,
			},
		},
		Type: typ,
		Data: data,
	}
	write := syncer.Store
	if fresh {
		write = syncer.StoreNew
	}
	return write(ctx, s.Backend.Reader, s.Backend.Client, stored, func(cur *corev1.Secret) error {
		if !s.Owns(cur) {
			return s.nameConflict(cur)
		}
		return nil
	})
}

// nameConflict is the outcome of finding another object's Secret under one of this object's names.
func (s *Scope) nameConflict(cur metav1.Object) error {
	return Stalledf(commonv1alpha1.NameConflictReason, "%s is already used by %s in this workspace", s.NamedBy, cur.GetAnnotations()[syncer.OwnerAnnotation])
}

// Stored reads Secret name from kcp-<fp>: found is false when there is none. Another object's
// Secret under this name stalls the object with NameConflict.
func (s *Scope) Stored(ctx context.Context, name string) (sec *corev1.Secret, found bool, err error) {
	sec = &corev1.Secret{}
	err = s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("failed to read stored Secret %s/%s: %w", s.Namespace, name, err)
	case !s.Owns(sec):
		return nil, false, s.nameConflict(sec)
	}
	return sec, true, nil
}

// Deliver creates or updates Secret name in the object's namespace in its workspace,
// owner-referenced to the object and labelled with Labels (syncer.Deliver). A Secret of the
// tenant's own under that name is never overwritten: the object stalls with NameConflict (the
// tenant removes it and retries).
func (s *Scope) Deliver(ctx context.Context, name string, data map[string][]byte) error {
	return s.deliver(ctx, name, data, false)
}

func (s *Scope) deliver(ctx context.Context, name string, data map[string][]byte, fresh bool) error {
	write := syncer.Deliver
	if fresh {
		write = syncer.DeliverNew
	}
	err := write(ctx, s.Direct, s.Object, s.GVK, name, s.Labels, data)
	var conflict *syncer.DeliveryConflictError
	if errors.As(err, &conflict) {
		return Stalled(commonv1alpha1.NameConflictReason, conflict.Error())
	}
	return err
}

// StoreAndDeliver stores Secret name (an Opaque one) in kcp-<fp> and delivers it into the
// object's namespace. fresh says the caller has not delivered it yet (its condition is not
// True): each Secret is then created first and read only when it exists, one request each
// instead of two.
func (s *Scope) StoreAndDeliver(ctx context.Context, name string, data map[string][]byte, fresh bool) error {
	return s.StoreAndDeliverCopy(ctx, name, data, data, fresh)
}

// StoreAndDeliverCopy is StoreAndDeliver where the tenant's copy differs from the platform's:
// stored is kept in kcp-<fp>, delivered goes into the object's namespace (an EKS kubeconfig: the
// platform's names its in-process token minting, the tenant's the AWS CLI).
func (s *Scope) StoreAndDeliverCopy(ctx context.Context, name string, stored, delivered map[string][]byte, fresh bool) error {
	if err := s.store(ctx, name, corev1.SecretTypeOpaque, stored, fresh); err != nil {
		return err
	}
	return s.deliver(ctx, name, delivered, fresh)
}

// Undeliver removes the named Secrets from the object's namespace, those the object controls only.
func (s *Scope) Undeliver(ctx context.Context, names ...string) error {
	for _, name := range names {
		if err := syncer.Undeliver(ctx, s.Direct, s.Object, name); err != nil {
			return err
		}
	}
	return nil
}

// Unstore removes the named Secrets from kcp-<fp>, those that are this object's only.
func (s *Scope) Unstore(ctx context.Context, names ...string) error {
	for _, name := range names {
		key := client.ObjectKey{Namespace: s.Namespace, Name: name}
		if err := syncer.DeleteIf(ctx, s.Backend.Reader, s.Backend.Client, key, func(cur *corev1.Secret) bool { return s.Owns(cur) }); err != nil {
			return err
		}
	}
	return nil
}

// TrackedJob returns the ID of the external job (a provisioning run, a scaffold job) the object
// tracks, as current reads it from the object ("" when a new job is due). When the cached copy
// names none, the object is read again from the API server: a pass that works from a copy older
// than the previous pass' RecordJob would otherwise start a second job.
func (s *Scope) TrackedJob(ctx context.Context, current func(Object) string) (string, error) {
	if id := current(s.Object); id != "" {
		return id, nil
	}
	fresh := s.Object.DeepCopyObject().(Object)
	if err := s.Direct.Get(ctx, client.ObjectKeyFromObject(s.Object), fresh); err != nil {
		return "", fmt.Errorf("failed to read %s %s before starting a job: %w", s.GVK.Kind, s.Object.GetName(), err)
	}
	return current(fresh), nil
}

// RecordJob records the ID of an external job just started in annotation key of the object
// (RecordAnnotations: without the resourceVersion guard, so the ID is never lost to a conflict),
// so later passes and a restarted manager follow that job instead of starting another.
func (s *Scope) RecordJob(ctx context.Context, key, id string) error {
	return RecordAnnotations(ctx, s.Workspace, s.Object, map[string]*string{key: ptr.To(id)})
}

// GrantRead lets identity, a ServiceAccount on the backend given as <namespace>/<name> (the
// provisioner's, the scaffolder's), get the stored Secrets names in kcp-<fp>, each by name, and
// nothing else: Role and RoleBinding role, owned by the first of names, so they go with it. A
// grant of that name naming other Secrets is updated to name exactly these. It reports whether it
// created or changed the grant now (RBAC takes a moment to reach every API server).
func (s *Scope) GrantRead(ctx context.Context, identity, role string, names ...string) (bool, error) {
	if len(names) == 0 {
		return false, errors.New("a read grant names at least one Secret")
	}
	saNamespace, saName, ok := strings.Cut(identity, "/")
	if !ok || saNamespace == "" || saName == "" {
		return false, fmt.Errorf("identity %q must be <namespace>/<serviceaccount>", identity)
	}
	first := &corev1.Secret{}
	if err := s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: names[0]}, first); err != nil {
		return false, err
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: first.Name, UID: first.UID}
	meta := metav1.ObjectMeta{Namespace: s.Namespace, Name: role, Labels: s.Labels, OwnerReferences: []metav1.OwnerReference{owner}}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: names, Verbs: []string{"get"}}}
	changed := false
	cur := &rbacv1.Role{}
	switch err := s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: role}, cur); {
	case apierrors.IsNotFound(err):
		if err := s.Backend.Client.Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: rules}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("failed to create Role %s/%s: %w", s.Namespace, role, err)
		}
		changed = true
	case err != nil:
		return false, err
	case !equality.Semantic.DeepEqual(cur.Rules, rules):
		cur.Rules = rules
		if err := s.Backend.Client.Update(ctx, cur); err != nil {
			return false, fmt.Errorf("failed to update Role %s/%s: %w", s.Namespace, role, err)
		}
		changed = true
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: *meta.DeepCopy(),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}}}
	switch err := s.Backend.Client.Create(ctx, binding); {
	case err == nil:
		changed = true
	case !apierrors.IsAlreadyExists(err):
		return false, fmt.Errorf("failed to create RoleBinding %s/%s: %w", s.Namespace, role, err)
	}
	return changed, nil
}
