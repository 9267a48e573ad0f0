package hostcluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/kubeopera/kubeopera/syncer"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/authapi"
	"github.com/kubeopera/kubeopera/internal/aws/ekstoken"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/netguard"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioning"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/internal/scaffolder"
	"github.com/kubeopera/kubeopera/internal/target"
	"github.com/kubeopera/kubeopera/workspaces"
)

const (
	// KubeconfigKey is the key of the kubeconfig in the referenced, stored and delivered Secrets.
	KubeconfigKey = "kubeconfig"
	// PasswordKey is the key of the admin password in its stored and delivered Secrets.
	PasswordKey = "password"
	// AdminBootstrappedAnnotation is put on the stored admin password Secret (on the backend, where
	// tenants cannot reach it) once authapi created the account: the guard that makes the call
	// happen once per HostCluster, across passes and restarts.
	AdminBootstrappedAnnotation = "kubeopera.io/admin-bootstrapped-at"
	// AppsKustomization is the generated tree's Kustomization whose Ready means KubeOpera's
	// application layer converged (docs/hostcluster.md#installing-kubeopera).
	AppsKustomization = "apps"
)

// normalSteps are reconcileNormal's steps, in order.
func (r *Reconciler) normalSteps() []reconcile.Step[*scope] {
	return refuseForbidden([]reconcile.Step[*scope]{
		{Name: "start a new attempt", Run: r.start},
		{Name: "admit the HostCluster", Condition: kov1alpha1.AdmittedCondition, Run: r.admit, Once: true},
		{Name: "prepare the backend namespace", Condition: kov1alpha1.BackendNamespaceReadyCondition, Run: r.backendNamespace, Once: true},
		{Name: "provision the cluster", Condition: kov1alpha1.ProvisionedCondition, Run: r.provision, Failed: kov1alpha1.ProvisioningFailedReason},
		{Name: "validate access to the cluster", Condition: kov1alpha1.AccessValidatedCondition, Run: r.access},
		{Name: "bootstrap Flux", Condition: kov1alpha1.FluxReadyCondition, Run: r.bootstrapFlux, Failed: kov1alpha1.FluxInstallFailedReason},
		{Name: "generate the GitOps tree", Condition: kov1alpha1.GitOpsTreeGeneratedCondition, Run: r.generateTree, Failed: kov1alpha1.ScaffoldFailedReason},
		{Name: "install KubeOpera", Condition: kov1alpha1.KubeOperaInstalledCondition, Run: r.installKubeOpera},
		{Name: "bootstrap the admin account", Condition: kov1alpha1.AdminBootstrappedCondition, Run: r.bootstrapAdmin, Failed: kov1alpha1.AdminBootstrapFailedReason},
	})
}

// deleteSteps disconnect the cluster: only what the platform keeps for this HostCluster is
// removed; nothing on the target is touched (it keeps running what Flux put there).
func (r *Reconciler) deleteSteps() []reconcile.Step[*scope] {
	return []reconcile.Step[*scope]{
		{Name: "wait for a running Flux install", Run: r.waitInstall},
		{Name: "destroy the provisioned infrastructure when asked", Condition: kov1alpha1.InfrastructureDestroyedCondition, Run: r.destroy, Failed: kov1alpha1.ProvisioningFailedReason},
		{Name: "remove the delivered and stored Secrets", Run: r.removeSecrets},
	}
}

// done reports whether a step's condition is True for the current generation, so a Ready cluster
// does not redo it (docs/hostcluster.md#state-machine: Ready is idempotent).
func done(hc *kov1alpha1.HostCluster, condition string) bool {
	c := reconcile.GetCondition(hc, condition)
	return hc.Status.Phase == kov1alpha1.HostClusterPhaseReady && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == hc.Generation
}

// start clears the in-flight work of an earlier attempt when a new one begins (phase Pending: a
// new object, a retry request, a spec change after Failed): a new give-up window, a new
// scaffold job.
func (r *Reconciler) start(ctx context.Context, s *scope) error {
	if s.hc.Status.Phase != kov1alpha1.HostClusterPhasePending {
		return nil
	}
	return reconcile.PatchAnnotations(ctx, s.Workspace, s.hc, map[string]*string{
		kov1alpha1.ValidationStartedAnnotation: nil,
		kov1alpha1.ScaffoldJobIDAnnotation:     nil,
		// A new attempt after a failed run starts a new run.
		kov1alpha1.ProvisionJobIDAnnotation: nil,
	})
}

// admit counts the HostCluster against the workspace's cap (MaxPerWorkspace) before anything is
// created for it: first come, first served, and an admitted HostCluster stays admitted.
func (r *Reconciler) admit(ctx context.Context, s *scope) error {
	if reconcile.IsTrue(s.hc, kov1alpha1.AdmittedCondition) {
		return nil
	}
	if limit := (reconcile.CountLimit{Max: r.MaxPerWorkspace, Kind: "HostClusters"}); limit.Max > 0 {
		list := &kov1alpha1.HostClusterList{}
		if err := s.Workspace.List(ctx, list); err != nil {
			return fmt.Errorf("failed to list the workspace's HostClusters: %w", err)
		}
		if err := limit.Check(len(reconcile.Ahead(s.hc, reconcile.Pointers(list.Items), kov1alpha1.AdmittedCondition))); err != nil {
			return err
		}
	}
	reconcile.MarkTrue(s.hc, kov1alpha1.AdmittedCondition, kov1alpha1.SucceededReason, "Within the workspace's limits")
	return nil
}

