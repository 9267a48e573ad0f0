// Package api is the provisioner's HTTP contract (docs/provisioner.md#http-api), shared by the server
// (cmd/provisioner), its client (the HostCluster controller) and the runner's Job (the names and
// keys the Job and its Secrets carry). Every route below /api/v1 takes the shared key in header
// X-Api-Key. JSON in and out.
//
//	POST /api/v1/provisions                   CreateRequest -> 202 Provision (never blocks)
//	GET  /api/v1/provisions/{id}              -> 200 Provision (sync-on-read from the Job)
//	GET  /api/v1/provisions/{id}/logs         -> 200 text/plain (the run's pod logs)
//	GET  /api/v1/provisions/{id}/kubeconfig   -> 200 {"kubeconfig": "..."}; 409 until succeeded
//	GET  /health                              -> 200 (no key)
//
// Errors are ErrorResponse with 400 (naming the field), 401 (no detail), 404 (unknown id), 409
// (a kubeconfig not there yet; or a create for a cluster whose earlier run is still active, with
// ErrorResponse.ActiveRun naming that run: one run at a time per cluster).
package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Status of a run.
type Status string

// A run's statuses: queued (its Job has no running pod yet), planning, applying (reported by the
// runner as it goes), succeeded, failed.
const (
	StatusQueued    Status = "queued"
	StatusPlanning  Status = "planning"
	StatusApplying  Status = "applying"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
)

// Done reports whether the run has ended.
func (s Status) Done() bool { return s == StatusSucceeded || s == StatusFailed }

// Operation of a run.
type Operation string

// Operations: apply builds (or converges) the cluster; destroy tears it down (an explicit request
// only: deleting a HostCluster never destroys by default); plan only plans an apply, saves the
// plan in the state bucket (PlanKey) and reports its summary, for an apply run that applies
// exactly that plan (CreateRequest.PlanRun) once someone approved it.
const (
	OperationApply   Operation = "apply"
	OperationDestroy Operation = "destroy"
	OperationPlan    Operation = "plan"
)

// Topologies (HostCluster spec.provisioning.topology).
const (
	TopologyVanillaKubeadm = "vanilla_kubeadm"
	TopologyEKS            = "eks"
)

// Keys of the credential Secret the caller names (credentialSecretRef), as the manager copies
// the tenant's credential: an access key (AccessKey + SecretKey, optional SessionToken), and/or a
// role to assume (RoleARN, with ExternalID) — with an access key, that key assumes the role;
// without one, the runner's own default credentials do. ExternalID is the workspace's external
// ID the manager writes into the copy (never the tenant's), so every sts:AssumeRole of a run
// carries it. The runner uses the role for Terraform and for the EKS kubeconfig's exec credential.
const (
	CredentialAccessKey    = "access_key"
	CredentialSecretKey    = "secret_key"
	CredentialSessionToken = "session_token"
	CredentialRoleARN      = "role_arn"
	CredentialExternalID   = "external_id"
)

// StateBucketPrefix starts every state bucket's name: StateBucketName makes
// kubeopera-terraform-state-<terraformEnvironment>-<workspace fingerprint> of it (one per
// environment of a workspace, never shared).
const StateBucketPrefix = "kubeopera-terraform-state-"

// SecretRef names a Secret on the provisioner's cluster.
type SecretRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// CreateRequest starts a run. The provisioning fields carry HostCluster spec.provisioning's names.
type CreateRequest struct {
	ClusterID            string    `json:"clusterID"`
	Region               string    `json:"region"`
	Topology             string    `json:"topology"`
	ControlPlaneCount    *int32    `json:"controlPlaneCount,omitempty"`
	NodeCount            int32     `json:"nodeCount"`
	InstanceType         string    `json:"instanceType"`
	KubernetesVersion    string    `json:"kubernetesVersion"`
	TerraformEnvironment string    `json:"terraformEnvironment"`
	CredentialSecretRef  SecretRef `json:"credentialSecretRef"`
	// Operation is apply when empty.
	Operation Operation `json:"operation,omitempty"`
	// PlanRun (apply only) is a succeeded plan run of the same cluster, caller and module inputs:
	// the run applies exactly the plan it saved, and Terraform refuses it if the state changed
	// since (a stale plan) instead of planning again.
	PlanRun string `json:"planRun,omitempty"`
	// Workspace is the kcp logical cluster of the object the run is for, and
	// WorkspaceFingerprint its fingerprint (workspaces.Fingerprint): every cloud-side name of the
	// run is derived from the fingerprint (NamesOf). OwnerUID is that object's metadata.uid. The
	// run records all three and every Provision answer carries them, so the caller can tell a run
	// it started for an object from any other run. Required.
	Workspace            string `json:"workspace"`
	WorkspaceFingerprint string `json:"workspaceFingerprint"`
	OwnerUID             string `json:"ownerUID"`
}

