package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// HostClusterFinalizer is set on every HostCluster so its stored and delivered Secrets are removed
// before the object goes away. Disconnecting never touches the target cluster.
const HostClusterFinalizer = "kubeopera.io/hostcluster"

// HostClusterMode is how the cluster comes to exist.
// +kubebuilder:validation:Enum=connect_existing;provision_vanilla;provision_eks
type HostClusterMode string

// HostCluster modes.
const (
	HostClusterModeConnectExisting  HostClusterMode = "connect_existing"
	HostClusterModeProvisionVanilla HostClusterMode = "provision_vanilla"
	HostClusterModeProvisionEKS     HostClusterMode = "provision_eks"
)

// ProvisioningTopology is the Terraform topology of a provisioned cluster.
// +kubebuilder:validation:Enum=vanilla_kubeadm;eks
type ProvisioningTopology string

// Provisioning topologies.
const (
	TopologyVanillaKubeadm ProvisioningTopology = "vanilla_kubeadm"
	TopologyEKS            ProvisioningTopology = "eks"
)

// HostClusterPhase is the HostCluster's state machine position.
// +kubebuilder:validation:Enum=Pending;ValidatingAccess;Provisioning;BootstrappingFlux;GeneratingGitOpsTree;InstallingKubeOpera;Ready;Failed;Deleting
type HostClusterPhase string

// HostCluster phases, as in the Host Cluster Controller's state machine.
const (
	HostClusterPhasePending              HostClusterPhase = "Pending"
	HostClusterPhaseValidatingAccess     HostClusterPhase = "ValidatingAccess"
	HostClusterPhaseProvisioning         HostClusterPhase = "Provisioning"
	HostClusterPhaseBootstrappingFlux    HostClusterPhase = "BootstrappingFlux"
	HostClusterPhaseGeneratingGitOpsTree HostClusterPhase = "GeneratingGitOpsTree"
	HostClusterPhaseInstallingKubeOpera  HostClusterPhase = "InstallingKubeOpera"
	HostClusterPhaseReady                HostClusterPhase = "Ready"
	HostClusterPhaseFailed               HostClusterPhase = "Failed"
	HostClusterPhaseDeleting             HostClusterPhase = "Deleting"
)

// HostCluster annotations that carry in-flight work across manager restarts.
const (
	// ProvisionJobIDAnnotation holds the cluster-provisioner job ID.
	ProvisionJobIDAnnotation = "kubeopera.io/provision-job-id"
	// PlanJobIDAnnotation holds the ID of the plan run followed while spec.provisioning.approvePlan
	// is manual.
	PlanJobIDAnnotation = "kubeopera.io/plan-job-id"
	// DestroyJobIDAnnotation holds the ID of the destroy run of a provisioned cluster being
	// deleted with spec.provisioning.deletionPolicy Destroy.
	DestroyJobIDAnnotation = "kubeopera.io/destroy-job-id"
	// ScaffoldJobIDAnnotation holds the gitops-scaffolder job ID.
	ScaffoldJobIDAnnotation = "kubeopera.io/scaffold-job-id"
	// ValidationStartedAnnotation holds when ValidatingAccess started (RFC 3339), for the 5-minute give-up.
	ValidationStartedAnnotation = "kubeopera.io/validation-started-at"
	// ApprovePlanAnnotation is the tenant's approval of the plan awaiting it
	// (spec.provisioning.approvePlan manual): its value must be status.provisioning.plan.id, and
	// approves that plan only; any other value approves nothing.
	ApprovePlanAnnotation = "kubeopera.io/approve-plan"
)