// backendNamespace makes kcp-<fp> exist and belong to this workspace.
func (r *Reconciler) backendNamespace(ctx context.Context, s *scope) error {
	if err := s.EnsureNamespaces(ctx, syncer.NamespaceClaim{Name: s.Namespace}); err != nil {
		return err
	}
	reconcile.MarkTrue(s.hc, kov1alpha1.BackendNamespaceReadyCondition, kov1alpha1.SucceededReason, "Backend namespace "+s.Namespace+" is ready")
	return nil
}

// access reads the kubeconfig from the workspace Secret, refuses what would make the manager run
// a program or read its files, stores it on the backend and delivers it, and reaches the target's
// API server. An unreachable target is retried with backoff until AccessGiveUp after the first
// attempt (kept in an annotation, so a restart does not reset it). Every pass that reaches the
// target also refreshes the inventory and the health score.
func (r *Reconciler) access(ctx context.Context, s *scope) error {
	hc := s.hc
	var cfg *rest.Config
	var srcName string
	if hc.Spec.Mode != kov1alpha1.HostClusterModeConnectExisting {
		// Provisioned (the step before stored the provisioner's kubeconfig): from here on the
		// cluster is handled like a connected one.
		stored := &corev1.Secret{}
		srcName = kubeconfigSecretName(hc.Spec.ClusterID)
		if err := s.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: srcName}, stored); err != nil {
			return fmt.Errorf("failed to read the stored kubeconfig: %w", err)
		}
		raw := stored.Data[KubeconfigKey]
		if isEKS(hc) {
			// Never the exec plugin the kubeconfig names: its tokens are minted in process.
			c, err := r.eksConfig(ctx, s, raw)
			if err != nil {
				return err
			}
			cfg = c
		} else {
			// The admin.conf came from the tenant's cloud account: a tenant's kubeconfig.
			c, err := kubeconfig.ParseUntrusted(raw)
			if err != nil {
				return reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "the provisioned cluster's kubeconfig: %v", err)
			}
			cfg = c
		}
	} else {
		src, err := s.ReferencedSecret(ctx, hc.Spec.ConnectKubeconfigSecretRef)
		if err != nil {
			return err
		}
		srcName = src.Name
		raw, ok := src.Data[KubeconfigKey]
		if !ok {
			return reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "Secret %s/%s has no key %q", hc.Namespace, src.Name, KubeconfigKey)
		}
		c, err := kubeconfig.ParseUntrusted(raw)
		if err != nil {
			return reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "Secret %s/%s key %q: %v", hc.Namespace, src.Name, KubeconfigKey, err)
		}
		cfg = c
		if err := storeAndDeliver(ctx, s, kubeconfigSecretName(hc.Spec.ClusterID), map[string][]byte{KubeconfigKey: raw}); err != nil {
			return err
		}
	}
	hc.Status.KubeconfigSecret = kubeconfigSecretName(hc.Spec.ClusterID)

	// Every client of the target (this step's, Flux's Helm install, authapi's) reads through the
	// response caps and dials through the guard.
	t, err := target.New(cfg, r.TargetTimeout, r.Guard, r.ReadLimits)
	if err != nil {
		return reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "Secret %s/%s key %q: %v", hc.Namespace, srcName, KubeconfigKey, err)
	}
	version, err := t.Clientset.Discovery().ServerVersion()
	if err != nil {
		if f, ok := netguard.AsForbidden(err); ok {
			return forbiddenAddress(t.Server, f)
		}
		if _, ok := readlimit.As(err); ok {
			return err // Stalled, ReadLimitExceeded (the skeleton maps it)
		}
		return r.unreachable(ctx, s, t.Server, err)
	}
	s.target = t
	if err := r.refreshInventory(ctx, s); err != nil {
		switch _, limited := readlimit.As(err); {
		case limited:
			// More than any real cluster answers: Stalled with ReadLimitExceeded (the skeleton
			// maps it; readlimit.Error says why it is not retried).
			return err
		case isTimeout(err):
			// A target that answers /version and then nothing is as good as unreachable: retried
			// with backoff, failed after AccessGiveUp (a Ready one waits).
			return r.unreachable(ctx, s, t.Server, err)
		default:
			// The inventory is information, not a step: a failure to read it (e.g. RBAC that
			// does not let the kubeconfig list pods) is logged, the last inventory stays, and the
			// next pass tries again.
			ctrl.LoggerFrom(ctx).Info("Could not read the cluster's inventory", "error", err.Error())
		}
	}
	// Answered: a later failure to answer starts a new give-up window.
	if err := reconcile.PatchAnnotations(ctx, s.Workspace, hc, map[string]*string{kov1alpha1.ValidationStartedAnnotation: nil}); err != nil {
		return err
	}
	if hc.Status.Inventory != nil {
		hc.Status.Inventory.KubernetesVersion = version.GitVersion
		// It answers again, even if the inventory could not be read (its health stays unknown).
		hc.Status.Inventory.UnreachableSince = nil
	}
	reconcile.MarkTrue(hc, kov1alpha1.AccessValidatedCondition, kov1alpha1.SucceededReason,
		fmt.Sprintf("API server %s answered: Kubernetes %s", t.Server, version.GitVersion))
	return nil
}

