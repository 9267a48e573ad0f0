// Package providerconfig is the ProviderConfig reconciler (seed 004): it reads the tenant's
// provider credentials from a Secret in the ProviderConfig's own namespace, checks their shape
// (internal/otc: the seed's key=value password form and its AK/SK JSON form), and gives Crossplane
// what it needs in the workspace's backend namespace kcp-<fp>: the credentials, normalized to the
// JSON object the OTC provider reads, and the provider's namespaced ProviderConfig pointing at
// them. KubernetesClusters name the ProviderConfig and wait until it is Ready.
//
// Watches: ProviderConfigs of every workspace bound to the platform.edgeconnect.eu export. Owns: on
// the backend, the credentials Secret and the OTC ProviderConfig (both labelled with the
// workspace's fingerprint and annotated with the owner). Credentials are never logged, put in
// status, events or errors.
package providerconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/internal/fleet"
	iotc "github.com/kubeopera/kubeopera/internal/otc"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"
)

const (
	// ControllerName names the controller, its field owner and its event reporter.
	ControllerName = "providerconfig-controller"
	// Finalizer is set on every ProviderConfig so its backend objects go with it.
	Finalizer = "platform.edgeconnect.eu/providerconfig"
	// ProviderOTC is the provider type whose credentials are checked and given an OTC
	// ProviderConfig on the backend.
	ProviderOTC = "OTC"
	// CredentialsKey is the key of the credentials in the backend Secret.
	CredentialsKey = otc.DefaultCredentialsKey
	// InvalidCredentialsReason: the credentials Secret does not hold well-formed credentials.
	InvalidCredentialsReason = "InvalidCredentials"
	// recheck is how soon credentials that are missing or malformed are read again: the fix is in
	// a Secret, which is not watched.
	recheck = 30 * time.Second
	// ownerKindLabel, ownerNamespaceLabel and ownerNameLabel name the workspace object a backend
	// object was made for.
	ownerKindLabel      = "platform.edgeconnect.eu/owner-kind"
	ownerNamespaceLabel = "platform.edgeconnect.eu/owner-namespace"
	ownerNameLabel      = "platform.edgeconnect.eu/owner-name"
)

// BackendName is the name of a ProviderConfig's objects on the backend (its OTC ProviderConfig,
// and with "-credentials" its credentials Secret): derived from its namespace and name, never
// colliding within the workspace's backend namespace.
func BackendName(namespace, name string) string {
	return "pc-" + workspaces.ObjectName(namespace, name, 40)
}

// Reconciler drives ProviderConfigs.
type Reconciler struct {
	// Workspaces serves every workspace bound to the platform.edgeconnect.eu export.
	Workspaces *fleet.Provider
	// Backend reads (uncached) and writes backend namespaces and objects.
	Backend workspaces.Backend
	// AuthHosts are the hosts OTC credentials' auth_url may name (otc.AuthHostAllowed patterns);
	// iotc.DefaultAuthHosts when nil.
	AuthHosts []string
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	if r.Workspaces == nil {
		return errors.New("providerconfig controller needs the platform export's workspaces")
	}
	return fleet.NewController(mgr, "providerconfig", r.Workspaces, &platformv1alpha1.ProviderConfig{},
		mccontroller.Options{Reconciler: r, MaxConcurrentReconciles: 4},
		// A ProviderConfig being deleted waits for the KubernetesClusters naming it: one going
		// is looked at at once.
		fleet.Watch{Object: &platformv1alpha1.KubernetesCluster{}, Map: func(obj client.Object) []types.NamespacedName {
			kc, ok := obj.(*platformv1alpha1.KubernetesCluster)
			if !ok || kc.Spec.ProviderRef.ConfigRef == nil {
				return nil
			}
			return []types.NamespacedName{{Namespace: kc.Namespace, Name: kc.Spec.ProviderRef.ConfigRef.Name}}
		}})
}

type scope struct {
	pc             *platformv1alpha1.ProviderConfig
	ws             fleet.Workspace
	logicalCluster string
	storeNamespace string
	owner          string
	name           string
}

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	ctx, _ = reconcile.RequestLogger(ctx, req, "ProviderConfig")
	pc := &platformv1alpha1.ProviderConfig{}
	ws, found, err := r.Workspaces.Read(ctx, req, pc)
	if !found {
		return ctrl.Result{}, err
	}
	s := &scope{
		pc: pc, ws: ws, logicalCluster: ws.LogicalCluster,
		storeNamespace: workspaces.Namespace(ws.LogicalCluster),
		owner:          "ProviderConfig " + pc.Namespace + "/" + pc.Name,
		name:           BackendName(pc.Namespace, pc.Name),
	}
	return reconcile.Pass[*scope]{
		Client:    ws.Client(),
		Object:    pc,
		Scope:     s,
		Finalizer: Finalizer,
		Normal: []reconcile.Step[*scope]{
			{Name: "check the credentials", Condition: platformv1alpha1.CredentialsValidCondition, Run: r.credentials},
		},
		Delete: []reconcile.Step[*scope]{
			{Name: "wait for the clusters using it", Run: r.unused},
			{Name: "remove the backend objects", Run: r.remove},
		},
		Recorder: ws.Recorder(ControllerName),
		ReadyMessage: func(s *scope) string {
			return "Credentials are well-formed and handed to Crossplane in the workspace's backend namespace"
		},
		ReadyRequeue: func() time.Duration { return 10 * time.Minute },
	}.Run(ctx)
}