// HostClusterSpec describes the cluster to connect or provision and how Flux is bootstrapped on it.
// +kubebuilder:validation:XValidation:rule="self.mode == 'connect_existing' ? !has(self.provisioning) : has(self.provisioning)",message="spec.provisioning is required exactly when spec.mode is provision_vanilla or provision_eks"
// +kubebuilder:validation:XValidation:rule="self.mode != 'connect_existing' || has(self.connectKubeconfigSecretRef)",message="spec.connectKubeconfigSecretRef is required when spec.mode is connect_existing"
// +kubebuilder:validation:XValidation:rule="!has(self.provisioning) || (self.mode == 'provision_vanilla' ? self.provisioning.topology == 'vanilla_kubeadm' : self.provisioning.topology == 'eks')",message="spec.provisioning.topology must be vanilla_kubeadm for provision_vanilla and eks for provision_eks"
// +kubebuilder:validation:XValidation:rule="has(self.adminEmail) == has(self.adminUsername)",message="spec.adminEmail and spec.adminUsername are set together or not at all"
// +kubebuilder:validation:XValidation:rule="self.mode == oldSelf.mode",message="spec.mode is immutable"
// +kubebuilder:validation:XValidation:rule="self.clusterID == oldSelf.clusterID",message="spec.clusterID is immutable"
// +kubebuilder:validation:XValidation:rule="self.mode == 'connect_existing' || (has(self.region) == has(oldSelf.region) && (!has(self.region) || self.region == oldSelf.region))",message="spec.region is immutable for provision_vanilla and provision_eks: the cluster and its Terraform state live in that region; build a new HostCluster for another region"
type HostClusterSpec struct {
	// clusterID is the clusters.id row this CR belongs to; it names the stored Secrets.
	// +required
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9-]{0,62}$`
	ClusterID string `json:"clusterID"`

	// mode is connect_existing, provision_vanilla or provision_eks.
	// +required
	Mode HostClusterMode `json:"mode"`

	// provider is a free string (only "aws" is implemented for provisioning); adding a provider
	// never needs a schema migration.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Provider string `json:"provider,omitempty"`

	// region is the cloud region, e.g. eu-north-1.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`

	// connectKubeconfigSecretRef names a Secret in this object's namespace whose key "kubeconfig"
	// holds the kubeconfig of the cluster to connect (mode connect_existing).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ConnectKubeconfigSecretRef string `json:"connectKubeconfigSecretRef,omitempty"`

	// provisioning describes the cluster to build; only for provision_vanilla and provision_eks.
	// +optional
	Provisioning *HostClusterProvisioning `json:"provisioning,omitempty"`

	// gitOpsRepoURL is the Git repository Flux is pointed at (http, https or ssh).
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^(https?|ssh)://[^\s]+$`
	GitOpsRepoURL string `json:"gitOpsRepoURL"`

	// gitOpsPath is the path in the repository that holds this cluster's tree, e.g.
	// fluxcd/clusters/my-cluster; its last element is the cluster's slug for the scaffolder.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(e, e == '..' || e == '.')",message="spec.gitOpsPath may not contain . or .. elements"
	GitOpsPath string `json:"gitOpsPath"`

	// gitCredentialsSecretRef names a Secret in this object's namespace with Git credentials.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	GitCredentialsSecretRef string `json:"gitCredentialsSecretRef,omitempty"`

	// domain feeds every generated service's ingress hostname.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$`
	Domain string `json:"domain"`

	// registryPullSecretRef names a Secret in this object's namespace with registry pull credentials.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RegistryPullSecretRef string `json:"registryPullSecretRef,omitempty"`

	// adminEmail of the initial super-admin; with adminUsername, or both unset to skip admin creation.
	// +optional
	// +kubebuilder:validation:MaxLength=254
	// +kubebuilder:validation:Pattern=`^[^@\s]+@[^@\s]+$`
	AdminEmail string `json:"adminEmail,omitempty"`

	// adminUsername of the initial super-admin.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	AdminUsername string `json:"adminUsername,omitempty"`
}