// forbiddenAddress fails the HostCluster whose target's API server is at an address the platform
// never dials on a tenant's behalf (netguard): retrying cannot help, unlike an unreachable target.
// The message names the server as the tenant gave it and the class of the address, never the
// address a name resolved to.
func forbiddenAddress(server string, f *netguard.ForbiddenError) error {
	return reconcile.Stalledf(kov1alpha1.ForbiddenAddressReason,
		"API server %s is at a forbidden address (%s): the platform never connects there on a tenant's behalf", server, f.Class)
}

// refuseForbidden makes a refused dial in any step (after access, a name may resolve elsewhere:
// Flux's install, the sync, the admin bootstrap) fail the HostCluster as access does.
func refuseForbidden(steps []reconcile.Step[*scope]) []reconcile.Step[*scope] {
	for i := range steps {
		run := steps[i].Run
		steps[i].Run = func(ctx context.Context, s *scope) error {
			err := run(ctx, s)
			if _, ok := reconcile.AsStalled(err); ok {
				return err
			}
			if _, ok := reconcile.AsWaiting(err); ok {
				return err
			}
			if f, ok := netguard.AsForbidden(err); ok && s.target != nil {
				return forbiddenAddress(s.target.Server, f)
			}
			return err
		}
	}
	return steps
}

// unreachable retries a target that did not answer, until AccessGiveUp after the first failure of
// this attempt; then the HostCluster fails, saying since when and the kind of failure. A Ready
// cluster that stops answering is never failed for it: it waits and says so (Ready False, reason
// Unreachable, its phase kept), its health unknown (markUnreachable), until it answers again.
func (r *Reconciler) unreachable(ctx context.Context, s *scope, server string, cause error) error {
	hc := s.hc
	msg := r.markUnreachable(ctx, hc, server, cause)
	if hc.Status.Phase == kov1alpha1.HostClusterPhaseReady {
		return reconcile.Waiting(kov1alpha1.UnreachableReason, msg, r.PollInterval)
	}
	now := r.now()
	// The annotation is tenant-writable: a start that is not a time, or lies in the future (which
	// would never give up, retrying every 2 s forever), is replaced by now.
	started, err := time.Parse(time.RFC3339, hc.Annotations[kov1alpha1.ValidationStartedAnnotation])
	if err != nil || started.After(now) {
		started = now
		if err := reconcile.PatchAnnotations(ctx, s.Workspace, hc, map[string]*string{
			kov1alpha1.ValidationStartedAnnotation: ptr.To(now.UTC().Format(time.RFC3339)),
		}); err != nil {
			return err
		}
	}
	elapsed := now.Sub(started)
	if elapsed >= r.AccessGiveUp {
		return reconcile.Stalledf(kov1alpha1.UnreachableReason, "gave up after %s: %s", r.AccessGiveUp, msg)
	}
	// Back off with the time already spent: 2 s, then about a quarter of the elapsed time, at
	// most 30 s, never past the give-up time.
	after := min(max(elapsed/4, 2*time.Second), 30*time.Second, r.AccessGiveUp-elapsed+time.Second)
	return reconcile.Waiting(kov1alpha1.UnreachableReason,
		fmt.Sprintf("%s; retrying until %s", msg, started.Add(r.AccessGiveUp).UTC().Format(time.RFC3339)), after)
}