// Provision is a run, as every response carries it.
type Provision struct {
	ID        string    `json:"id"`
	ClusterID string    `json:"clusterID,omitempty"`
	Operation Operation `json:"operation,omitempty"`
	// Workspace, WorkspaceFingerprint and OwnerUID are the request's: whose run this is.
	Workspace            string `json:"workspace,omitempty"`
	WorkspaceFingerprint string `json:"workspaceFingerprint,omitempty"`
	OwnerUID             string `json:"ownerUID,omitempty"`
	Status               Status `json:"status"`
	// Message says what the run is doing, or Terraform's error text when it failed.
	Message    string     `json:"message"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// InputsHash is the request's InputsHash: which module inputs the run applies (or plans).
	// Runs created before it existed have none.
	InputsHash string `json:"inputsHash,omitempty"`
	// PlanRun is the plan run whose saved plan an apply run applies (the request's).
	PlanRun string `json:"planRun,omitempty"`
	// Plan is a plan run's summary, once the runner reported it.
	Plan *PlanSummary `json:"plan,omitempty"`
}

// PlanSummary counts what a plan does to resources: created, updated in place, destroyed (a
// replacement counts once in Add and once in Destroy).
type PlanSummary struct {
	Add     int32 `json:"add"`
	Change  int32 `json:"change"`
	Destroy int32 `json:"destroy"`
}

// BelongsTo reports whether the run was started for the object ownerUID of workspace: a caller
// follows a run, and fetches its kubeconfig, only then. A run that does not say whose it is
// belongs to nobody.
func (p Provision) BelongsTo(workspace, ownerUID string) bool {
	return workspace != "" && ownerUID != "" && p.Workspace == workspace && p.OwnerUID == ownerUID
}

// KubeconfigResponse is GET /provisions/{id}/kubeconfig's answer.
type KubeconfigResponse struct {
	Kubeconfig string `json:"kubeconfig"`
}

// ErrorResponse is every error's body.
type ErrorResponse struct {
	Error string `json:"error"`
	// Field names the request field at fault (400 only).
	Field string `json:"field,omitempty"`
	// ActiveRun names the run that is still active for the same cluster when a create is
	// refused with 409: one run at a time per cluster, never two on one state.
	ActiveRun string `json:"activeRun,omitempty"`
}

// FieldError says which field of a request is wrong.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Rules shared with the HostCluster schema (apis/kubeopera/v1alpha1), so a request the schema
// admits is one the provisioner accepts.
var (
	clusterIDRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,62}$`)
	regionRe       = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	instanceTypeRe = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9]+$`)
	versionRe      = regexp.MustCompile(`^v?[0-9]+\.[0-9]+(\.[0-9]+)?$`)
	// TerraformEnvironmentPattern: with StateBucketPrefix it makes a valid S3 bucket name
	// (3-63 characters of a-z, 0-9 and hyphens, starting and ending with a letter or digit; no
	// dots, so the bucket works with virtual-hosted TLS).
	TerraformEnvironmentPattern = `^[a-z0-9]([a-z0-9-]{0,35}[a-z0-9])?$`
	terraformEnvRe              = regexp.MustCompile(TerraformEnvironmentPattern)
	dnsLabelRe                  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomainRe              = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	// logicalClusterRe is the shape of a kcp logical cluster name (github.com/kcp-dev/logicalcluster
	// v3, name.go: lowercase letters, digits and hyphens, 2 to 63 characters); system: clusters
	// hold no tenant's objects.
	logicalClusterRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,61}[a-z0-9]$`)
	// runIDRe is the shape of a run ID (10 characters a-z0-9).
	runIDRe = regexp.MustCompile(`^[a-z0-9]{10}$`)
	// uidRe is the shape of a Kubernetes object UID (an RFC 4122 UUID as the API server makes it).
	uidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// ReservedBucketSuffixes may not end an S3 bucket name (AWS, "General purpose bucket naming
// rules").
var ReservedBucketSuffixes = []string{"-s3alias", "--ol-s3", "--x-s3", "--table-s3"}

// ValidateTerraformEnvironment checks that env makes a valid S3 bucket name in StateBucketName.
func ValidateTerraformEnvironment(env string) error {
	if !terraformEnvRe.MatchString(env) {
		return &FieldError{Field: "terraformEnvironment", Message: fmt.Sprintf("must match %s (it names the S3 state bucket %s<terraformEnvironment>-<workspace fingerprint>)", TerraformEnvironmentPattern, StateBucketPrefix)}
	}
	for _, s := range ReservedBucketSuffixes {
		if strings.HasSuffix(env, s) {
			return &FieldError{Field: "terraformEnvironment", Message: fmt.Sprintf("may not end with %q (reserved by S3)", s)}
		}
	}
	return nil
}