// HostClusterProvisioning is the cluster-provisioner request. A change of nodeCount, instanceType,
// kubernetesVersion or controlPlaneCount on a built cluster is applied by a new run on the same
// Terraform state; what cannot change in place is immutable.
// +kubebuilder:validation:XValidation:rule="self.topology == 'vanilla_kubeadm' || !has(self.controlPlaneCount)",message="spec.provisioning.controlPlaneCount applies to vanilla_kubeadm only"
// +kubebuilder:validation:XValidation:rule="self.topology == oldSelf.topology",message="spec.provisioning.topology is immutable: a cluster cannot change its topology in place; build a new HostCluster"
// +kubebuilder:validation:XValidation:rule="has(self.terraformEnvironment) == has(oldSelf.terraformEnvironment) && (!has(self.terraformEnvironment) || self.terraformEnvironment == oldSelf.terraformEnvironment)",message="spec.provisioning.terraformEnvironment is immutable: it names the state bucket every run of this cluster works on"
// +kubebuilder:validation:XValidation:rule="(has(self.controlPlaneCount) && self.controlPlaneCount > 1) == (has(oldSelf.controlPlaneCount) && oldSelf.controlPlaneCount > 1)",message="spec.provisioning.controlPlaneCount cannot change between 1 and more than 1: the API endpoint (a single node, or a Network Load Balancer in front of several) is fixed when the control plane is initialised"
type HostClusterProvisioning struct {
	// topology is vanilla_kubeadm or eks.
	// +required
	Topology ProvisioningTopology `json:"topology"`

	// controlPlaneCount is the number of control-plane nodes (vanilla_kubeadm only); more than one
	// puts a Network Load Balancer in front of the API servers.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=7
	ControlPlaneCount *int32 `json:"controlPlaneCount,omitempty"`

	// nodeCount is the number of worker nodes.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	NodeCount int32 `json:"nodeCount"`

	// instanceType is the EC2 instance type, e.g. t3.medium.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	InstanceType string `json:"instanceType"`

	// kubernetesVersion, e.g. "1.31.0".
	// +required
	// +kubebuilder:validation:Pattern=`^v?[0-9]+\.[0-9]+(\.[0-9]+)?$`
	KubernetesVersion string `json:"kubernetesVersion"`

	// credentialRef names a Secret in this object's namespace with the cloud credentials.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CredentialRef string `json:"credentialRef"`

	// terraformEnvironment names the Terraform state environment: the state lives in S3 bucket
	// kubeopera-terraform-state-<terraformEnvironment>-<workspace fingerprint> (shortened with a
	// hash when longer than S3 allows), so it must make a valid bucket name. Defaults to the
	// clusterID in lower case.
	// +optional
	// +kubebuilder:validation:MaxLength=37
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]{0,35}[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!['-s3alias', '--ol-s3', '--x-s3', '--table-s3'].exists(s, self.endsWith(s))",message="spec.provisioning.terraformEnvironment may not end with a suffix S3 reserves (-s3alias, --ol-s3, --x-s3, --table-s3)"
	TerraformEnvironment string `json:"terraformEnvironment,omitempty"`

	// deletionPolicy says what deleting the HostCluster does to the infrastructure: Retain (the
	// default) disconnects and leaves it running; Destroy runs terraform destroy first and keeps
	// the HostCluster until that succeeded.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy ProvisioningDeletionPolicy `json:"deletionPolicy,omitempty"`

	// approvePlan says whether a run applies what it plans at once (auto, the default) or stops
	// after the plan (manual): the plan's summary is shown in status.provisioning.plan and nothing
	// is applied until annotation kubeopera.io/approve-plan names that plan's id.
	// +optional
	// +kubebuilder:default=auto
	ApprovePlan PlanApproval `json:"approvePlan,omitempty"`
}

// PlanApproval is how a provisioning run's plan is approved.
// +kubebuilder:validation:Enum=auto;manual
type PlanApproval string

// Plan approvals.
const (
	PlanApprovalAuto   PlanApproval = "auto"
	PlanApprovalManual PlanApproval = "manual"
)

// ProvisioningDeletionPolicy is what deleting a provisioned HostCluster does to its infrastructure.
// +kubebuilder:validation:Enum=Retain;Destroy
type ProvisioningDeletionPolicy string

// Deletion policies.
const (
	DeletionPolicyRetain  ProvisioningDeletionPolicy = "Retain"
	DeletionPolicyDestroy ProvisioningDeletionPolicy = "Destroy"
)

// ProvisionRun is one run of the provisioner for this HostCluster.
type ProvisionRun struct {
	// id of the run (its Job is provision-<id> in the provisioner's namespace).
	ID string `json:"id"`
	// operation is apply, plan (approvePlan manual) or destroy.
	// +optional
	Operation string `json:"operation,omitempty"`
	// startedAt is when the run was requested.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// finishedAt is when the run ended.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// outcome is the run's last known status: queued, planning, applying, succeeded or failed.
	// +optional
	Outcome string `json:"outcome,omitempty"`
}