// bootstrapFlux installs Flux on the target (or adopts a healthy Flux already there), seeds the
// Git credentials and waits until Flux's controllers are Available.
func (r *Reconciler) bootstrapFlux(ctx context.Context, s *scope) error {
	hc := s.hc
	if done(hc, kov1alpha1.FluxReadyCondition) {
		return nil
	}
	key := s.opKey("flux")
	reason := kov1alpha1.FluxInstalledReason
	switch res, state := r.installs.Poll(key); {
	case state == reconcile.OperationEnded:
		if res.Err != nil {
			// A chart that cannot be found or rendered, values it refuses: the skeleton stalls
			// the HostCluster with FluxInstallFailed (the Helm client's classification).
			return fmt.Errorf("installing Flux failed: %w", res.Err)
		}
		if res.Value.Adopted {
			reason = kov1alpha1.FluxAdoptedReason
		}
		s.Event(corev1.EventTypeNormal, kov1alpha1.ProgressingReason, res.Value.Message)
		reconcile.MarkFalse(hc, kov1alpha1.FluxReadyCondition, reason, res.Value.Message)
	case state == reconcile.OperationRunning:
		return reconcile.Waiting(kov1alpha1.WaitingReason, "Installing Flux into "+flux.Namespace, r.installs.Recheck())
	case installedThisGeneration(hc):
		reason = reconcile.GetCondition(hc, kov1alpha1.FluxReadyCondition).Reason
	default:
		// Not installed (or adopted) yet in this generation: start it; its end requeues.
		cfg := s.target.Config
		r.installs.Run(key, s.Request, func(ctx context.Context) (flux.Result, error) {
			return r.Flux.Ensure(ctx, cfg)
		})
		return reconcile.Waiting(kov1alpha1.WaitingReason, "Installing Flux into "+flux.Namespace, r.installs.Recheck())
	}

	if hc.Spec.GitCredentialsSecretRef != "" {
		src, err := s.ReferencedSecret(ctx, hc.Spec.GitCredentialsSecretRef)
		if err != nil {
			return err
		}
		if err := s.Store(ctx, gitCredentialsSecretName(hc.Spec.ClusterID), src.Type, src.Data); err != nil {
			return err
		}
		if err := flux.SeedGitCredentials(ctx, s.target.Client, src.Data); err != nil {
			return fmt.Errorf("failed to seed the Git credentials on the target: %w", err)
		}
	}
	h, err := flux.CheckHealth(ctx, s.target.Client)
	if err != nil {
		return err
	}
	hc.Status.FluxHealthy = h.Healthy
	if !h.Healthy {
		reconcile.MarkFalse(hc, kov1alpha1.FluxReadyCondition, reason, "Waiting for Flux: "+h.Message)
		return reconcile.Waiting(reason, "Waiting for Flux's controllers: "+h.Message, r.PollInterval)
	}
	msg := "Flux installed in " + flux.Namespace + " and healthy: " + h.Message
	if reason == kov1alpha1.FluxAdoptedReason {
		msg = "Flux already ran in " + flux.Namespace + " and was adopted as it is: " + h.Message
	}
	reconcile.MarkTrue(hc, kov1alpha1.FluxReadyCondition, reason, msg)
	return nil
}

// installedThisGeneration reports whether Flux was installed (or adopted) for hc's generation.
func installedThisGeneration(hc *kov1alpha1.HostCluster) bool {
	c := reconcile.GetCondition(hc, kov1alpha1.FluxReadyCondition)
	return c != nil && (c.Reason == kov1alpha1.FluxInstalledReason || c.Reason == kov1alpha1.FluxAdoptedReason) && c.ObservedGeneration == hc.Generation
}

// generateTree asks the gitops-scaffolder to generate and push the cluster's tree at
// spec.gitOpsPath, and polls the job, whose ID is kept in an annotation so a restart resumes it.
func (r *Reconciler) generateTree(ctx context.Context, s *scope) error {
	hc := s.hc
	if done(hc, kov1alpha1.GitOpsTreeGeneratedCondition) {
		return nil
	}
	if r.Scaffolder == nil {
		return reconcile.Stalled(kov1alpha1.ScaffolderNotConfiguredReason,
			"GITOPS_SCAFFOLDER_BASE_URL is not set: the platform cannot generate this cluster's GitOps tree; a platform admin must configure the gitops-scaffolder, then retry")
	}
	id, err := s.TrackedJob(ctx, func(o reconcile.Object) string { return scaffoldJobID(o.(*kov1alpha1.HostCluster)) })
	if err != nil {
		return err
	}
	if id == "" {
		slug, err := scaffolder.SlugFromPath(hc.Spec.GitOpsPath)
		if err != nil {
			return reconcile.Stalledf(kov1alpha1.InvalidSpecReason, "spec.gitOpsPath: %v", err)
		}
		req := scaffolder.Request{
			Slug:                      slug,
			Domain:                    hc.Spec.Domain,
			Region:                    hc.Spec.Region,
			KubeconfigSecretName:      kubeconfigSecretName(hc.Spec.ClusterID),
			KubeconfigSecretNamespace: s.Namespace,
			Workspace:                 s.LogicalCluster,
			OwnerUID:                  string(hc.UID),
		}
		if hc.Spec.GitCredentialsSecretRef != "" {
			req.GitCredentialsSecretRef = gitCredentialsSecretName(hc.Spec.ClusterID)
		}
		if hc.Spec.RegistryPullSecretRef != "" {
			src, err := s.ReferencedSecret(ctx, hc.Spec.RegistryPullSecretRef)
			if err != nil {
				return err
			}
			if err := s.Store(ctx, registryPullSecretName(hc.Spec.ClusterID), src.Type, src.Data); err != nil {
				return err
			}
			req.RegistryPullSecretRef = registryPullSecretName(hc.Spec.ClusterID)
		}
		job, err := r.Scaffolder.Create(ctx, req)
		if err != nil {
			return fmt.Errorf("the gitops-scaffolder refused the request: %w", err)
		}
		if err := s.RecordJob(ctx, kov1alpha1.ScaffoldJobIDAnnotation, job.ID); err != nil {
			return err
		}
		s.Event(corev1.EventTypeNormal, kov1alpha1.ProgressingReason, "Started gitops-scaffolder job "+job.ID+" for "+hc.Spec.GitOpsPath)
		return reconcile.Waiting(kov1alpha1.WaitingReason, fmt.Sprintf("gitops-scaffolder job %s is %s", job.ID, job.Status), r.PollInterval)
	}
	job, err := r.Scaffolder.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("gitops-scaffolder job %s: %w", id, err)
	}
	// The annotation is the tenant's to write: a job started for another object, or another
	// workspace, is never followed (nor is one that does not say whose it is).
	if !job.BelongsTo(s.LogicalCluster, string(hc.UID)) {
		return reconcile.Stalledf(kov1alpha1.RunNotOwnedReason,
			"annotation %s names gitops-scaffolder job %s, which was not started for this HostCluster: the platform does not follow it; set annotation %s to a new value to drop it and start a job of its own",
			kov1alpha1.ScaffoldJobIDAnnotation, id, kov1alpha1.RetryAnnotation)
	}
	switch {
	case job.Failed():
		why := job.Error
		if why == "" {
			why = job.Message
		}
		return reconcile.Stalledf(kov1alpha1.ScaffoldFailedReason, "gitops-scaffolder job %s failed: %s", id, why)
	case job.Succeeded():
		reconcile.MarkTrue(hc, kov1alpha1.GitOpsTreeGeneratedCondition, kov1alpha1.SucceededReason,
			fmt.Sprintf("gitops-scaffolder job %s pushed the tree at %s", id, hc.Spec.GitOpsPath))
		return nil
	default:
		msg := fmt.Sprintf("gitops-scaffolder job %s is %s", id, job.Status)
		if job.Message != "" {
			msg += ": " + job.Message
		}
		return reconcile.Waiting(kov1alpha1.WaitingReason, msg, r.PollInterval)
	}
}