// Validate checks every field; the first wrong one is returned as a *FieldError. Nothing that
// passes can carry anything but the documented characters into the rendered module.
func (r *CreateRequest) Validate() error {
	switch {
	case !clusterIDRe.MatchString(r.ClusterID):
		return &FieldError{"clusterID", "must match " + clusterIDRe.String()}
	case !regionRe.MatchString(r.Region):
		return &FieldError{"region", "must be an AWS region name, e.g. eu-north-1"}
	case r.Topology != TopologyVanillaKubeadm && r.Topology != TopologyEKS:
		return &FieldError{"topology", "must be vanilla_kubeadm or eks"}
	case r.Topology == TopologyEKS && r.ControlPlaneCount != nil:
		return &FieldError{"controlPlaneCount", "applies to vanilla_kubeadm only (EKS runs its own control plane)"}
	case r.ControlPlaneCount != nil && (*r.ControlPlaneCount < 1 || *r.ControlPlaneCount > 7):
		return &FieldError{"controlPlaneCount", "must be between 1 and 7"}
	case r.NodeCount < 0 || r.NodeCount > 1000:
		return &FieldError{"nodeCount", "must be between 0 and 1000"}
	case len(r.InstanceType) > 63 || !instanceTypeRe.MatchString(r.InstanceType):
		return &FieldError{"instanceType", "must be an EC2 instance type, e.g. t3.medium"}
	case !versionRe.MatchString(r.KubernetesVersion):
		return &FieldError{"kubernetesVersion", "must be a version like 1.31 or 1.31.0"}
	case len(r.CredentialSecretRef.Namespace) > 63 || !dnsLabelRe.MatchString(r.CredentialSecretRef.Namespace):
		return &FieldError{"credentialSecretRef.namespace", "must be a namespace name"}
	case len(r.CredentialSecretRef.Name) > 253 || !dnsSubdomainRe.MatchString(r.CredentialSecretRef.Name):
		return &FieldError{"credentialSecretRef.name", "must be a Secret name"}
	case r.Operation != "" && r.Operation != OperationApply && r.Operation != OperationDestroy && r.Operation != OperationPlan:
		return &FieldError{"operation", "must be apply, destroy or plan"}
	case r.PlanRun != "" && r.Operation != "" && r.Operation != OperationApply:
		return &FieldError{"planRun", "applies to apply runs only"}
	case r.PlanRun != "" && !runIDRe.MatchString(r.PlanRun):
		return &FieldError{"planRun", "must be a run ID"}
	case !logicalClusterRe.MatchString(r.Workspace):
		return &FieldError{"workspace", "must be the kcp logical cluster name of the caller's workspace"}
	case !fingerprintRe.MatchString(r.WorkspaceFingerprint):
		return &FieldError{"workspaceFingerprint", "must be the workspace's fingerprint (12 lowercase hex characters)"}
	case !uidRe.MatchString(r.OwnerUID):
		return &FieldError{"ownerUID", "must be the UID of the object the run is for"}
	}
	return ValidateTerraformEnvironment(r.TerraformEnvironment)
}

// ControlPlaneNodes is the number of control-plane nodes a vanilla_kubeadm run builds (1 when
// unset).
func (r *CreateRequest) ControlPlaneNodes() int32 {
	if r.ControlPlaneCount == nil {
		return 1
	}
	return *r.ControlPlaneCount
}

// Names and labels of a run's objects in the jobs' namespace (default kubeopera-provisioning).
// The run's ID is the Job's name suffix: provision-<id>.
const (
	DefaultJobsNamespace = "kubeopera-provisioning"
	// LabelRun is on every object of a run, valued with its ID; LabelCluster with the clusterID.
	LabelRun       = "provisioner.kubeopera.io/run"
	LabelCluster   = "provisioner.kubeopera.io/cluster-id"
	LabelOperation = "provisioner.kubeopera.io/operation"
	// LabelWorkspaceFingerprint and LabelOwnerUID record whose run it is (the request's
	// workspaceFingerprint and ownerUID), AnnotationWorkspace the workspace's logical cluster.
	LabelWorkspaceFingerprint = "provisioner.kubeopera.io/workspace-fingerprint"
	LabelOwnerUID             = "provisioner.kubeopera.io/owner-uid"
	AnnotationWorkspace       = "provisioner.kubeopera.io/workspace"
	// The runner reports progress on its outputs Secret (the one object it may write):
	// AnnotationPhase is planning, applying, waiting-for-kubeconfig, succeeded or failed, and
	// AnnotationMessage the sentence that goes with it (Terraform's error text on failure).
	AnnotationPhase   = "provisioner.kubeopera.io/phase"
	AnnotationMessage = "provisioner.kubeopera.io/message"
	// OutputsKubeconfig is the outputs Secret's key holding the cluster's kubeconfig.
	OutputsKubeconfig = "kubeconfig"
	// AnnotationPlan is a plan run's PlanSummary (JSON) on its outputs Secret, written by the
	// runner; AnnotationPlanRun (on an apply run's Job) the plan run it applies.
	AnnotationPlan    = "provisioner.kubeopera.io/plan"
	AnnotationPlanRun = "provisioner.kubeopera.io/plan-run"
)