// HostClusterStatus is the platform's word on the HostCluster; tenants cannot write it.
type HostClusterStatus struct {
	// phase is the position in the state machine.
	// +optional
	Phase HostClusterPhase `json:"phase,omitempty"`

	// message says in a sentence what happened last, or why the cluster failed.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// kubeconfigSecret names the delivered Secret holding the cluster's kubeconfig.
	// +optional
	KubeconfigSecret string `json:"kubeconfigSecret,omitempty"`

	// fluxHealthy is true once Flux on the target reports healthy.
	// +optional
	FluxHealthy bool `json:"fluxHealthy,omitempty"`

	// kubeOperaInstalled is true once the platform's apps Kustomization is Ready.
	// +optional
	KubeOperaInstalled bool `json:"kubeOperaInstalled,omitempty"`

	// adminPasswordSecretRef names the delivered Secret holding the initial admin password.
	// +optional
	AdminPasswordSecretRef string `json:"adminPasswordSecretRef,omitempty"`

	// awsExternalID is the external ID the platform sends with every sts:AssumeRole it makes for
	// this workspace (provisioning runs, EKS tokens). Put it into the trust policy of the role the
	// credential's role_arn names (condition StringEquals sts:ExternalId); an external_id in the
	// credential Secret is ignored. Set for provision_vanilla and provision_eks.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	AWSExternalID string `json:"awsExternalID,omitempty"`

	// The retry request last acted upon (lastHandledRetry).
	commonv1alpha1.RetryStatus `json:",inline"`

	// lastReconciledAt is when the reconciler last completed a pass.
	// +optional
	LastReconciledAt *metav1.Time `json:"lastReconciledAt,omitempty"`

	// provisionRuns are the provisioner's runs for this cluster, oldest first (the last ten).
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	ProvisionRuns []ProvisionRun `json:"provisionRuns,omitempty"`

	// provisioning is what the provisioner built and what awaits approval (provision_* only).
	// +optional
	Provisioning *HostClusterProvisioningStatus `json:"provisioning,omitempty"`

	// inventory holds facts read from the cluster.
	// +optional
	Inventory *HostClusterInventory `json:"inventory,omitempty"`

	// observedGeneration is the generation the status was last computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling, Stalled and one per step.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// HostClusterProvisioningStatus ties the cluster to the spec it was built from, and shows a plan
// awaiting approval.
type HostClusterProvisioningStatus struct {
	// appliedInputsHash is the hash of the module inputs (spec.region, spec.provisioning's
	// topology, counts, instance type, version, Terraform environment) the last successful apply
	// run applied: a spec whose inputs hash differs is provisioned again, on the same state.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	AppliedInputsHash string `json:"appliedInputsHash,omitempty"`
	// appliedRun is the ID of that run.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	AppliedRun string `json:"appliedRun,omitempty"`
	// plan is the plan awaiting approval (spec.provisioning.approvePlan manual), or the one being
	// applied after approval.
	// +optional
	Plan *ProvisioningPlan `json:"plan,omitempty"`
}

// ProvisioningPlan is a saved Terraform plan of a plan run and its summary.
type ProvisioningPlan struct {
	// id is the plan's ID (the plan run's ID): annotate kubeopera.io/approve-plan=<id> to apply it.
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
	// inputsHash is the hash of the module inputs the plan was made for.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	InputsHash string `json:"inputsHash,omitempty"`
	// add, change and destroy count the resources the plan creates, updates in place and
	// destroys (a replacement counts as one add and one destroy).
	// +optional
	Add int32 `json:"add"`
	// +optional
	Change int32 `json:"change"`
	// +optional
	Destroy int32 `json:"destroy"`
	// plannedAt is when the plan run ended.
	// +optional
	PlannedAt *metav1.Time `json:"plannedAt,omitempty"`
	// approved is true once the annotation approved this plan and its apply run started.
	// +optional
	Approved bool `json:"approved,omitempty"`
}

// HostClusterInventory are facts read from the target cluster.
type HostClusterInventory struct {
	// provider as read from the nodes' providerID, or "unknown".
	// +optional
	Provider string `json:"provider,omitempty"`
	// region as read from the nodes' providerID.
	// +optional
	Region string `json:"region,omitempty"`
	// kubernetesVersion as reported by the API server.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// nodeCount is the number of nodes.
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`
	// readyNodeCount is the number of Ready nodes.
	// +optional
	ReadyNodeCount int32 `json:"readyNodeCount,omitempty"`
	// nodes is "<ready>/<total>", for the printer column.
	// +optional
	Nodes string `json:"nodes,omitempty"`
	// cpuPercent is the share of the nodes' allocatable CPU in use, in whole percent, as
	// usageSource says: what the nodes consume (MetricsAPI) or what running Pods request
	// (Requests); unset when unknown.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CPUPercent *int32 `json:"cpuPercent,omitempty"`
	// memoryPercent is the same for memory.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MemoryPercent *int32 `json:"memoryPercent,omitempty"`
	// usageSource says where cpuPercent and memoryPercent come from: MetricsAPI (the nodes'
	// usage from metrics.k8s.io, which the cluster serves, e.g. with metrics-server) or Requests
	// (the requests of running Pods, when the cluster does not serve the metrics API).
	// +optional
	UsageSource UsageSource `json:"usageSource,omitempty"`
	// healthScore is 0-100, computed with the fleet's penalty table (100 minus the penalties);
	// unset while the health is unknown (healthBand unknown: the cluster is unreachable).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	HealthScore *int32 `json:"healthScore,omitempty"`
	// healthBand is green (80 and above), amber (60-79), red (below 60), or unknown while the
	// cluster is unreachable (unreachableSince).
	// +optional
	// +kubebuilder:validation:Enum=green;amber;red;unknown
	HealthBand string `json:"healthBand,omitempty"`
	// healthPenalties are the penalties that applied, and why.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	HealthPenalties []HealthPenalty `json:"healthPenalties,omitempty"`
	// observedAt is when the inventory was read.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
	// unreachableSince is when the platform first failed to reach the cluster's API server
	// since it last answered; unset while it answers. While set, the health is unknown and the
	// facts above are as last read (observedAt).
	// +optional
	UnreachableSince *metav1.Time `json:"unreachableSince,omitempty"`
	// cost is the estimated monthly cost of the cluster's nodes, from their instance types and
	// the platform's price table; unset when the platform has no price table or no node has a
	// priced instance type.
	// +optional
	Cost *HostClusterCost `json:"cost,omitempty"`
}

// UsageSource is where a cluster's CPU and memory use were read from.
// +kubebuilder:validation:Enum=MetricsAPI;Requests
type UsageSource string

// Usage sources (docs/fleet.md#inventory).
const (
	// UsageSourceMetricsAPI: the nodes' usage from the metrics API (metrics.k8s.io/v1beta1
	// NodeMetrics) over their allocatable.
	UsageSourceMetricsAPI UsageSource = "MetricsAPI"
	// UsageSourceRequests: the requests of running Pods over the nodes' allocatable, when the
	// cluster does not serve the metrics API.
	UsageSourceRequests UsageSource = "Requests"
)

// HostClusterCost is the estimated monthly cost of a cluster's nodes (docs/fleet.md#cost): each
// node's hourly price, by its node.kubernetes.io/instance-type label, from the price table the
// platform admin supplies, times 730 hours.
type HostClusterCost struct {
	// monthly is the estimate for the priced nodes, a decimal with two digits, e.g. "60.74".
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]{2}$`
	Monthly string `json:"monthly"`
	// currency of the price table, e.g. USD.
	// +required
	// +kubebuilder:validation:MaxLength=8
	Currency string `json:"currency"`
	// pricedNodes is how many nodes the estimate covers.
	// +optional
	PricedNodes int32 `json:"pricedNodes,omitempty"`
	// unpricedNodes is how many nodes it leaves out: no instance-type label, or a type the price
	// table does not list. The estimate is partial when this is not zero.
	// +optional
	UnpricedNodes int32 `json:"unpricedNodes,omitempty"`
	// unpricedInstanceTypes are the instance types not in the price table, the first 8 by name.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	UnpricedInstanceTypes []string `json:"unpricedInstanceTypes,omitempty"`
}

// HealthPenalty is one penalty of the health score.
type HealthPenalty struct {
	// reason is the penalty's kind, e.g. NodeNotReady.
	Reason string `json:"reason"`
	// detail says what was found, e.g. "node worker-1 is not Ready".
	// +optional
	Detail string `json:"detail,omitempty"`
	// points subtracted from 100, e.g. "2.5".
	Points string `json:"points"`
}

// HostCluster is a Kubernetes cluster connected or provisioned for KubeOpera.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=hc,categories=kubeopera
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.inventory.kubernetesVersion`
// +kubebuilder:printcolumn:name="Nodes",type=string,JSONPath=`.status.inventory.nodes`
// +kubebuilder:printcolumn:name="Health",type=integer,JSONPath=`.status.inventory.healthScore`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`,priority=1
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.status.inventory.provider`,priority=1
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.status.inventory.region`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HostCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired cluster.
	// +required
	Spec HostClusterSpec `json:"spec"`

	// status is written by the platform only.
	// +optional
	Status HostClusterStatus `json:"status,omitempty"`
}

// HostClusterList is a list of HostClusters.
// +kubebuilder:object:root=true
type HostClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&HostCluster{}, &HostClusterList{}))
}