// installKubeOpera points Flux on the target at the generated tree (GitRepository and
// Kustomization flux-system, as flux bootstrap names them) and waits for the tree's apps
// Kustomization to report Ready.
func (r *Reconciler) installKubeOpera(ctx context.Context, s *scope) error {
	hc := s.hc
	if done(hc, kov1alpha1.KubeOperaInstalledCondition) {
		return nil
	}
	sync := flux.Sync{
		URL:      hc.Spec.GitOpsRepoURL,
		Branch:   r.GitBranch,
		Path:     hc.Spec.GitOpsPath,
		Interval: time.Minute,
		Owner: map[string]string{
			kov1alpha1.HostClusterIDLabel: hc.Spec.ClusterID,
			workspaces.FingerprintLabel:   workspaces.Fingerprint(s.LogicalCluster),
			kov1alpha1.ManagedByLabel:     ControllerName,
		},
	}
	if hc.Spec.GitCredentialsSecretRef != "" {
		sync.SecretName = flux.Namespace
	}
	if err := flux.EnsureSync(ctx, s.target.Client, sync); err != nil {
		var conflict *flux.ConflictError
		if errors.As(err, &conflict) {
			// Never whose the sync is: another workspace's fingerprint and cluster ID are not this
			// tenant's business (the log has them).
			ctrl.LoggerFrom(ctx).Info("Flux on the target already syncs for another owner", "conflict", conflict.Error())
			return reconcile.Stalled(kov1alpha1.SyncConflictReason, conflict.PublicMessage())
		}
		return fmt.Errorf("failed to point Flux at the tree: %w", err)
	}
	ready, reason, message, err := flux.KustomizationReady(ctx, s.target.Client, flux.Namespace, AppsKustomization)
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Waiting(kov1alpha1.WaitingReason, "Waiting for Flux to apply the tree's apps Kustomization", r.PollInterval)
	case err != nil:
		return err
	case !ready:
		msg := "Waiting for Kustomization flux-system/apps to be Ready"
		if reason != "" {
			msg += ": " + reason
		}
		if message != "" {
			msg += ": " + message
		}
		return reconcile.Waiting(kov1alpha1.WaitingReason, reconcile.Truncate(msg), r.PollInterval)
	}
	hc.Status.KubeOperaInstalled = true
	reconcile.MarkTrue(hc, kov1alpha1.KubeOperaInstalledCondition, kov1alpha1.SucceededReason,
		"Flux syncs "+hc.Spec.GitOpsRepoURL+" at "+hc.Spec.GitOpsPath+"; Kustomization flux-system/apps is Ready")
	return nil
}

