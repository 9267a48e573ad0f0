package tenant

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/kubeopera/kubeopera/syncer"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/kubeoperaapi"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/workspaces"
)

const (
	// DeliveredKubeconfigKey is the key of the kubeconfig in the stored and delivered Secrets.
	DeliveredKubeconfigKey = "kubeconfig"
	// InClusterKubeconfigKey holds, when the vCluster is exposed outside the backend, the
	// kubeconfig naming its in-cluster Service, for clients inside the backend cluster.
	InClusterKubeconfigKey = "kubeconfig-in-cluster"
	// deleteNamespacePoll is how often deletion checks whether the host namespace is gone.
	deleteNamespacePoll = 2 * time.Second
)

// normalSteps are reconcileNormal's steps, in order. Each pass is cheap: Helm never waits, a
// Provisioning Tenant is polled every RequeueInterval (its vCluster's Secret is watched), and what
// is done is not redone before Ready (Once; every pass of a Ready Tenant checks everything).
func (r *Reconciler) normalSteps() []reconcile.Step[*scope] {
	return []reconcile.Step[*scope]{
		{Name: "admit the Tenant", Condition: kov1alpha1.AdmittedCondition, Run: r.admit, Once: true},
		{Name: "prepare the backend namespaces", Condition: kov1alpha1.BackendNamespaceReadyCondition, Run: r.backendNamespaces, Once: true},
		{Name: "deploy the vCluster release", Condition: kov1alpha1.ReleaseDeployedCondition, Run: r.release, Failed: kov1alpha1.InstallFailedReason, Once: true},
		{Name: "deliver the vCluster kubeconfig", Condition: kov1alpha1.KubeconfigDeliveredCondition, Run: r.kubeconfig},
		{Name: "tell kubeopera-api", Run: r.callback},
	}
}

// deleteSteps are reconcileDelete's steps: only what this Tenant owns is removed.
func (r *Reconciler) deleteSteps() []reconcile.Step[*scope] {
	return []reconcile.Step[*scope]{
		{Name: "uninstall the vCluster release", Run: r.uninstall},
		{Name: "remove the kubeconfig Secrets", Run: r.removeSecrets},
		{Name: "delete the host namespace", Run: r.deleteHostNamespace},
		{Name: "release the cloudSpaceID", Run: r.releaseCloudSpace},
	}
}

// admit checks the workspace's limits and claims the cloudSpaceID for this workspace, before
// anything is written for the Tenant or for a change of its spec.
func (r *Reconciler) admit(ctx context.Context, s *scope) error {
	// Checked until admitted, and again whenever the spec changed since (a bigger quota must fit
	// too; nothing of the change is installed when it does not).
	if c := reconcile.GetCondition(s.tenant, kov1alpha1.AdmittedCondition); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != s.tenant.Generation {
		if err := r.checkLimits(ctx, s); err != nil {
			return err
		}
	}
	if err := r.claimCloudSpace(ctx, s); err != nil {
		return err
	}
	reconcile.MarkTrue(s.tenant, kov1alpha1.AdmittedCondition, kov1alpha1.SucceededReason,
		"Within the workspace's limits; cloudSpaceID "+s.tenant.Spec.CloudSpaceID+" is this Tenant's")
	return nil
}

// backendNamespaces makes kcp-<fp> and the host namespace exist, refusing any that belongs to
// another workspace or, for the host namespace, to another Tenant of this workspace. Both are
// checked before either is created.
func (r *Reconciler) backendNamespaces(ctx context.Context, s *scope) error {
	t := s.tenant
	t.Status.VClusterName = s.releaseName
	t.Status.Namespace = s.hostNamespace
	if err := s.EnsureNamespaces(ctx,
		syncer.NamespaceClaim{Name: s.Namespace},
		syncer.NamespaceClaim{Name: s.hostNamespace, Owner: s.Owner}); err != nil {
		return err
	}
	reconcile.MarkTrue(t, kov1alpha1.BackendNamespaceReadyCondition, kov1alpha1.SucceededReason,
		"Backend namespaces "+s.Namespace+" and "+s.hostNamespace+" are ready")
	return nil
}

