package v1alpha1

// Condition types every kind carries. Ready summarises the object; Reconciling and Stalled follow
// kstatus and are present only while true. Each kind adds one condition per step of its own.
const (
	// ReadyCondition is True when the object's work is complete and its results delivered.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while the reconciler is still making progress (waiting on an
	// external actor, or retrying a transient error with backoff).
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when the reconciler cannot make progress without a change by the
	// user or an admin (a new spec, a retry request).
	StalledCondition = "Stalled"
	// AdmittedCondition is True once the object fits its workspace's limits, set by the platform
	// admin (how many of the kind, what they may add up to); checked before anything is created
	// for it. Objects are admitted first come, first served, and stay admitted.
	AdmittedCondition = "Admitted"
)

// Condition reasons shared by every kind. They double as event reasons so that conditions and
// events tell one story. Kinds add reasons of their own next to their step conditions.
const (
	// ProgressingReason: work is under way.
	ProgressingReason = "Progressing"
	// SucceededReason: the step (or the whole object) finished.
	SucceededReason = "Succeeded"
	// WaitingReason: waiting on an external actor (a release, a Pod, a Secret, a cloud API).
	WaitingReason = "Waiting"
	// TransientErrorReason: a step failed in a way that retrying may fix (an API server blip, a
	// registry timeout); the reconciler retries with backoff and the message says what failed.
	TransientErrorReason = "TransientError"
	// RetryRequestedReason: the user or an admin asked for a new attempt.
	RetryRequestedReason = "RetryRequested"
	// DeletingReason: the object is being deleted and its backend state removed.
	DeletingReason = "Deleting"
	// InvalidSpecReason: the spec cannot be acted upon as written.
	InvalidSpecReason = "InvalidSpec"
	// FailedReason: an external system refused a step for good (its client says retrying cannot
	// help); kinds name the step's own reason where they have one.
	FailedReason = "Failed"
	// FingerprintCollisionReason: a backend namespace belongs to another logical cluster.
	FingerprintCollisionReason = "FingerprintCollision"
	// NameConflictReason: another object (of this or another workspace) already uses a name or ID
	// this one would give its backend objects.
	NameConflictReason = "NameConflict"
	// QuotaExceededReason: the workspace's limits, set by the platform admin, do not allow this
	// object; nothing was created for it.
	QuotaExceededReason = "QuotaExceeded"
	// CredentialsMissingReason: a referenced credentials Secret or key is missing.
	CredentialsMissingReason = "CredentialsMissing"
	// ForbiddenAddressReason: an address the tenant supplied (or that a tenant-influenced answer
	// named) resolves to a class the platform never dials on a tenant's behalf (loopback,
	// link-local/cloud metadata, the backend's own ranges, kcp); the message names the class,
	// never what the address answered.
	ForbiddenAddressReason = "ForbiddenAddress"
	// ReadLimitExceededReason: a cluster the tenant pointed the platform at answered with more
	// than the platform reads (bytes, pages or items); the message names the limit.
	ReadLimitExceededReason = "ReadLimitExceeded"
)

// Annotations understood on every kind.
const (
	// RetryAnnotation: set it to a new value to retry a Failed object (as Flux's
	// reconcile.fluxcd.io/requestedAt). Tenants cannot write status; this is their way to retry.
	RetryAnnotation = "kubeopera.io/retry"
)

// Labels put on objects the platform stores or delivers.
const (
	// ManagedByLabel names the controller that manages the object.
	ManagedByLabel = "kubeopera.io/managed-by"
)