// credentials reads, checks and hands over the credentials.
func (r *Reconciler) credentials(ctx context.Context, s *scope) error {
	ref := s.pc.Spec.Credentials.SecretRef
	if s.pc.Spec.Credentials.Source != platformv1alpha1.CredentialsSourceSecret || ref == nil {
		return reconcile.Stalled(commonv1alpha1.InvalidSpecReason, "spec.credentials must name a Secret (source: Secret, secretRef)")
	}
	if ref.Namespace != "" && ref.Namespace != s.pc.Namespace {
		// Admission refuses this (the platform workspace's policy); an object from before it is
		// refused here, and no Secret of another namespace is ever read.
		return reconcile.Stalledf(commonv1alpha1.InvalidSpecReason, "spec.credentials.secretRef.namespace must be empty or %s: credentials are read from the ProviderConfig's own namespace only", s.pc.Namespace)
	}
	src, err := syncer.ReadReferencedSecret(ctx, s.ws.Direct(), s.pc, ref.Name)
	if err != nil {
		var missing *syncer.MissingSecretError
		var unshared *syncer.UnsharedSecretError
		if errors.As(err, &missing) || errors.As(err, &unshared) {
			return reconcile.Waiting(commonv1alpha1.CredentialsMissingReason, err.Error(), recheck)
		}
		return err
	}
	raw, ok := src.Data[ref.Key]
	if !ok {
		return reconcile.Waiting(commonv1alpha1.CredentialsMissingReason, fmt.Sprintf("secret %s/%s has no key %q", src.Namespace, src.Name, ref.Key), recheck)
	}
	if !IsOTC(s.pc) {
		return r.handOver(ctx, s, src, ref.Key, raw)
	}
	creds, err := iotc.ParseCredentials(raw)
	if err != nil {
		return reconcile.Waiting(InvalidCredentialsReason, fmt.Sprintf("secret %s/%s key %q: %v", src.Namespace, src.Name, ref.Key, err), recheck)
	}
	if hosts := r.authHosts(); !iotc.AuthHostAllowed(creds.AuthURL, hosts) {
		return reconcile.Waiting(InvalidCredentialsReason, fmt.Sprintf("secret %s/%s key %q: auth_url's host is not an IAM endpoint this platform allows (%s)",
			src.Namespace, src.Name, ref.Key, strings.Join(hosts, ", ")), recheck)
	}
	data, err := creds.ProviderSecretData()
	if err != nil {
		return reconcile.Waiting(InvalidCredentialsReason, fmt.Sprintf("secret %s/%s key %q: %v", src.Namespace, src.Name, ref.Key, err), recheck)
	}
	stored, err := r.store(ctx, s, data)
	if err != nil {
		return err
	}
	pc := otc.ProviderConfig(otc.ProviderConfigParams{
		Object:     otc.Object{Name: s.name, Namespace: s.storeNamespace, Labels: s.labels()},
		SecretName: stored.Name,
	})
	pc.SetAnnotations(s.annotations())
	if err := Apply(ctx, r.Backend.Client, pc); err != nil {
		return fmt.Errorf("failed to write the OTC ProviderConfig %s/%s: %w", s.storeNamespace, s.name, err)
	}
	reconcile.MarkTrue(s.pc, platformv1alpha1.CredentialsValidCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("Well-formed %s credentials for %s (region %s); Crossplane uses them as ProviderConfig %s", creds.Mode, creds.AuthURL, creds.Region, s.name))
	return nil
}

func (r *Reconciler) authHosts() []string {
	if r.AuthHosts == nil {
		return iotc.DefaultAuthHosts
	}
	return r.AuthHosts
}

// IsOTC reports whether a ProviderConfig holds OTC credentials (spec.type OTC, the default).
func IsOTC(pc *platformv1alpha1.ProviderConfig) bool {
	return pc.Spec.Type == "" || strings.EqualFold(pc.Spec.Type, ProviderOTC)
}

// CredentialsSecretName is the backend Secret a ProviderConfig's credentials are copied into, in
// the workspace's backend namespace, under key CredentialsKey.
func CredentialsSecretName(namespace, name string) string {
	return BackendName(namespace, name) + "-credentials"
}