// JobName is a run's Job.
func JobName(id string) string { return "provision-" + id }

// ModuleConfigMapName is the ConfigMap holding a run's rendered root module (a key per file).
func ModuleConfigMapName(id string) string { return "provision-" + id + "-module" }

// CredentialsSecretName is the per-run copy of the credential, mounted into the Job.
func CredentialsSecretName(id string) string { return "provision-" + id + "-credentials" }

// OutputsSecretName is the Secret the runner reports progress on and publishes the kubeconfig in.
func OutputsSecretName(id string) string { return "provision-" + id + "-outputs" }

// ServiceAccountName is the run's own identity: it may get and update its outputs Secret only.
func ServiceAccountName(id string) string { return "provision-" + id + "-runner" }

// The runner's environment, set on the Job's container.
const (
	EnvRunID                = "PROVISION_ID"
	EnvOperation            = "PROVISION_OPERATION"
	EnvTopology             = "PROVISION_TOPOLOGY"
	EnvRegion               = "AWS_REGION"
	EnvStateBucket          = "PROVISION_STATE_BUCKET"
	EnvModuleDir            = "PROVISION_MODULE_DIR"      // the rendered root module (the ConfigMap's files)
	EnvModulesDir           = "PROVISION_MODULES_DIR"     // the project's Terraform modules (terraform/modules), shipped in the runner's image
	EnvCredentialsDir       = "PROVISION_CREDENTIALS_DIR" // the credential Secret's keys as files
	EnvOutputsSecret        = "PROVISION_OUTPUTS_SECRET"
	EnvNamespace            = "POD_NAMESPACE"
	EnvWorkspaceFingerprint = "PROVISION_WORKSPACE_FINGERPRINT" // the runner uses no state bucket but that workspace's (IsStateBucketOf)
	// EnvPlanKey is the state bucket's object of a saved plan (PlanKey): where a plan run saves
	// its plan, and whence an apply run of an approved plan loads it.
	EnvPlanKey = "PROVISION_PLAN_KEY"
)

// AnnotationInputsHash (on the Job) and Provision.InputsHash are the run's InputsHash: which
// inputs of the rendered module the run applies, so a caller can tell a run for its current spec
// from a run for an earlier one without trusting anything it wrote itself.
const AnnotationInputsHash = "provisioner.kubeopera.io/inputs-hash"

// moduleInputs are the request fields the rendered root module is made of (its variables and its
// cloud-side names), in a fixed order: the credential, the operation and whose run it is are not
// among them.
type moduleInputs struct {
	ClusterID            string `json:"clusterID"`
	Region               string `json:"region"`
	Topology             string `json:"topology"`
	ControlPlaneCount    int32  `json:"controlPlaneCount"`
	NodeCount            int32  `json:"nodeCount"`
	InstanceType         string `json:"instanceType"`
	KubernetesVersion    string `json:"kubernetesVersion"`
	TerraformEnvironment string `json:"terraformEnvironment"`
	WorkspaceFingerprint string `json:"workspaceFingerprint"`
}

// InputsHash is 16 hex characters of the sha256 of the module's inputs in the request: two
// requests with one InputsHash render the same root module on the same state. controlPlaneCount
// is taken as a vanilla_kubeadm run builds it (1 when unset), eks has none.
func (r *CreateRequest) InputsHash() string {
	in := moduleInputs{
		ClusterID: r.ClusterID, Region: r.Region, Topology: r.Topology, NodeCount: r.NodeCount,
		InstanceType: r.InstanceType, KubernetesVersion: r.KubernetesVersion,
		TerraformEnvironment: r.TerraformEnvironment, WorkspaceFingerprint: r.WorkspaceFingerprint,
	}
	if r.Topology == TopologyVanillaKubeadm {
		in.ControlPlaneCount = r.ControlPlaneNodes()
	}
	raw, _ := json.Marshal(in) // a struct of strings and numbers always marshals
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}
