package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/kubeoperaapi"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"
)

// vclusterKubeconfigKey is the key vCluster writes its kubeconfig under in Secret vc-<release>.
const vclusterKubeconfigKey = "config"

// DeliveredKubeconfigKey is the key of the kubeconfig in the stored and delivered Secrets.
const DeliveredKubeconfigKey = "kubeconfig"

// deleteNamespacePoll is how often deletion checks whether the host namespace is gone.
const deleteNamespacePoll = 2 * time.Second

// reconcileNormal runs the state machine. Each pass is cheap: Helm never waits, and a Provisioning
// Tenant is polled every RequeueInterval.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := s.tenant
	if t.Status.Phase == "" {
		t.Status.Phase = kov1alpha1.TenantPhasePending
	}

	// Retry: a new value of the retry annotation (tenants cannot write status), or a spec change,
	// starts a new attempt. An admin may also patch status.phase to Pending.
	retry := t.Annotations[kov1alpha1.RetryAnnotation]
	retryRequested := retry != "" && retry != t.Status.LastHandledRetry
	if retryRequested {
		t.Status.LastHandledRetry = retry
	}
	specChanged := t.Status.ObservedGeneration != 0 && t.Generation != t.Status.ObservedGeneration
	switch {
	case retryRequested:
		s.event(corev1.EventTypeNormal, kov1alpha1.RetryRequestedReason, "Retrying the vCluster provisioning")
		t.Status.Phase = kov1alpha1.TenantPhasePending
	case t.Status.Phase == kov1alpha1.TenantPhaseFailed && !specChanged:
		// Nothing to do until the user asks again; the status says why.
		return ctrl.Result{}, nil
	case t.Status.Phase == kov1alpha1.TenantPhaseReady && !specChanged:
		return r.reconcileReady(ctx, s)
	case specChanged && (t.Status.Phase == kov1alpha1.TenantPhaseFailed || t.Status.Phase == kov1alpha1.TenantPhaseReady):
		t.Status.Phase = kov1alpha1.TenantPhasePending
	}

	t.Status.VClusterName = s.releaseName
	t.Status.Namespace = s.hostNamespace

	// Backend namespaces, refusing any that belong to another workspace or, for the host
	// namespace, to another Tenant of this workspace.
	for ns, owner := range map[string]string{s.storeNamespace: "", s.hostNamespace: s.owner} {
		err := r.Backend.EnsureNamespace(ctx, s.logicalCluster, ns, owner)
		switch {
		case err == nil:
		case workspaces.IsCollision(err):
			s.event(corev1.EventTypeWarning, kov1alpha1.FingerprintCollisionReason, err.Error())
			return markFailed(t, kov1alpha1.BackendNamespaceReadyCondition, kov1alpha1.FingerprintCollisionReason, err.Error())
		case workspaces.IsClaimed(err):
			msg := fmt.Sprintf("tenantName %q is already used by another Tenant in this workspace (%v)", t.Spec.TenantName, err)
			s.event(corev1.EventTypeWarning, kov1alpha1.NameConflictReason, msg)
			return markFailed(t, kov1alpha1.BackendNamespaceReadyCondition, kov1alpha1.NameConflictReason, msg)
		default:
			markProgress(t, kov1alpha1.BackendNamespaceReadyCondition, metav1.ConditionFalse, kov1alpha1.WaitingReason, "Waiting for the backend namespaces")
			return ctrl.Result{}, err
		}
	}
	setCondition(t, kov1alpha1.BackendNamespaceReadyCondition, metav1.ConditionTrue, kov1alpha1.SucceededReason, "Backend namespaces "+s.storeNamespace+" and "+s.hostNamespace+" are ready")

	rel, err := r.Helm.Observe(ctx, s.hostNamespace, s.releaseName)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Install or upgrade only when the release is missing, was made with other values (a spec
	// change), or a new attempt starts on a release that is not deployed. A pass that reads a stale
	// phase, and a restarted manager, therefore never install a second time.
	// A release stuck in a pending state (a manager stopped mid-install) is recovered by
	// InstallOrUpgrade as well.
	values := vclusterValues(t, s.releaseName, s.hostNamespace, r.Environment)
	newAttempt := t.Status.Phase == kov1alpha1.TenantPhasePending && rel != nil && rel.Status != "deployed"
	if rel == nil || rel.ValuesHash != helm.HashValues(values) || newAttempt || rel.Status.IsPending() {
		rel, err = r.Helm.InstallOrUpgrade(ctx, s.hostNamespace, s.releaseName, values)
		if err != nil {
			msg := fmt.Sprintf("Helm install of vCluster release %s failed: %v", s.releaseName, err)
			s.event(corev1.EventTypeWarning, kov1alpha1.InstallFailedReason, msg)
			return markFailed(t, kov1alpha1.ReleaseDeployedCondition, kov1alpha1.InstallFailedReason, msg)
		}
		s.event(corev1.EventTypeNormal, kov1alpha1.ProgressingReason, fmt.Sprintf("Installed vCluster release %s revision %d", rel.Name, rel.Revision))
	}
	t.Status.Phase = kov1alpha1.TenantPhaseProvisioning

	switch rel.Status {
	case "deployed":
		setCondition(t, kov1alpha1.ReleaseDeployedCondition, metav1.ConditionTrue, kov1alpha1.SucceededReason, fmt.Sprintf("Release %s revision %d is deployed", rel.Name, rel.Revision))
	case "failed":
		msg := fmt.Sprintf("vCluster release %s revision %d failed: %s", rel.Name, rel.Revision, rel.Description)
		s.event(corev1.EventTypeWarning, kov1alpha1.ReleaseFailedReason, msg)
		return markFailed(t, kov1alpha1.ReleaseDeployedCondition, kov1alpha1.ReleaseFailedReason, msg)
	default:
		markProgress(t, kov1alpha1.ReleaseDeployedCondition, metav1.ConditionFalse, kov1alpha1.WaitingReason, fmt.Sprintf("Release %s is %s", rel.Name, rel.Status))
		return ctrl.Result{RequeueAfter: r.RequeueInterval}, nil
	}

	// The vCluster writes its kubeconfig into Secret vc-<release> once it is up.
	raw, err := r.vclusterKubeconfig(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Release observed", "revision", rel.Revision, "status", rel.Status, "kubeconfigFound", raw != nil)
	if raw == nil {
		markProgress(t, kov1alpha1.KubeconfigDeliveredCondition, metav1.ConditionFalse, kov1alpha1.WaitingReason,
			fmt.Sprintf("Waiting for the vCluster to write Secret %s/%s", s.hostNamespace, s.releaseName))
		return ctrl.Result{RequeueAfter: r.RequeueInterval}, nil
	}
	server := fmt.Sprintf("https://%s.%s:443", s.releaseName, s.hostNamespace)
	rewritten, err := kubeconfig.RewriteServer(raw, server)
	if err != nil {
		msg := fmt.Sprintf("Secret %s/%s does not hold a usable kubeconfig: %v", s.hostNamespace, s.releaseName, err)
		return markFailed(t, kov1alpha1.KubeconfigDeliveredCondition, kov1alpha1.KubeconfigFailedReason, msg)
	}
	if err := r.storeAndDeliver(ctx, s, rewritten); err != nil {
		var claimed *claimedError
		if errors.As(err, &claimed) {
			s.event(corev1.EventTypeWarning, kov1alpha1.NameConflictReason, claimed.Error())
			return markFailed(t, kov1alpha1.KubeconfigDeliveredCondition, kov1alpha1.NameConflictReason, claimed.Error())
		}
		markProgress(t, kov1alpha1.KubeconfigDeliveredCondition, metav1.ConditionFalse, kov1alpha1.KubeconfigFailedReason, err.Error())
		return ctrl.Result{}, err
	}
	t.Status.KubeconfigSecret = s.kubeconfigSecret
	setCondition(t, kov1alpha1.KubeconfigDeliveredCondition, metav1.ConditionTrue, kov1alpha1.SucceededReason,
		fmt.Sprintf("Kubeconfig delivered in Secret %s (key %q)", s.kubeconfigSecret, DeliveredKubeconfigKey))

	r.callback(ctx, s)

	t.Status.Phase = kov1alpha1.TenantPhaseReady
	now := metav1.Now()
	t.Status.LastSyncedAt = &now
	markReady(t, fmt.Sprintf("vCluster %s is ready; kubeconfig in Secret %s", s.releaseName, s.kubeconfigSecret))
	s.event(corev1.EventTypeNormal, kov1alpha1.SucceededReason, "vCluster "+s.releaseName+" is ready")
	return ctrl.Result{RequeueAfter: r.readyRecheck()}, nil
}

// readyRecheck is the jittered interval after which a Ready Tenant is checked for drift.
func (r *Reconciler) readyRecheck() time.Duration {
	return wait.Jitter(r.ReadyRecheckInterval, 0.2)
}

// reconcileReady keeps a Ready Tenant's delivered Secret in place without touching Helm; when the
// stored kubeconfig or the release is gone it provisions again.
func (r *Reconciler) reconcileReady(ctx context.Context, s *scope) (ctrl.Result, error) {
	stored := &corev1.Secret{}
	err := r.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.storeNamespace, Name: s.kubeconfigSecret}, stored)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to read stored kubeconfig: %w", err)
	}
	rel, relErr := r.Helm.Observe(ctx, s.hostNamespace, s.releaseName)
	if relErr != nil {
		return ctrl.Result{}, relErr
	}
	if apierrors.IsNotFound(err) || len(stored.Data[DeliveredKubeconfigKey]) == 0 || rel == nil || rel.Status != "deployed" {
		ctrl.LoggerFrom(ctx).Info("Ready Tenant drifted; provisioning again", "storedKubeconfig", err == nil, "releaseFound", rel != nil)
		s.tenant.Status.Phase = kov1alpha1.TenantPhaseProvisioning
		return r.reconcileNormal(ctx, s)
	}
	if err := syncer.Deliver(ctx, s.wsDirect, s.tenant, kov1alpha1.GroupVersion.WithKind("Tenant"), s.kubeconfigSecret,
		s.secretLabels(), map[string][]byte{DeliveredKubeconfigKey: stored.Data[DeliveredKubeconfigKey]}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.readyRecheck()}, nil
}

