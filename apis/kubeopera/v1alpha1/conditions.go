package v1alpha1

import (
	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// The shared vocabulary (apis/common/v1alpha1), named here too so this group's users need one
// import. They are the same constants, defined once.
const (
	ReadyCondition       = commonv1alpha1.ReadyCondition
	ReconcilingCondition = commonv1alpha1.ReconcilingCondition
	StalledCondition     = commonv1alpha1.StalledCondition

	ProgressingReason          = commonv1alpha1.ProgressingReason
	SucceededReason            = commonv1alpha1.SucceededReason
	WaitingReason              = commonv1alpha1.WaitingReason
	TransientErrorReason       = commonv1alpha1.TransientErrorReason
	RetryRequestedReason       = commonv1alpha1.RetryRequestedReason
	DeletingReason             = commonv1alpha1.DeletingReason
	InvalidSpecReason          = commonv1alpha1.InvalidSpecReason
	FingerprintCollisionReason = commonv1alpha1.FingerprintCollisionReason
	NameConflictReason         = commonv1alpha1.NameConflictReason
	QuotaExceededReason        = commonv1alpha1.QuotaExceededReason
	CredentialsMissingReason   = commonv1alpha1.CredentialsMissingReason
	ForbiddenAddressReason     = commonv1alpha1.ForbiddenAddressReason
	ReadLimitExceededReason    = commonv1alpha1.ReadLimitExceededReason

	RetryAnnotation = commonv1alpha1.RetryAnnotation
	ManagedByLabel  = commonv1alpha1.ManagedByLabel
)

// Tenant step conditions, in the order the reconciler takes the steps.
const (
	// AdmittedCondition is True once the object fits the workspace's limits (Tenants, HostClusters)
	// and, for a Tenant, its cloudSpaceID is claimed for this workspace.
	AdmittedCondition = commonv1alpha1.AdmittedCondition
	// BackendNamespaceReadyCondition is True once the object's backend namespaces exist and belong
	// to this workspace.
	BackendNamespaceReadyCondition = "BackendNamespaceReady"
	// ReleaseDeployedCondition is True once the vCluster Helm release reports deployed.
	ReleaseDeployedCondition = "ReleaseDeployed"
	// KubeconfigDeliveredCondition is True once the kubeconfig Secret is stored and delivered into
	// the object's workspace namespace.
	KubeconfigDeliveredCondition = "KubeconfigDelivered"
	// CallbackSucceededCondition reports the outcome of the optional kubeopera-api callback. It never
	// blocks Ready.
	CallbackSucceededCondition = "CallbackSucceeded"
)

// Reasons of this group's step conditions.
const (
	// InstallFailedReason: the Helm install or upgrade failed in a way retrying cannot fix.
	InstallFailedReason = "InstallFailed"
	// ReleaseFailedReason: the Helm release reached a failed state.
	ReleaseFailedReason = "ReleaseFailed"
	// KubeconfigFailedReason: the kubeconfig could not be read, stored or delivered.
	KubeconfigFailedReason = "KubeconfigFailed"
	// CallbackFailedReason: the kubeopera-api callback failed (non-fatal).
	CallbackFailedReason = "CallbackFailed"
	// CallbackSkippedReason: no kubeopera-api base URL is configured.
	CallbackSkippedReason = "CallbackSkipped"
)

// Labels put on Secrets the platform stores or delivers.
const (
	// TenantIDLabel carries the Tenant's cloudSpaceID.
	TenantIDLabel = "kubeopera.io/tenant-id"
	// HostClusterIDLabel carries the HostCluster's clusterID.
	HostClusterIDLabel = "kubeopera.io/host-cluster-id"
)

// HostCluster step conditions, in the order the reconciler takes the steps (BackendNamespaceReady
// and KubeconfigDelivered are shared with Tenant).
const (
	// ProvisionedCondition is True once the provisioner's run built the cluster and its
	// kubeconfig was stored (provision_vanilla, provision_eks only); while the run goes, its
	// reason is the run's status (Queued, Planning, Applying).
	ProvisionedCondition = "Provisioned"
	// InfrastructureDestroyedCondition is about a provisioned cluster being deleted with
	// spec.provisioning.deletionPolicy Destroy: the destroy run's progress, or why it failed.
	InfrastructureDestroyedCondition = "InfrastructureDestroyed"
	// AccessValidatedCondition is True once the target's API server answered with the stored
	// kubeconfig.
	AccessValidatedCondition = "AccessValidated"
	// FluxReadyCondition is True once Flux's controllers on the target are Available.
	FluxReadyCondition = "FluxReady"
	// GitOpsTreeGeneratedCondition is True once the gitops-scaffolder pushed the cluster's tree.
	GitOpsTreeGeneratedCondition = "GitOpsTreeGenerated"
	// KubeOperaInstalledCondition is True once the tree's apps Kustomization reports Ready.
	KubeOperaInstalledCondition = "KubeOperaInstalled"
	// AdminBootstrappedCondition is True once the initial super-admin was created; False with
	// AdminSkippedReason when spec.adminEmail and spec.adminUsername are unset.
	AdminBootstrappedCondition = "AdminBootstrapped"
)

// Reasons of the HostCluster's step conditions.
const (
	// InvalidKubeconfigReason: the referenced kubeconfig is empty, unparsable or refused (exec or
	// auth-provider plugins, local files, proxies).
	InvalidKubeconfigReason = "InvalidKubeconfig"
	// UnreachableReason: the target's API server did not answer within the give-up time.
	UnreachableReason = "Unreachable"
	// ProvisioningUnavailableReason: the mode needs the cluster provisioner, which is not configured.
	ProvisioningUnavailableReason = "ProvisioningUnavailable"
	// ProvisioningFailedReason: the provisioner's run failed; the message is Terraform's error.
	ProvisioningFailedReason = "ProvisioningFailed"
	// ProvisionRunLostReason: the provisioner does not know the run the HostCluster tracks.
	ProvisionRunLostReason = "ProvisionRunLost"
	// RunNotOwnedReason: a job-ID annotation (kubeopera.io/provision-job-id, destroy-job-id or
	// scaffold-job-id) names a provisioning run or gitops-scaffolder job that was not started for
	// this HostCluster (another object's, or another workspace's). It is never followed and its
	// kubeconfig never fetched; setting kubeopera.io/retry drops the annotation and starts one of
	// its own.
	RunNotOwnedReason = "RunNotOwned"
	// InvalidCredentialReason: the referenced cloud credential Secret does not hold a usable
	// credential.
	InvalidCredentialReason = "InvalidCredential"
	// ExternalIDIgnoredReason (an event): the credential Secret has an external_id, which the
	// platform does not send; every sts:AssumeRole carries the workspace's status.awsExternalID.
	ExternalIDIgnoredReason = "ExternalIDIgnored"
	// DestroyFailedReason: the destroy run failed; the finalizer stays until a retry succeeds.
	DestroyFailedReason = "DestroyFailed"
	// RunInProgressReason: another provisioning run of the cluster (the same Terraform state) is
	// still active; the next one (a destroy, a run for a changed spec) starts when it has ended.
	RunInProgressReason = "RunInProgress"
	// PlanAwaitingApprovalReason: spec.provisioning.approvePlan is manual and a plan waits for the
	// kubeopera.io/approve-plan annotation naming it.
	PlanAwaitingApprovalReason = "PlanAwaitingApproval"
	// FluxInstalledReason: Flux was installed by the platform.
	FluxInstalledReason = "FluxInstalled"
	// FluxAdoptedReason: a healthy Flux already ran on the target and was adopted as it is.
	FluxAdoptedReason = "FluxAdopted"
	// FluxInstallFailedReason: installing Flux failed in a way retrying cannot fix.
	FluxInstallFailedReason = "FluxInstallFailed"
	// ScaffolderNotConfiguredReason: GITOPS_SCAFFOLDER_BASE_URL is not set.
	ScaffolderNotConfiguredReason = "ScaffolderNotConfigured"
	// ScaffoldFailedReason: the gitops-scaffolder job failed or refused the request.
	ScaffoldFailedReason = "ScaffoldFailed"
	// SyncConflictReason: Flux on the target already syncs another repository or path for another
	// HostCluster.
	SyncConflictReason = "SyncConflict"
	// AdminSkippedReason: no admin account is created (spec.adminEmail and adminUsername unset).
	AdminSkippedReason = "AdminSkipped"
	// AdminBootstrapFailedReason: authapi refused the bootstrap call.
	AdminBootstrapFailedReason = "AdminBootstrapFailed"
)

// HostClusterManagedBy is the managed-by label value of the HostCluster's Secrets (docs/hostcluster.md#secrets).
const HostClusterManagedBy = "host-cluster-controller"