// release installs or upgrades the vCluster release when it is missing, was made with other values
// (a spec change), is left pending, or a new attempt starts on a release that is not deployed; a
// pass that reads a stale phase, and a restarted manager, therefore never install a second time.
// It waits until the release is deployed.
func (r *Reconciler) release(ctx context.Context, s *scope) error {
	t := s.tenant
	key := s.releaseKey()
	var obs helm.Observation
	switch res, state := r.installs.Poll(key); state {
	case reconcile.OperationEnded:
		// The install or upgrade this Tenant started has ended.
		if res.Err != nil {
			return helmError(s, res.Err)
		}
		obs = res.Value
		s.Event(corev1.EventTypeNormal, kov1alpha1.ProgressingReason,
			fmt.Sprintf("Installed vCluster release %s revision %d", s.releaseName, obs.Revision))
	case reconcile.OperationRunning:
		return r.installing(s)
	case reconcile.OperationIdle:
		var err error
		if obs, err = r.Helm.Observe(ctx, s.release(), s.values); err != nil {
			return helmError(s, err)
		}
		// A new attempt reinstalls a release that is not deployed: one the user or an admin asked
		// to retry (phase Pending), and one whose last install or upgrade failed transiently in
		// this step (an API server or registry blip after Helm had recorded the revision as failed).
		lastTransient := reconcile.GetCondition(t, kov1alpha1.ReleaseDeployedCondition)
		retrying := t.Status.Phase == kov1alpha1.TenantPhasePending ||
			(lastTransient != nil && lastTransient.Reason == kov1alpha1.TransientErrorReason)
		newAttempt := retrying && obs.Exists && obs.State != helm.StateDeployed
		if !obs.Exists || !obs.UpToDate || obs.State == helm.StatePending || obs.State == helm.StateUninstalling || newAttempt {
			rel, values := s.release(), s.values
			r.installs.Run(key, s.Request, func(ctx context.Context) (helm.Observation, error) {
				return r.Helm.InstallOrUpgrade(ctx, rel, values)
			})
			return r.installing(s)
		}
	}
	switch obs.State {
	case helm.StateDeployed:
		reconcile.MarkTrue(t, kov1alpha1.ReleaseDeployedCondition, kov1alpha1.SucceededReason,
			fmt.Sprintf("Release %s revision %d is deployed", s.releaseName, obs.Revision))
		return nil
	case helm.StateFailed:
		return reconcile.Stalledf(kov1alpha1.ReleaseFailedReason, "vCluster release %s revision %d failed: %s", s.releaseName, obs.Revision, obs.Description)
	default:
		return reconcile.Waiting(kov1alpha1.WaitingReason, fmt.Sprintf("Release %s revision %d is %s", s.releaseName, obs.Revision, obs.State), r.RequeueInterval)
	}
}

// releaseKey names the Tenant's release among the installs (reconcile.Operations).
func (s *scope) releaseKey() string { return s.hostNamespace + "/" + s.releaseName }

// release is the Tenant's vCluster release: its objects in the host namespace, its records in
// kcp-<fp>. The vCluster syncer's ServiceAccount may write Secrets in the host namespace (the
// chart's Role), so records kept there could be forged by the tenant: a forged "previous
// manifest" would have the next upgrade or the uninstall delete, with the manager's
// credentials, whatever it lists. kcp-<fp> is written by the platform only.
func (s *scope) release() helm.Release {
	return helm.Release{Namespace: s.hostNamespace, Name: s.releaseName, Storage: s.Namespace}
}

// installing says the Tenant waits for its install or upgrade, which requeues it when it ends.
func (r *Reconciler) installing(s *scope) error {
	// The install's end requeues the Tenant: no poll meanwhile.
	return reconcile.Waiting(kov1alpha1.WaitingReason, "Installing vCluster release "+s.releaseName, r.installs.Recheck())
}

// helmError says which release a Helm client error is about. The skeleton stalls the Tenant
// with InstallFailed on a terminal one (a chart not found, values the chart refuses); the rest
// are retried with backoff.
func helmError(s *scope, err error) error {
	return fmt.Errorf("Helm install of vCluster release %s failed: %w", s.releaseName, err)
}