// vclusterKubeconfig returns the kubeconfig vCluster wrote, or nil while it is not there yet.
func (r *Reconciler) vclusterKubeconfig(ctx context.Context, s *scope) ([]byte, error) {
	sec := &corev1.Secret{}
	err := r.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.hostNamespace, Name: s.releaseName}, sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read vCluster kubeconfig Secret %s/%s: %w", s.hostNamespace, s.releaseName, err)
	}
	if len(sec.Data[vclusterKubeconfigKey]) == 0 {
		return nil, nil
	}
	return sec.Data[vclusterKubeconfigKey], nil
}

func (s *scope) secretLabels() map[string]string {
	return map[string]string{
		kov1alpha1.TenantIDLabel:  s.tenant.Spec.CloudSpaceID,
		kov1alpha1.ManagedByLabel: ControllerName,
	}
}

// claimedError says the stored kubeconfig Secret's name (from cloudSpaceID) is used by another
// Tenant of this workspace.
type claimedError struct{ cloudSpaceID, owner string }

func (e *claimedError) Error() string {
	return fmt.Sprintf("cloudSpaceID %q is already used by %s in this workspace", e.cloudSpaceID, e.owner)
}

// storeAndDeliver stores the kubeconfig in kcp-<fp> on the backend and delivers it into the
// Tenant's namespace in its workspace. A stored Secret of another Tenant is never overwritten.
func (r *Reconciler) storeAndDeliver(ctx context.Context, s *scope, kc []byte) error {
	data := map[string][]byte{DeliveredKubeconfigKey: kc}
	stored := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.storeNamespace,
			Name:      s.kubeconfigSecret,
			Labels:    s.secretLabels(),
			Annotations: map[string]string{
				workspaces.LogicalClusterAnnotation: s.logicalCluster,
				workspaces.OwnerAnnotation:          s.owner,
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	err := syncer.Store(ctx, r.Backend.Reader, r.Backend.Client, stored, func(cur *corev1.Secret) error {
		if !workspaces.OwnedBy(cur, s.logicalCluster, s.owner) {
			return &claimedError{cloudSpaceID: s.tenant.Spec.CloudSpaceID, owner: cur.Annotations[workspaces.OwnerAnnotation]}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return syncer.Deliver(ctx, s.wsDirect, s.tenant, kov1alpha1.GroupVersion.WithKind("Tenant"), s.kubeconfigSecret, s.secretLabels(), data)
}

// callback tells kubeopera-api the CloudSpace is active. It never blocks Ready.
func (r *Reconciler) callback(ctx context.Context, s *scope) {
	t := s.tenant
	if !r.API.Enabled() {
		setCondition(t, kov1alpha1.CallbackSucceededCondition, metav1.ConditionFalse, kov1alpha1.CallbackSkippedReason, "No kubeopera-api base URL is configured")
		return
	}
	err := r.API.PatchCloudSpace(ctx, t.Spec.CloudSpaceID, kubeoperaapi.CloudSpaceUpdate{
		VClusterID:       s.releaseName,
		Namespace:        s.hostNamespace,
		KubeconfigSecret: s.kubeconfigSecret,
		Status:           "active",
	})
	if err != nil {
		// The detail (internal URLs) is for the platform's logs, not the tenant's status.
		ctrl.LoggerFrom(ctx).Info("kubeopera-api callback failed; the Tenant is Ready regardless", "error", err.Error())
		setCondition(t, kov1alpha1.CallbackSucceededCondition, metav1.ConditionFalse, kov1alpha1.CallbackFailedReason,
			"kubeopera-api could not be told that the CloudSpace is active; the platform will catch up (the vCluster is usable)")
		return
	}
	setCondition(t, kov1alpha1.CallbackSucceededCondition, metav1.ConditionTrue, kov1alpha1.SucceededReason, "kubeopera-api was told the CloudSpace is active")
}

// reconcileDelete uninstalls the vCluster, removes the stored and delivered Secrets and the host
// namespace, then drops the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	t := s.tenant
	if !controllerutil.ContainsFinalizer(t, kov1alpha1.TenantFinalizer) {
		return ctrl.Result{}, nil
	}
	t.Status.Phase = kov1alpha1.TenantPhaseDeleting
	markProgress(t, kov1alpha1.ReadyCondition, metav1.ConditionFalse, kov1alpha1.DeletingReason, "Removing the vCluster and its Secrets")

	// Only what this Tenant owns is removed: a host namespace claimed by another Tenant or another
	// workspace (a Tenant that failed on a conflict) is left alone, release included.
	owns, err := r.Backend.Owns(ctx, s.logicalCluster, s.hostNamespace, s.owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	if owns {
		if err := r.Helm.Uninstall(ctx, s.hostNamespace, s.releaseName); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := syncer.Undeliver(ctx, s.wsDirect, t, s.kubeconfigSecret); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.deleteStoredKubeconfig(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	gone, err := r.Backend.DeleteNamespace(ctx, s.logicalCluster, s.hostNamespace, s.owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !gone {
		return ctrl.Result{RequeueAfter: wait.Jitter(deleteNamespacePoll, 0.5)}, nil
	}

	base := t.DeepCopy()
	controllerutil.RemoveFinalizer(t, kov1alpha1.TenantFinalizer)
	if err := s.ws.Patch(ctx, t, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to remove finalizer: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Tenant deleted; vCluster and Secrets removed", "release", s.releaseName, "hostNamespace", s.hostNamespace)
	return ctrl.Result{}, nil
}

// deleteStoredKubeconfig deletes the stored backend kubeconfig only when it was stored for this
// Tenant of this workspace.
func (r *Reconciler) deleteStoredKubeconfig(ctx context.Context, s *scope) error {
	key := client.ObjectKey{Namespace: s.storeNamespace, Name: s.kubeconfigSecret}
	return syncer.DeleteIf(ctx, r.Backend.Reader, r.Backend.Client, key, func(cur *corev1.Secret) bool {
		return workspaces.OwnedBy(cur, s.logicalCluster, s.owner)
	})
}
