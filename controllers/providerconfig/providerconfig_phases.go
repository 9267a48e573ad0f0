package providerconfig

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/kubeopera/kubeopera/syncer"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/crossplane"
	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces"
)

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
	src, err := s.ReferencedSecret(ctx, ref.Name)
	if err != nil {
		return err
	}
	raw, ok := src.Data[ref.Key]
	if !ok {
		return reconcile.Waiting(commonv1alpha1.CredentialsMissingReason, fmt.Sprintf("secret %s/%s has no key %q", src.Namespace, src.Name, ref.Key), recheck)
	}
	if !IsOTC(s.pc) {
		return handOver(ctx, s, src, ref.Key, raw)
	}
	creds, err := otc.ParseCredentials(raw)
	if err != nil {
		return invalid(src, ref.Key, err.Error())
	}
	if hosts := r.authHosts(); !otc.AuthHostAllowed(creds.AuthURL, hosts) {
		return invalid(src, ref.Key, fmt.Sprintf("auth_url's host is not an IAM endpoint this platform allows (%s)", strings.Join(hosts, ", ")))
	}
	data, err := creds.ProviderSecretData()
	if err != nil {
		return invalid(src, ref.Key, err.Error())
	}
	if err := store(ctx, s, data); err != nil {
		return err
	}
	pc := otc.ProviderConfig(otc.ProviderConfigParams{
		Object:     otc.Object{Name: s.name, Namespace: s.Namespace, Labels: s.Labels},
		SecretName: crossplane.CredentialsSecretName(s.pc.Namespace, s.pc.Name),
	})
	pc.SetAnnotations(ownerAnnotations(s))
	if err := crossplane.Apply(ctx, s.Backend.Client, pc); err != nil {
		return fmt.Errorf("failed to write the OTC ProviderConfig %s/%s: %w", s.Namespace, s.name, err)
	}
	reconcile.MarkTrue(s.pc, platformv1alpha1.CredentialsValidCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("Well-formed %s credentials for %s (region %s); Crossplane uses them as ProviderConfig %s", creds.Mode, creds.AuthURL, creds.Region, s.name))
	return nil
}

// invalid waits for the tenant to fix the credentials in key of src; what is wrong is said
// without their values.
func invalid(src *corev1.Secret, key, what string) error {
	return reconcile.Waiting(platformv1alpha1.InvalidCredentialsReason, fmt.Sprintf("secret %s/%s key %q: %s", src.Namespace, src.Name, key, what), recheck)
}

func (r *Reconciler) authHosts() []string {
	if r.AuthHosts == nil {
		return otc.DefaultAuthHosts
	}
	return r.AuthHosts
}

// IsOTC reports whether a ProviderConfig holds OTC credentials (spec.type OTC, the default).
func IsOTC(pc *platformv1alpha1.ProviderConfig) bool {
	return pc.Spec.Type == "" || strings.EqualFold(pc.Spec.Type, ProviderOTC)
}

// handOver copies another provider's credentials to the backend as they are: their format is the
// provider's, checked by its Crossplane composition, so only their presence and size are checked
// here. An OTC ProviderConfig left from when spec.type was OTC is removed.
func handOver(ctx context.Context, s *scope, src *corev1.Secret, key string, raw []byte) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return invalid(src, key, "is empty")
	}
	// Stored first: store makes the backend namespace and the manager's access to it, which
	// reading the OTC ProviderConfig needs (in a workspace whose first object this is, the
	// manager may read nothing in kcp-<fp> before).
	if err := store(ctx, s, raw); err != nil {
		return err
	}
	if err := removeOTCProviderConfig(ctx, s); err != nil {
		return err
	}
	reconcile.MarkTrue(s.pc, platformv1alpha1.CredentialsValidCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("%s credentials handed to Crossplane as Secret %s (key %q); their format is checked by the %s composition",
			s.pc.Spec.Type, crossplane.CredentialsSecretName(s.pc.Namespace, s.pc.Name), crossplane.CredentialsKey, s.pc.Spec.Type))
	return nil
}

// store writes the credentials Secret into the workspace's backend namespace.
func store(ctx context.Context, s *scope, data []byte) error {
	if err := s.EnsureNamespaces(ctx, syncer.NamespaceClaim{Name: s.Namespace}); err != nil {
		return err
	}
	return s.Store(ctx, crossplane.CredentialsSecretName(s.pc.Namespace, s.pc.Name), corev1.SecretTypeOpaque, map[string][]byte{crossplane.CredentialsKey: data})
}

// ownerAnnotations say which workspace and object a backend object is for.
func ownerAnnotations(s *scope) map[string]string {
	return map[string]string{workspaces.LogicalClusterAnnotation: s.LogicalCluster, syncer.OwnerAnnotation: s.Owner}
}

// unused waits while a KubernetesCluster of the namespace names this ProviderConfig: Crossplane
// needs the credentials to delete what it built, so they stay until the last such cluster is gone
// (in a workspace being deleted, the clusters go first).
func unused(ctx context.Context, s *scope) error {
	list := &platformv1alpha1.KubernetesClusterList{}
	if err := s.Workspace.List(ctx, list, client.InNamespace(s.pc.Namespace)); err != nil {
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
func remove(ctx context.Context, s *scope) error {
	if err := removeOTCProviderConfig(ctx, s); err != nil {
		return err
	}
	return s.Unstore(ctx, crossplane.CredentialsSecretName(s.pc.Namespace, s.pc.Name))
}

// removeOTCProviderConfig deletes the OTC ProviderConfig when it is this ProviderConfig's. A
// backend without the OTC provider's kinds has none.
func removeOTCProviderConfig(ctx context.Context, s *scope) error {
	pc := otc.ProviderConfig(otc.ProviderConfigParams{Object: otc.Object{Name: s.name, Namespace: s.Namespace}})
	err := s.Backend.Client.Get(ctx, client.ObjectKeyFromObject(pc), pc)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return err
	case !s.Owns(pc):
		return nil
	}
	return client.IgnoreNotFound(s.Backend.Client.Delete(ctx, pc))
}