// kubeconfig waits for vCluster's kubeconfig Secret and, with an exposure, for the vCluster's
// external endpoint; writes the endpoint into the kubeconfig (and the in-cluster short-DNS name
// into a second one), stores them in kcp-<fp> and delivers them into the Tenant's namespace.
func (r *Reconciler) kubeconfig(ctx context.Context, s *scope) error {
	t := s.tenant
	secretName := vcluster.KubeconfigSecret(s.releaseName)
	waiting := func() error {
		return reconcile.Waiting(kov1alpha1.WaitingReason,
			fmt.Sprintf("Waiting for the vCluster to write Secret %s/%s", s.hostNamespace, secretName), r.RequeueInterval)
	}
	fresh := !reconcile.IsTrue(t, kov1alpha1.KubeconfigDeliveredCondition)
	sec := &corev1.Secret{}
	if arrived, ok := r.arrivals.Take(&corev1.SecretList{}, s.hostNamespace, secretName); ok {
		// The pass the Secret's arrival requeued: the watch saw it a moment ago.
		sec = arrived.(*corev1.Secret)
	} else if fresh && r.arrivals.Await(s.Request, &corev1.SecretList{}, s.hostNamespace, secretName, "") {
		// Not delivered yet: a watch from "now" sees the Secret when it is there already, so no
		// read is needed to wait for it.
		return waiting()
	} else if err := s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.hostNamespace, Name: secretName}, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to read vCluster kubeconfig Secret %s/%s: %w", s.hostNamespace, secretName, err)
	}
	raw := sec.Data[vcluster.KubeconfigKey]
	if len(raw) == 0 {
		// Requeued when it appears, or when the one there (empty) changes.
		r.arrivals.Await(s.Request, &corev1.SecretList{}, s.hostNamespace, secretName, sec.ResourceVersion)
		return waiting()
	}
	external, err := r.externalServer(ctx, s)
	if err != nil {
		return err
	}
	inCluster := vcluster.InClusterServer(s.releaseName, s.hostNamespace)
	inClusterConfig, err := kubeconfig.RewriteServer(raw, inCluster)
	if err != nil {
		return reconcile.Stalledf(kov1alpha1.KubeconfigFailedReason, "Secret %s/%s does not hold a usable kubeconfig: %v", s.hostNamespace, secretName, err)
	}
	data := map[string][]byte{DeliveredKubeconfigKey: inClusterConfig}
	endpoint, keys := inCluster, fmt.Sprintf("key %q", DeliveredKubeconfigKey)
	if external != "" {
		externalConfig, err := kubeconfig.RewriteServer(raw, external)
		if err != nil {
			return reconcile.Stalledf(kov1alpha1.KubeconfigFailedReason, "Secret %s/%s does not hold a usable kubeconfig: %v", s.hostNamespace, secretName, err)
		}
		data = map[string][]byte{DeliveredKubeconfigKey: externalConfig, InClusterKubeconfigKey: inClusterConfig}
		endpoint = external
		keys = fmt.Sprintf("key %q; from inside the backend cluster, key %q", DeliveredKubeconfigKey, InClusterKubeconfigKey)
	}
	// Stored in kcp-<fp> (never over another Tenant's: cloudSpaceID names it) and delivered
	// (never over a Secret of the tenant's own).
	if err := s.StoreAndDeliver(ctx, s.kubeconfigSecret, data, fresh); err != nil {
		return err
	}
	t.Status.KubeconfigSecret = s.kubeconfigSecret
	t.Status.Endpoint = endpoint
	reconcile.MarkTrue(t, kov1alpha1.KubeconfigDeliveredCondition, kov1alpha1.SucceededReason,
		fmt.Sprintf("Kubeconfig for %s delivered in Secret %s (%s)", endpoint, s.kubeconfigSecret, keys))
	return nil
}

// externalServer is the vCluster's server from outside the backend, by the platform's exposure:
// none (empty), its LoadBalancer Service's address once the load balancer controller gave one, or
// its ingress host once the ingress controller admitted the control-plane Ingress (a kubeconfig
// naming an endpoint nothing serves yet would fail on the tenant's laptop).
func (r *Reconciler) externalServer(ctx context.Context, s *scope) (string, error) {
	switch r.Exposure.Mode {
	case vcluster.ExposeLoadBalancer:
		svc := &corev1.Service{}
		if err := s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.hostNamespace, Name: s.releaseName}, svc); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("failed to read vCluster Service %s/%s: %w", s.hostNamespace, s.releaseName, err)
		}
		if server := vcluster.LoadBalancerServer(svc); server != "" {
			return server, nil
		}
		r.arrivals.Await(s.Request, &corev1.ServiceList{}, s.hostNamespace, s.releaseName, svc.ResourceVersion)
		return "", reconcile.Waiting(kov1alpha1.WaitingReason, fmt.Sprintf(
			"Waiting for the backend's load balancer to give Service %s/%s an address", s.hostNamespace, s.releaseName), r.RequeueInterval)
	case vcluster.ExposeIngress:
		// The chart names the control-plane Ingress like the release (templates/ingress.yaml).
		ing := &networkingv1.Ingress{}
		if err := s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.hostNamespace, Name: s.releaseName}, ing); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("failed to read vCluster Ingress %s/%s: %w", s.hostNamespace, s.releaseName, err)
		}
		if vcluster.IngressAdmitted(ing) {
			return vcluster.IngressServer(s.host), nil
		}
		r.arrivals.Await(s.Request, &networkingv1.IngressList{}, s.hostNamespace, s.releaseName, ing.ResourceVersion)
		return "", reconcile.Waiting(kov1alpha1.WaitingReason, fmt.Sprintf(
			"Waiting for the ingress controller of class %s to admit Ingress %s/%s for %s", r.Exposure.IngressClass, s.hostNamespace, s.releaseName, s.host), r.RequeueInterval)
	}
	return "", nil
}