// bootstrapAdmin creates the initial super-admin once per HostCluster (docs/hostcluster.md#admin-bootstrap), only when both
// spec.adminEmail and spec.adminUsername are set. The password is generated and stored on the
// backend before authapi is called, and the stored Secret is marked once authapi answered, so no
// pass or restart ever calls it with a second password (a crash between the call and the mark
// calls it again with the same one, which changes nothing).
func (r *Reconciler) bootstrapAdmin(ctx context.Context, s *scope) error {
	hc := s.hc
	name := adminPasswordSecretName(hc.Spec.ClusterID)
	if hc.Spec.AdminEmail == "" || hc.Spec.AdminUsername == "" {
		reconcile.MarkFalse(hc, kov1alpha1.AdminBootstrappedCondition, kov1alpha1.AdminSkippedReason,
			"No admin account was created: spec.adminEmail and spec.adminUsername are unset")
		return nil
	}
	stored, err := r.storedPassword(ctx, s, name)
	if err != nil {
		return err
	}
	if stored.Annotations[AdminBootstrappedAnnotation] == "" {
		err := authapi.Bootstrap(ctx, s.target.Clientset, r.AuthAPI, authapi.Admin{
			Email: hc.Spec.AdminEmail, Username: hc.Spec.AdminUsername, Password: string(stored.Data[PasswordKey]),
		})
		if err != nil {
			if f, ok := netguard.AsForbidden(err); ok {
				return forbiddenAddress(s.target.Server, f)
			}
			if authapi.IsTransient(err) {
				return reconcile.Waiting(kov1alpha1.WaitingReason, "Waiting for authapi to create the super-admin account: "+err.Error(), r.PollInterval)
			}
			// Refused for good: the skeleton stalls the HostCluster with AdminBootstrapFailed.
			return fmt.Errorf("authapi refused to create the super-admin account: %w", err)
		}
		before := stored.DeepCopy()
		if stored.Annotations == nil {
			stored.Annotations = map[string]string{}
		}
		stored.Annotations[AdminBootstrappedAnnotation] = r.now().UTC().Format(time.RFC3339)
		if err := s.Backend.Client.Patch(ctx, stored, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to record the admin bootstrap: %w", err)
		}
		s.Event(corev1.EventTypeNormal, kov1alpha1.SucceededReason, "Created super-admin account "+hc.Spec.AdminEmail)
	}
	if err := s.Deliver(ctx, name, map[string][]byte{PasswordKey: stored.Data[PasswordKey]}); err != nil {
		return err
	}
	hc.Status.AdminPasswordSecretRef = name
	reconcile.MarkTrue(hc, kov1alpha1.AdminBootstrappedCondition, kov1alpha1.SucceededReason,
		fmt.Sprintf("Super-admin account %s created; its password is in Secret %s (key %q)", hc.Spec.AdminEmail, name, PasswordKey))
	return nil
}

// storedPassword returns the stored admin password Secret, creating it with a fresh random
// password the first time (create-first: a concurrent or repeated pass reads the same one).
func (r *Reconciler) storedPassword(ctx context.Context, s *scope, name string) (*corev1.Secret, error) {
	cur, found, err := s.Stored(ctx, name)
	if err != nil || found {
		return cur, err
	}
	password, err := authapi.GeneratePassword()
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   s.Namespace,
			Name:        name,
			Labels:      s.Labels,
			Annotations: map[string]string{workspaces.LogicalClusterAnnotation: s.LogicalCluster, syncer.OwnerAnnotation: s.Owner},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{PasswordKey: []byte(password)},
	}
	if err := s.Backend.Client.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("the admin password Secret appeared meanwhile; reading it again")
		}
		return nil, fmt.Errorf("failed to store the admin password: %w", err)
	}
	return sec, nil
}

// storeAndDeliver stores the kubeconfig in kcp-<fp> (server kept as supplied) and delivers it.
func storeAndDeliver(ctx context.Context, s *scope, name string, data map[string][]byte) error {
	return storeAndDeliverCopy(ctx, s, name, data, data)
}

// storeAndDeliverCopy stores the platform's kubeconfig in kcp-<fp> and delivers the tenant's.
func storeAndDeliverCopy(ctx context.Context, s *scope, name string, stored, delivered map[string][]byte) error {
	if err := s.StoreAndDeliverCopy(ctx, name, stored, delivered, !reconcile.IsTrue(s.hc, kov1alpha1.KubeconfigDeliveredCondition)); err != nil {
		return err
	}
	reconcile.MarkTrue(s.hc, kov1alpha1.KubeconfigDeliveredCondition, kov1alpha1.SucceededReason,
		fmt.Sprintf("Kubeconfig delivered in Secret %s (key %q)", name, KubeconfigKey))
	return nil
}

// waitInstall keeps the deletion from racing a Flux install it started.
func (r *Reconciler) waitInstall(_ context.Context, s *scope) error {
	if !r.installs.Quiet(s.opKey("flux")) {
		return reconcile.Waiting(kov1alpha1.DeletingReason, "Waiting for the running Flux install to end", r.PollInterval)
	}
	return nil
}

// removeSecrets removes the delivered kubeconfig and admin password and every Secret stored for
// this HostCluster on the backend. Nothing on the target is touched.
func (r *Reconciler) removeSecrets(ctx context.Context, s *scope) error {
	id := s.hc.Spec.ClusterID
	if err := s.Undeliver(ctx, kubeconfigSecretName(id), adminPasswordSecretName(id)); err != nil {
		return err
	}
	r.eksTokens.Forget(s.opKey("eks"))
	// The credential copy's Role and RoleBinding for the provisioner go with it (owner references).
	return s.Unstore(ctx, kubeconfigSecretName(id), adminPasswordSecretName(id), gitCredentialsSecretName(id), registryPullSecretName(id), provisioning.CredentialSecretName(id))
}

// isTimeout reports whether err is a request (or the pass) that ran out of time: a target that
// accepted the connection and then did not answer in time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// wholePercent rounds a percentage to a whole number; nil stays nil (unknown).
func wholePercent(p *float64) *int32 {
	if p == nil {
		return nil
	}
	return ptr.To(int32(math.Round(*p)))
}