// handOver copies another provider's credentials to the backend as they are: their format is the
// provider's, checked by its Crossplane composition, so only their presence and size are checked
// here. An OTC ProviderConfig left from when spec.type was OTC is removed.
func (r *Reconciler) handOver(ctx context.Context, s *scope, src *corev1.Secret, key string, raw []byte) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return reconcile.Waiting(InvalidCredentialsReason, fmt.Sprintf("secret %s/%s key %q is empty", src.Namespace, src.Name, key), recheck)
	}
	if err := r.removeOTCProviderConfig(ctx, s); err != nil {
		return err
	}
	stored, err := r.store(ctx, s, raw)
	if err != nil {
		return err
	}
	reconcile.MarkTrue(s.pc, platformv1alpha1.CredentialsValidCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("%s credentials handed to Crossplane as Secret %s (key %q); their format is checked by the %s composition", s.pc.Spec.Type, stored.Name, CredentialsKey, s.pc.Spec.Type))
	return nil
}

// store writes the credentials Secret on the backend.
func (r *Reconciler) store(ctx context.Context, s *scope, data []byte) (*corev1.Secret, error) {
	if err := r.Backend.EnsureNamespaces(ctx, s.logicalCluster, workspaces.NamespaceClaim{Name: s.storeNamespace}); err != nil {
		if workspaces.IsCollision(err) {
			return nil, reconcile.Stalled(commonv1alpha1.FingerprintCollisionReason, err.Error())
		}
		return nil, err
	}
	stored := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.storeNamespace, Name: CredentialsSecretName(s.pc.Namespace, s.pc.Name), Labels: s.labels(), Annotations: s.annotations()},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{CredentialsKey: data},
	}
	return stored, syncer.Store(ctx, r.Backend.Reader, r.Backend.Client, stored, func(cur *corev1.Secret) error {
		if !workspaces.OwnedBy(cur, s.logicalCluster, s.owner) {
			return reconcile.Stalledf(commonv1alpha1.NameConflictReason, "backend Secret %s/%s belongs to %s", cur.Namespace, cur.Name, cur.Annotations[workspaces.OwnerAnnotation])
		}
		return nil
	})
}

// Apply server-side applies a backend object the controllers own.
func Apply(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(ControllerName), client.ForceOwnership)
}

// unused waits while a KubernetesCluster of the namespace names this ProviderConfig: Crossplane
// needs the credentials to delete what it built, so they stay until the last such cluster is gone
// (in a workspace being deleted, the clusters go first).
func (r *Reconciler) unused(ctx context.Context, s *scope) error {
	list := &platformv1alpha1.KubernetesClusterList{}
	if err := s.ws.Client().List(ctx, list, client.InNamespace(s.pc.Namespace)); err != nil {
		return err
	}
	var users []string
	for _, kc := range list.Items {
		if ref := kc.Spec.ProviderRef.ConfigRef; ref != nil && ref.Name == s.pc.Name {
			users = append(users, kc.Name)
		}
	}
	if len(users) > 0 {
		return reconcile.Waiting(commonv1alpha1.DeletingReason, reconcile.Truncate(fmt.Sprintf(
			"Waiting for the KubernetesClusters using these credentials to be deleted first (Crossplane needs them to tear down): %s", strings.Join(users, ", "))), recheck)
	}
	return nil
}

// remove deletes the backend objects when they are this ProviderConfig's.
func (r *Reconciler) remove(ctx context.Context, s *scope) error {
	if err := r.removeOTCProviderConfig(ctx, s); err != nil {
		return err
	}
	return syncer.DeleteIf(ctx, r.Backend.Reader, r.Backend.Client, client.ObjectKey{Namespace: s.storeNamespace, Name: CredentialsSecretName(s.pc.Namespace, s.pc.Name)}, func(cur *corev1.Secret) bool {
		return workspaces.OwnedBy(cur, s.logicalCluster, s.owner)
	})
}

// removeOTCProviderConfig deletes the OTC ProviderConfig when it is this ProviderConfig's. A
// backend without the OTC provider's kinds has none.
func (r *Reconciler) removeOTCProviderConfig(ctx context.Context, s *scope) error {
	pc := otc.ProviderConfig(otc.ProviderConfigParams{Object: otc.Object{Name: s.name, Namespace: s.storeNamespace}})
	err := r.Backend.Client.Get(ctx, client.ObjectKeyFromObject(pc), pc)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return err
	case !workspaces.OwnedBy(pc, s.logicalCluster, s.owner):
		return nil
	}
	return client.IgnoreNotFound(r.Backend.Client.Delete(ctx, pc))
}

func (s *scope) labels() map[string]string {
	return map[string]string{
		workspaces.FingerprintLabel: workspaces.Fingerprint(s.logicalCluster),
		ownerKindLabel:              "ProviderConfig",
		ownerNamespaceLabel:         s.pc.Namespace,
		ownerNameLabel:              workspaces.ShortName(s.pc.Name, 63),
	}
}

func (s *scope) annotations() map[string]string {
	return map[string]string{workspaces.LogicalClusterAnnotation: s.logicalCluster, workspaces.OwnerAnnotation: s.owner}
}