// callback tells kubeopera-api the CloudSpace is active, once. It never blocks Ready.
func (r *Reconciler) callback(ctx context.Context, s *scope) error {
	t := s.tenant
	if t.Status.Phase != kov1alpha1.TenantPhaseReady {
		now := metav1.Now()
		t.Status.LastSyncedAt = &now
	}
	if reconcile.IsTrue(t, kov1alpha1.CallbackSucceededCondition) {
		return nil
	}
	if !r.API.Enabled() {
		reconcile.MarkFalse(t, kov1alpha1.CallbackSucceededCondition, kov1alpha1.CallbackSkippedReason, "No kubeopera-api base URL is configured")
		return nil
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
		reconcile.MarkFalse(t, kov1alpha1.CallbackSucceededCondition, kov1alpha1.CallbackFailedReason,
			"kubeopera-api could not be told that the CloudSpace is active; the platform will catch up (the vCluster is usable)")
		return nil
	}
	reconcile.MarkTrue(t, kov1alpha1.CallbackSucceededCondition, kov1alpha1.SucceededReason, "kubeopera-api was told the CloudSpace is active")
	return nil
}

// uninstall removes the vCluster release when this Tenant owns the host namespace, or when the
// host namespace is gone (its records in kcp-<fp> outlive it and would make a later Tenant of
// the same tenantName find a deployed release with nothing behind it): a namespace claimed by
// another Tenant or another workspace (a Tenant that failed on a conflict) is left alone,
// release included.
func (r *Reconciler) uninstall(ctx context.Context, s *scope) error {
	// An install still running would write the release again after the uninstall.
	if !r.installs.Quiet(s.releaseKey()) {
		return reconcile.Waiting(kov1alpha1.DeletingReason, "Waiting for the running install of "+s.releaseName+" to end", r.RequeueInterval)
	}
	ns := &corev1.Namespace{}
	err := s.Backend.Reader.Get(ctx, client.ObjectKey{Name: s.hostNamespace}, ns)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("failed to get backend namespace %s: %w", s.hostNamespace, err)
	case !s.Owns(ns):
		return nil
	}
	return r.Helm.Uninstall(ctx, s.release())
}

// removeSecrets removes the delivered kubeconfig and the stored one, when they are this Tenant's.
func (r *Reconciler) removeSecrets(ctx context.Context, s *scope) error {
	if err := s.Undeliver(ctx, s.kubeconfigSecret); err != nil {
		return err
	}
	return s.Unstore(ctx, s.kubeconfigSecret)
}