// scaffoldJobID is the gitops-scaffolder job hc tracks, or "" when a new job is due: none was
// started, or the tree was generated for an earlier spec (a new gitOpsPath, domain or region),
// whose job the new one replaces.
func scaffoldJobID(hc *kov1alpha1.HostCluster) string {
	id := hc.Annotations[kov1alpha1.ScaffoldJobIDAnnotation]
	if c := reconcile.GetCondition(hc, kov1alpha1.GitOpsTreeGeneratedCondition); id != "" && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration != hc.Generation {
		return ""
	}
	return id
}

// provisioned reports whether the cluster was built and its kubeconfig stored.
func provisioned(hc *kov1alpha1.HostCluster) bool {
	return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition)
}

// provision builds a provision_vanilla or provision_eks cluster through the provisioner
// (docs/hostcluster.md#provisioning): the first pass copies the tenant's credential to the
// backend and POSTs the run, keeping its ID in an annotation so a restart polls the same run
// instead of starting another; every pass then polls it and shows its progress; a failed run fails
// the HostCluster with Terraform's error text; a succeeded one's kubeconfig is fetched once and
// stored and delivered like a connected cluster's, after which the cluster goes on like a
// connected one.
func (r *Reconciler) provision(ctx context.Context, s *scope) error {
	hc := s.hc
	if hc.Spec.Mode == kov1alpha1.HostClusterModeConnectExisting {
		return nil
	}
	// The external ID is shown from the first pass, before the credential is even looked at, so
	// the tenant can put it into their role's trust policy first.
	c, err := r.runsFor(ctx, s)
	if err != nil {
		return err
	}
	if provisioned(hc) {
		return nil
	}
	if r.Provisioner == nil {
		return reconcile.Stalledf(kov1alpha1.ProvisioningUnavailableReason,
			"mode %s needs the cluster provisioner, and the manager has no CLUSTER_PROVISIONER_BASE_URL (--cluster-provisioner-base-url): an admin sets it, or use mode connect_existing", hc.Spec.Mode)
	}
	p, err := r.runs.Follow(ctx, c, provisioning.Run{Operation: api.OperationApply, Annotation: kov1alpha1.ProvisionJobIDAnnotation, Condition: kov1alpha1.ProvisionedCondition})
	if err != nil {
		return err
	}
	if p.Status == api.StatusFailed {
		return reconcile.Stalledf(kov1alpha1.ProvisioningFailedReason, "provisioning run %s failed: %s", p.ID, orDefault(p.Message, "no message"))
	}
	raw, err := r.runs.Kubeconfig(ctx, p.ID)
	if err != nil {
		return err
	}
	delivered, err := checkProvisionedKubeconfig(hc, raw)
	if err != nil {
		return reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "provisioning run %s succeeded but its kubeconfig is refused: %v", p.ID, err)
	}
	if err := storeAndDeliverCopy(ctx, s, kubeconfigSecretName(hc.Spec.ClusterID), map[string][]byte{KubeconfigKey: raw}, map[string][]byte{KubeconfigKey: delivered}); err != nil {
		return err
	}
	hc.Status.KubeconfigSecret = kubeconfigSecretName(hc.Spec.ClusterID)
	reconcile.MarkTrue(hc, kov1alpha1.ProvisionedCondition, kov1alpha1.SucceededReason,
		fmt.Sprintf("Provisioning run %s built the cluster (%s in %s); its kubeconfig is stored", p.ID, hc.Spec.Provisioning.Topology, hc.Spec.Region))
	return nil
}

// checkProvisionedKubeconfig checks a run's kubeconfig as hostile input (it comes back from the
// tenant's cloud account): an EKS one must be exactly what the runner builds (kubeconfig.ParseEKS:
// the helper with pinned flags, which the manager never runs); any other is a tenant's
// kubeconfig (kubeconfig.ParseUntrusted: no exec at all). It returns the kubeconfig the tenant
// gets: for EKS the one `aws eks update-kubeconfig` writes (the platform's copy names a helper
// only the manager's image has, and the platform's credential), any other as it is.
func checkProvisionedKubeconfig(hc *kov1alpha1.HostCluster, raw []byte) ([]byte, error) {
	if isEKS(hc) {
		eks, err := kubeconfig.ParseEKS(raw)
		if err != nil {
			return nil, err
		}
		return kubeconfig.ForTenant(eks)
	}
	_, err := kubeconfig.ParseUntrusted(raw)
	return raw, err
}

// isEKS reports whether hc's cluster is (to be) built with the eks topology.
func isEKS(hc *kov1alpha1.HostCluster) bool {
	return hc.Spec.Provisioning != nil && hc.Spec.Provisioning.Topology == kov1alpha1.TopologyEKS
}

