package v1alpha1

// Condition types shared by every kind of this group. Ready summarises the object; Reconciling and
// Stalled follow kstatus and are present only while true; the step conditions say how far the
// reconciler got.
const (
	// ReadyCondition is True when the object's backend work is complete and its results delivered.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while the reconciler is still making progress.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when the reconciler cannot make progress without a change by the user.
	StalledCondition = "Stalled"

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

// Condition reasons. They double as event reasons so that conditions and events tell one story.
const (
	// ProgressingReason: work is under way.
	ProgressingReason = "Progressing"
	// SucceededReason: the step finished.
	SucceededReason = "Succeeded"
	// WaitingReason: waiting on an external actor (a release, a Pod, a Secret).
	WaitingReason = "Waiting"
	// FingerprintCollisionReason: a backend namespace belongs to another logical cluster.
	FingerprintCollisionReason = "FingerprintCollision"
	// InstallFailedReason: the Helm install or upgrade failed.
	InstallFailedReason = "InstallFailed"
	// ReleaseFailedReason: the Helm release reached a failed state.
	ReleaseFailedReason = "ReleaseFailed"
	// KubeconfigFailedReason: the kubeconfig could not be read, stored or delivered.
	KubeconfigFailedReason = "KubeconfigFailed"
	// CallbackFailedReason: the kubeopera-api callback failed (non-fatal).
	CallbackFailedReason = "CallbackFailed"
	// CallbackSkippedReason: no kubeopera-api base URL is configured.
	CallbackSkippedReason = "CallbackSkipped"
	// RetryRequestedReason: the user or an admin asked for a new attempt.
	RetryRequestedReason = "RetryRequested"
	// DeletingReason: the object is being deleted and its backend state removed.
	DeletingReason = "Deleting"
	// NameConflictReason: another object of the same workspace already uses the name
	// (tenantName or cloudSpaceID) that this one would give its backend objects.
	NameConflictReason = "NameConflict"
	// InvalidSpecReason: the spec cannot be acted upon as written.
	InvalidSpecReason = "InvalidSpec"
)

// Annotations understood on every kind of this group.
const (
	// RetryAnnotation: set it to a new value to retry a Failed object (as Flux's
	// reconcile.fluxcd.io/requestedAt). Tenants cannot write status; this is their way to retry.
	RetryAnnotation = "kubeopera.io/retry"
)

// Labels put on Secrets the platform stores or delivers.
const (
	// TenantIDLabel carries the Tenant's cloudSpaceID.
	TenantIDLabel = "kubeopera.io/tenant-id"
	// HostClusterIDLabel carries the HostCluster's clusterID.
	HostClusterIDLabel = "kubeopera.io/host-cluster-id"
	// ManagedByLabel names the controller that manages the object.
	ManagedByLabel = "kubeopera.io/managed-by"
)