// deleteHostNamespace deletes the host namespace when it is this Tenant's and waits until it is gone.
func (r *Reconciler) deleteHostNamespace(ctx context.Context, s *scope) error {
	gone, err := s.Backend.DeleteNamespace(ctx, s.LogicalCluster, s.hostNamespace, s.Owner)
	if err != nil {
		return err
	}
	if !gone {
		return reconcile.Waiting(kov1alpha1.DeletingReason, "Waiting for backend namespace "+s.hostNamespace+" to be deleted", wait.Jitter(deleteNamespacePoll, 0.5))
	}
	return nil
}

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
			Labels:    map[string]string{kov1alpha1.ManagedByLabel: ControllerName, workspaces.FingerprintLabel: workspaces.Fingerprint(s.LogicalCluster)},
			Annotations: map[string]string{
				workspaces.LogicalClusterAnnotation: s.LogicalCluster,
				syncer.OwnerAnnotation:              s.Owner,
				CloudSpaceIDAnnotation:              id,
			},
		}}
	}
	// An admitted Tenant's claim is there: the cache of the records says so without a request.
	// Anything else it says (none, another's) is read again from the backend, below.
	if r.Claims != nil && reconcile.IsTrue(s.tenant, kov1alpha1.AdmittedCondition) {
		cached := ClaimMetadata()
		if err := r.Claims.Get(ctx, key, cached); err == nil && s.Owns(cached) {
			return nil
		}
	}
	// A Tenant not admitted yet most likely claims a new cloudSpaceID: create first, and read
	// only when the record exists.
	if !reconcile.IsTrue(s.tenant, kov1alpha1.AdmittedCondition) {
		err := s.Backend.Client.Create(ctx, claim())
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to record the claim of cloudSpaceID %q in %s: %w", id, r.ClaimsNamespace, err)
		}
	}
	for range 2 {
		cur := &corev1.ConfigMap{}
		err := s.Backend.Reader.Get(ctx, key, cur)
		if err == nil {
			if s.Owns(cur) {
				return nil
			}
			if cur.Annotations[workspaces.LogicalClusterAnnotation] == s.LogicalCluster {
				return reconcile.Stalledf(kov1alpha1.NameConflictReason, "cloudSpaceID %q is already used by %s in this workspace", id, cur.Annotations[syncer.OwnerAnnotation])
			}
			// Never say which workspace: that is another customer's business.
			return reconcile.Stalledf(kov1alpha1.NameConflictReason, "cloudSpaceID %q is already claimed by another workspace", id)
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to read the claim record of cloudSpaceID %q: %w", id, err)
		}
		err = s.Backend.Client.Create(ctx, claim())
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

// ClaimMetadata is an empty claim record's metadata, the object Reconciler.Claims is read (and
// its cache set up) with.
func ClaimMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}}
}

// releaseCloudSpace deletes the Tenant's claim record, only when it is this Tenant's.
func (r *Reconciler) releaseCloudSpace(ctx context.Context, s *scope) error {
	cur := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: r.ClaimsNamespace, Name: ClaimName(s.tenant.Spec.CloudSpaceID)}
	if err := s.Backend.Reader.Get(ctx, key, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !s.Owns(cur) {
		return nil
	}
	if err := s.Backend.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); client.IgnoreNotFound(err) != nil {
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
		return l.Check(s.tenant, nil) // the quota itself is checked all the same
	}
	list := &kov1alpha1.TenantList{}
	if err := s.Workspace.List(ctx, list); err != nil {
		return fmt.Errorf("failed to list the workspace's Tenants: %w", err)
	}
	ahead := AdmittedBefore(s.tenant, list.Items)
	return l.Check(s.tenant, ahead)
}

// AdmittedBefore returns the Tenants of all that count before t against the workspace's limits
// (reconcile.Ahead: first come, first served; admitted ones stay admitted).
func AdmittedBefore(t *kov1alpha1.Tenant, all []kov1alpha1.Tenant) []kov1alpha1.Tenant {
	ahead := reconcile.Ahead(t, reconcile.Pointers(all), kov1alpha1.AdmittedCondition)
	out := make([]kov1alpha1.Tenant, len(ahead))
	for i, o := range ahead {
		out[i] = *o
	}
	return out
}

// Check returns a QuotaExceeded stall when t does not fit after the Tenants ahead of it.
//
// A quota that is not greater than zero is refused (InvalidSpec) whatever the limits: the schema
// refuses it at admission, and a Tenant written before that rule must not offset the sums of the
// others. Such a Tenant ahead of t counts as zero.
func (l Limits) Check(t *kov1alpha1.Tenant, ahead []kov1alpha1.Tenant) error {
	for _, q := range []struct {
		field string
		value resource.Quantity
	}{{"spec.quota.cpu", t.Spec.Quota.CPU}, {"spec.quota.memory", t.Spec.Quota.Memory}} {
		if q.value.Sign() <= 0 {
			return reconcile.Stalledf(kov1alpha1.InvalidSpecReason, "%s must be greater than zero (it is %s)", q.field, q.value.String())
		}
	}
	if err := (reconcile.CountLimit{Max: l.MaxTenants, Kind: "Tenants"}).Check(len(ahead)); err != nil {
		return err
	}
	cpu, mem := t.Spec.Quota.CPU.DeepCopy(), t.Spec.Quota.Memory.DeepCopy()
	for i := range ahead {
		addPositive(&cpu, ahead[i].Spec.Quota.CPU)
		addPositive(&mem, ahead[i].Spec.Quota.Memory)
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

// addPositive adds q to sum when q is greater than zero.
func addPositive(sum *resource.Quantity, q resource.Quantity) {
	if q.Sign() > 0 {
		sum.Add(q)
	}
}

func exceeds(sum, limit resource.Quantity) bool {
	return !limit.IsZero() && sum.Cmp(limit) > 0
}
