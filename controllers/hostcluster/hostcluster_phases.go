package hostcluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
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
	scaffoldapi "github.com/kubeopera/kubeopera/internal/scaffolder/api"
	scaffolderclient "github.com/kubeopera/kubeopera/internal/scaffolder/client"
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
// scaffold job, a new plan.
func (r *Reconciler) start(ctx context.Context, s *scope) error {
	if s.hc.Status.Phase != kov1alpha1.HostClusterPhasePending {
		return nil
	}
	if st := s.hc.Status.Provisioning; st != nil && st.Plan != nil && !upToDateWith(s.hc, st.Plan.InputsHash) {
		// A plan not applied (or whose apply failed, e.g. stale): the new attempt plans again.
		st.Plan = nil
	}
	return reconcile.PatchAnnotations(ctx, s.Workspace, s.hc, map[string]*string{
		kov1alpha1.ValidationStartedAnnotation: nil,
		kov1alpha1.ScaffoldJobIDAnnotation:     nil,
		// A new attempt after a failed run starts a new run (an active one of this HostCluster
		// is found again through the provisioner's refusal to start a second one).
		kov1alpha1.ProvisionJobIDAnnotation: nil,
		kov1alpha1.PlanJobIDAnnotation:      nil,
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
		req, err := r.scaffoldRequest(ctx, s)
		if err != nil {
			return err
		}
		job, err := r.Scaffolder.Create(ctx, req)
		if err != nil {
			var se *scaffolderclient.Error
			if errors.As(err, &se) && se.StatusCode == http.StatusBadRequest && strings.Contains(se.Message, "SecretRef") {
				// The Secrets are the platform's copies: a scaffolder that cannot read them is the
				// platform's problem (its RBAC still settling, or --scaffolder-identity naming
				// another account), not the tenant's; say so and try again.
				return reconcile.Waiting(kov1alpha1.WaitingReason,
					fmt.Sprintf("The gitops-scaffolder cannot read this cluster's stored Secrets yet (as %s): %v", r.ScaffolderIdentity, se.Message), r.PollInterval)
			}
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
		if job.InfrastructurePushed() {
			// The first pass is in the repository, and the job waits for the sealed-secrets
			// controller that the infrastructure layer installs: Flux must apply it now, or
			// the job would wait forever. The apps layer follows with the second pass.
			if err := r.pointFlux(ctx, s); err != nil {
				return err
			}
		}
		return reconcile.Waiting(kov1alpha1.WaitingReason, msg, r.PollInterval)
	}
}

// scaffoldRequest is the scaffold of hc's tree: the stored kubeconfig and the copies of the git
// credentials and the registry pull secret, all in kcp-<fp>, which the scaffolder's identity is
// let read, each by name and nothing else (its RBAC is otherwise confined to its own namespace).
func (r *Reconciler) scaffoldRequest(ctx context.Context, s *scope) (scaffoldapi.Request, error) {
	hc := s.hc
	slug, err := scaffoldapi.SlugFromPath(hc.Spec.GitOpsPath)
	if err != nil {
		return scaffoldapi.Request{}, reconcile.Stalledf(kov1alpha1.InvalidSpecReason, "spec.gitOpsPath: %v", err)
	}
	ref := func(name string) *scaffoldapi.SecretRef {
		return &scaffoldapi.SecretRef{Namespace: s.Namespace, Name: name}
	}
	req := scaffoldapi.Request{
		ClusterID:           hc.Spec.ClusterID,
		Slug:                slug,
		Domain:              hc.Spec.Domain,
		Region:              hc.Spec.Region,
		RepoURL:             hc.Spec.GitOpsRepoURL,
		Path:                strings.Trim(hc.Spec.GitOpsPath, "/"),
		Branch:              r.GitBranch,
		KubeconfigSecretRef: *ref(kubeconfigSecretName(hc.Spec.ClusterID)),
		Workspace:           s.LogicalCluster,
		OwnerUID:            string(hc.UID),
	}
	names := []string{req.KubeconfigSecretRef.Name}
	if hc.Spec.GitCredentialsSecretRef != "" {
		// Stored when Flux was bootstrapped.
		req.GitCredentialsSecretRef = ref(gitCredentialsSecretName(hc.Spec.ClusterID))
		names = append(names, req.GitCredentialsSecretRef.Name)
	}
	if hc.Spec.RegistryPullSecretRef != "" {
		src, err := s.ReferencedSecret(ctx, hc.Spec.RegistryPullSecretRef)
		if err != nil {
			return scaffoldapi.Request{}, err
		}
		if src.Type != corev1.SecretTypeDockerConfigJson || len(src.Data[scaffoldapi.RegistryPullKey]) == 0 {
			return scaffoldapi.Request{}, reconcile.Stalledf(kov1alpha1.InvalidSpecReason,
				"spec.registryPullSecretRef: Secret %s/%s must be of type %s with key %s", hc.Namespace, src.Name, corev1.SecretTypeDockerConfigJson, scaffoldapi.RegistryPullKey)
		}
		if err := s.Store(ctx, registryPullSecretName(hc.Spec.ClusterID), src.Type, src.Data); err != nil {
			return scaffoldapi.Request{}, err
		}
		req.RegistryPullSecretRef = ref(registryPullSecretName(hc.Spec.ClusterID))
		names = append(names, req.RegistryPullSecretRef.Name)
	}
	if err := req.Validate(); err != nil {
		return scaffoldapi.Request{}, reconcile.Stalledf(kov1alpha1.InvalidSpecReason, "the cluster's tree cannot be scaffolded: %v", err)
	}
	if _, err := s.GrantRead(ctx, r.ScaffolderIdentity, scaffolderGrantName(hc.Spec.ClusterID), names...); err != nil {
		return scaffoldapi.Request{}, fmt.Errorf("failed to let the gitops-scaffolder read the cluster's Secrets: %w", err)
	}
	return req, nil
}

// pointFlux points Flux on the target at the cluster's tree: GitRepository and Kustomization
// flux-system (as flux bootstrap names them). A target already synced for another owner is
// never taken over: SyncConflict.
func (r *Reconciler) pointFlux(ctx context.Context, s *scope) error {
	hc := s.hc
	sync := flux.Sync{
		URL:      hc.Spec.GitOpsRepoURL,
		Branch:   r.GitBranch,
		Path:     hc.Spec.GitOpsPath,
		Interval: r.SyncInterval,
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
	return nil
}

// installKubeOpera points Flux on the target at the generated tree (GitRepository and
// Kustomization flux-system, as flux bootstrap names them) and waits for the tree's apps
// Kustomization to report Ready.
func (r *Reconciler) installKubeOpera(ctx context.Context, s *scope) error {
	hc := s.hc
	if done(hc, kov1alpha1.KubeOperaInstalledCondition) {
		return nil
	}
	if err := r.pointFlux(ctx, s); err != nil {
		return err
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

// provisioningStatus is hc's status.provisioning, made when missing.
func provisioningStatus(hc *kov1alpha1.HostCluster) *kov1alpha1.HostClusterProvisioningStatus {
	if hc.Status.Provisioning == nil {
		hc.Status.Provisioning = &kov1alpha1.HostClusterProvisioningStatus{}
	}
	return hc.Status.Provisioning
}

// upToDate reports whether the cluster was built from the module inputs of the current spec
// (want): Provisioned is tied to the inputs its run applied (status.provisioning.appliedInputsHash),
// so a changed nodeCount provisions again while a changed domain does not. A cluster built
// before the hash was recorded is taken as built from its current spec (and recorded so).
func upToDate(hc *kov1alpha1.HostCluster, want string) bool {
	if !provisioned(hc) {
		return false
	}
	st := provisioningStatus(hc)
	if st.AppliedInputsHash == "" {
		st.AppliedInputsHash = want
	}
	return st.AppliedInputsHash == want
}

// upToDateWith reports whether the cluster was built from module inputs hash.
func upToDateWith(hc *kov1alpha1.HostCluster, hash string) bool {
	st := hc.Status.Provisioning
	return provisioned(hc) && st != nil && st.AppliedInputsHash == hash
}

// approvedPlan is the plan to apply when spec.provisioning.approvePlan is manual
// (docs/hostcluster.md#plan-approval): a plan run for the current spec is started and followed
// (annotation kubeopera.io/plan-job-id), its summary shown in status.provisioning.plan, and the
// step waits (PlanAwaitingApproval) until annotation kubeopera.io/approve-plan names exactly that
// plan. The annotation is the tenant's and hostile: only the ID of the plan this HostCluster's
// status shows approves anything, and the provisioner applies a plan only for the same cluster,
// caller and module inputs. A plan for an earlier spec is dropped.
func (r *Reconciler) approvedPlan(ctx context.Context, s *scope, c provisioning.Cluster, want string) (string, error) {
	hc := s.hc
	st := provisioningStatus(hc)
	if st.Plan != nil && st.Plan.InputsHash != want {
		st.Plan = nil
	}
	if st.Plan == nil {
		p, err := r.runs.Follow(ctx, c, provisioning.Run{Operation: api.OperationPlan, Annotation: kov1alpha1.PlanJobIDAnnotation, Condition: kov1alpha1.ProvisionedCondition, Want: want})
		if err != nil {
			return "", err
		}
		if p.Status == api.StatusFailed {
			return "", reconcile.Stalledf(kov1alpha1.ProvisioningFailedReason, "plan run %s failed: %s", p.ID, orDefault(p.Message, "no message"))
		}
		if p.Plan == nil {
			return "", fmt.Errorf("plan run %s succeeded without a plan summary", p.ID)
		}
		st.Plan = &kov1alpha1.ProvisioningPlan{ID: p.ID, InputsHash: orDefault(p.InputsHash, want), Add: p.Plan.Add, Change: p.Plan.Change, Destroy: p.Plan.Destroy}
		if p.FinishedAt != nil {
			st.Plan.PlannedAt = &metav1.Time{Time: *p.FinishedAt}
		}
		s.Event(corev1.EventTypeNormal, kov1alpha1.PlanAwaitingApprovalReason, fmt.Sprintf("Plan %s: %d to add, %d to change, %d to destroy; it waits for approval", p.ID, p.Plan.Add, p.Plan.Change, p.Plan.Destroy))
	}
	plan := st.Plan
	if plan.Approved {
		return plan.ID, nil
	}
	approval := hc.Annotations[kov1alpha1.ApprovePlanAnnotation]
	if approval == plan.ID {
		plan.Approved = true
		s.Event(corev1.EventTypeNormal, kov1alpha1.ProgressingReason, "Plan "+plan.ID+" approved; applying exactly it")
		return plan.ID, nil
	}
	msg := fmt.Sprintf("Plan %s waits for approval: %d to add, %d to change, %d to destroy. To apply exactly this plan: kubectl -n %s annotate hostcluster %s %s=%s --overwrite",
		plan.ID, plan.Add, plan.Change, plan.Destroy, hc.Namespace, hc.Name, kov1alpha1.ApprovePlanAnnotation, plan.ID)
	if approval != "" {
		// Whatever it says is not repeated.
		msg = fmt.Sprintf("Annotation %s names another plan than the one awaiting approval, and approves nothing. %s", kov1alpha1.ApprovePlanAnnotation, msg)
	}
	reconcile.MarkFalse(hc, kov1alpha1.ProvisionedCondition, kov1alpha1.PlanAwaitingApprovalReason, msg)
	// A person answers: the annotation's change wakes the HostCluster up; no fast polling.
	return "", reconcile.Waiting(kov1alpha1.PlanAwaitingApprovalReason, msg, r.InventoryInterval)
}

// provision builds a provision_vanilla or provision_eks cluster through the provisioner
// (docs/hostcluster.md#provisioning), and builds it again when the module inputs of its spec
// changed (day-2: a new run on the same state): the first pass copies the tenant's credential to
// the backend and POSTs the run, keeping its ID in an annotation so a restart polls the same run
// instead of starting another; every pass then polls it and shows its progress; a failed run fails
// the HostCluster with Terraform's error text; a succeeded one's kubeconfig is fetched and stored
// and delivered like a connected cluster's (refreshed when a later run changed it), after which
// the cluster goes on like a connected one. One run at a time: a run for an earlier spec still
// running is waited for.
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
	want := provisioning.InputsHash(c)
	if upToDate(hc, want) {
		if cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition); cond.ObservedGeneration != hc.Generation {
			// A change elsewhere in the spec: what was built is still what this generation asks for.
			reconcile.MarkTrue(hc, kov1alpha1.ProvisionedCondition, cond.Reason, cond.Message)
		}
		return nil
	}
	if r.Provisioner == nil {
		return reconcile.Stalledf(kov1alpha1.ProvisioningUnavailableReason,
			"mode %s needs the cluster provisioner, and the manager has no CLUSTER_PROVISIONER_BASE_URL (--cluster-provisioner-base-url): an admin sets it, or use mode connect_existing", hc.Spec.Mode)
	}
	run := provisioning.Run{Operation: api.OperationApply, Annotation: kov1alpha1.ProvisionJobIDAnnotation, Condition: kov1alpha1.ProvisionedCondition, Want: want}
	if hc.Spec.Provisioning.ApprovePlan == kov1alpha1.PlanApprovalManual {
		if run.PlanRun, err = r.approvedPlan(ctx, s, c, want); err != nil {
			return err
		}
	} else if st := hc.Status.Provisioning; st != nil && st.Plan != nil && !st.Plan.Approved {
		// approvePlan back to auto: the plan awaiting approval is not what is applied.
		st.Plan = nil
	}
	p, err := r.runs.Follow(ctx, c, run)
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
	st := provisioningStatus(hc)
	again := st.AppliedRun != "" && st.AppliedRun != p.ID
	st.AppliedInputsHash, st.AppliedRun = orDefault(p.InputsHash, want), p.ID
	pr := hc.Spec.Provisioning
	msg := fmt.Sprintf("Provisioning run %s built the cluster (%s in %s, %d nodes); its kubeconfig is stored", p.ID, pr.Topology, hc.Spec.Region, pr.NodeCount)
	if again {
		msg = fmt.Sprintf("Provisioning run %s applied the changed spec to the cluster (%s in %s, %d nodes) on the same Terraform state; its kubeconfig is stored", p.ID, pr.Topology, hc.Spec.Region, pr.NodeCount)
	}
	reconcile.MarkTrue(hc, kov1alpha1.ProvisionedCondition, kov1alpha1.SucceededReason, msg)
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
	if hc.Spec.Mode == kov1alpha1.HostClusterModeConnectExisting || pr == nil ||
		(len(hc.Status.ProvisionRuns) == 0 && hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation] == "" && hc.Annotations[kov1alpha1.PlanJobIDAnnotation] == "") {
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
	// Never two runs on one state: an apply still running (the first build, or a day-2 change)
	// ends before the destroy starts; the provisioner refuses a second run besides.
	if hc.Annotations[kov1alpha1.DestroyJobIDAnnotation] == "" {
		for _, annotation := range []string{kov1alpha1.ProvisionJobIDAnnotation, kov1alpha1.PlanJobIDAnnotation} {
			if p, running, err := r.runs.Active(ctx, c, annotation); err != nil {
				return err
			} else if running {
				msg := fmt.Sprintf("Waiting for provisioning run %s (%s, %s) to end before the destroy run starts: never two runs on one Terraform state", p.ID, p.Operation, p.Status)
				reconcile.MarkFalse(hc, kov1alpha1.InfrastructureDestroyedCondition, kov1alpha1.RunInProgressReason, msg)
				return reconcile.Waiting(kov1alpha1.RunInProgressReason, msg, r.PollInterval)
			}
		}
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