// runsFor is the HostCluster as its provisioning runs see it, with the AWS external ID of its
// workspace (externalid.For under the installation key), which every sts:AssumeRole for it
// carries; the ID is shown in status.awsExternalID for the tenant's trust policy.
func (r *Reconciler) runsFor(ctx context.Context, s *scope) (provisioning.Cluster, error) {
	if s.externalID == "" {
		id, err := r.ExternalIDKey.ExternalID(ctx, s.LogicalCluster)
		if err != nil {
			return provisioning.Cluster{}, fmt.Errorf("failed to derive the workspace's AWS external ID: %w", err)
		}
		s.externalID = id
	}
	s.hc.Status.AWSExternalID = s.externalID
	return provisioning.Cluster{Scope: s.Scope, HostCluster: s.hc, ExternalID: s.externalID}, nil
}

// destroy runs terraform destroy for a provisioned HostCluster deleted with deletionPolicy
// Destroy, through the same Job path, before the finalizer goes; a failed destroy keeps the
// finalizer and says why (the tenant retries with kubeopera.io/retry). With Retain (the default)
// it says the infrastructure stays.
func (r *Reconciler) destroy(ctx context.Context, s *scope) error {
	hc := s.hc
	pr := hc.Spec.Provisioning
	if hc.Spec.Mode == kov1alpha1.HostClusterModeConnectExisting || pr == nil || len(hc.Status.ProvisionRuns) == 0 {
		return nil
	}
	if pr.DeletionPolicy != kov1alpha1.DeletionPolicyDestroy {
		msg := fmt.Sprintf("Disconnected; the provisioned infrastructure (Terraform state in bucket %s) is left running: spec.provisioning.deletionPolicy is Retain",
			provisioning.StateBucket(s.LogicalCluster, hc))
		s.Event(corev1.EventTypeNormal, kov1alpha1.DeletingReason, msg)
		return nil
	}
	if reconcile.IsTrue(hc, kov1alpha1.InfrastructureDestroyedCondition) {
		return nil
	}
	if r.Provisioner == nil {
		return reconcile.Waiting(kov1alpha1.ProvisioningUnavailableReason, "deletionPolicy Destroy needs the cluster provisioner, and the manager has no CLUSTER_PROVISIONER_BASE_URL", r.PollInterval)
	}
	c, err := r.runsFor(ctx, s)
	if err != nil {
		return err
	}
	// The tenant asks again after a failed destroy: a new run.
	again := hc.Annotations[kov1alpha1.DestroyJobIDAnnotation] != "" && reconcile.RetryRequested(hc)
	if again {
		reconcile.MarkRetryHandled(hc)
	}
	p, err := r.runs.Follow(ctx, c, provisioning.Run{Operation: api.OperationDestroy, Annotation: kov1alpha1.DestroyJobIDAnnotation, Condition: kov1alpha1.InfrastructureDestroyedCondition, Again: again})
	if err != nil {
		return err
	}
	if p.Status == api.StatusFailed {
		return reconcile.Stalledf(kov1alpha1.DestroyFailedReason, "destroy run %s failed, the HostCluster stays until a destroy succeeds (set kubeopera.io/retry to try again): %s", p.ID, orDefault(p.Message, "no message"))
	}
	reconcile.MarkTrue(hc, kov1alpha1.InfrastructureDestroyedCondition, kov1alpha1.SucceededReason, fmt.Sprintf("Destroy run %s tore the infrastructure down", p.ID))
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// eksSessionName is the role session name of the manager's sts:AssumeRole for EKS tokens; it
// shows in the tenant's CloudTrail and in the assumed-role ARN their cluster maps to a user.
const eksSessionName = "kubeopera-manager"

// eksConfig returns the rest.Config of a provisioned EKS cluster from its stored kubeconfig raw,
// without ever running the exec plugin it names: kubeconfig.ParseEKS checks it is exactly the
// runner's shape and gives the server and CA; the bearer token is minted in process
// (ekstoken.WrapTransport) with the access key of the platform's copy of the tenant's credential
// (never the manager's own AWS identity or environment), assuming the credential's role with the
// workspace's external ID, at STS's regional endpoint of the kubeconfig's --region (or
// AWSEndpointURL).
func (r *Reconciler) eksConfig(ctx context.Context, s *scope, raw []byte) (*rest.Config, error) {
	eks, err := kubeconfig.ParseEKS(raw)
	if err != nil {
		return nil, reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "the provisioned cluster's kubeconfig: %v", err)
	}
	c, err := r.runsFor(ctx, s)
	if err != nil {
		return nil, err
	}
	cred, err := r.runs.StoredCredential(ctx, c)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(eks.Config)
	in := ekstoken.Inputs{
		Cluster: eks.ClusterName, Region: eks.Region, Endpoint: r.AWSEndpointURL,
		Credentials: aws.Credentials{AccessKeyID: cred.AccessKey, SecretAccessKey: cred.SecretKey, SessionToken: cred.SessionToken},
		RoleARN:     cred.RoleARN, ExternalID: c.ExternalID, SessionName: eksSessionName,
	}
	if cred.AccessKey == "" {
		// StoredCredential let it through: a role and the platform's identity to assume it with.
		in.Platform = r.PlatformAWS
	}
	cfg.WrapTransport, err = r.eksTokens.Wrap(s.opKey("eks"), in)
	if err != nil {
		return nil, reconcile.Stalledf(kov1alpha1.InvalidKubeconfigReason, "the provisioned cluster's kubeconfig: %v", err)
	}
	return cfg, nil
}
