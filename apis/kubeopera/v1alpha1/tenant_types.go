package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// TenantFinalizer is set on every Tenant so its vCluster and delivered Secret are removed before
// the object goes away.
const TenantFinalizer = "kubeopera.io/tenant"

// TenantPhase is the Tenant's state machine position.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Failed;Deleting
type TenantPhase string

// Tenant phases, as in the Tenant Controller's state machine.
const (
	TenantPhasePending      TenantPhase = "Pending"
	TenantPhaseProvisioning TenantPhase = "Provisioning"
	TenantPhaseReady        TenantPhase = "Ready"
	TenantPhaseFailed       TenantPhase = "Failed"
	TenantPhaseDeleting     TenantPhase = "Deleting"
)

// TenantSpec is what the customer asks for: one isolated vCluster.
// +kubebuilder:validation:XValidation:rule="self.tenantName == oldSelf.tenantName",message="spec.tenantName is immutable"
// +kubebuilder:validation:XValidation:rule="self.cloudSpaceID == oldSelf.cloudSpaceID",message="spec.cloudSpaceID is immutable"
type TenantSpec struct {
	// userID is the UUID of the owning user.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	UserID string `json:"userID"`

	// tenantName is the slug that names the vCluster release (vc-<tenantName>) and its backend
	// namespace. Lower-case letters, digits and '-', 3 to 32 characters, starting and ending with a
	// letter or digit.
	// +required
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]{1,30}[a-z0-9]$`
	TenantName string `json:"tenantName"`

	// cloudSpaceID is the CloudSpace UUID in kubeopera-api; it names the kubeconfig Secret
	// tenant-<cloudSpaceID>-kubeconfig.
	// +required
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9-]{0,62}$`
	CloudSpaceID string `json:"cloudSpaceID"`

	// quota bounds the vCluster control plane's resources.
	// +required
	Quota TenantQuota `json:"quota"`
}

// TenantQuota is the vCluster control-plane pod's requests and limits. Both must be greater than
// zero: a negative quota would offset the workspace's sums against its limits.
// +kubebuilder:validation:XValidation:rule="quantity(string(self.cpu)).isGreaterThan(quantity('0'))",message="spec.quota.cpu must be greater than zero"
// +kubebuilder:validation:XValidation:rule="quantity(string(self.memory)).isGreaterThan(quantity('0'))",message="spec.quota.memory must be greater than zero"
type TenantQuota struct {
	// cpu is the control-plane CPU request and limit, e.g. "2" or "500m".
	// +required
	CPU resource.Quantity `json:"cpu"`

	// memory is the control-plane memory request and limit, e.g. "4Gi".
	// +required
	Memory resource.Quantity `json:"memory"`
}

// TenantStatus is the platform's word on the Tenant; tenants cannot write it.
type TenantStatus struct {
	// phase is the position in the state machine: Pending, Provisioning, Ready, Failed or Deleting.
	// An admin may patch it to Pending to retry a Failed Tenant.
	// +optional
	Phase TenantPhase `json:"phase,omitempty"`

	// message says in a sentence what happened last, or why the Tenant failed.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// vclusterName is the Helm release name, vc-<tenantName>.
	// +optional
	VClusterName string `json:"vclusterName,omitempty"`

	// namespace is the vCluster's host namespace on the backend cluster.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// kubeconfigSecret names the Secret in this Tenant's namespace that holds the vCluster
	// kubeconfig (key "kubeconfig").
	// +optional
	KubeconfigSecret string `json:"kubeconfigSecret,omitempty"`

	// endpoint is the server the delivered kubeconfig (key "kubeconfig") names: the vCluster's
	// address outside the backend when the platform exposes vClusters (a load balancer address
	// or https://<tenantName>-<fingerprint>.<platform domain>), else its in-cluster Service name
	// (reachable only from inside the backend cluster).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint,omitempty"`

	// The retry request last acted upon (lastHandledRetry).
	commonv1alpha1.RetryStatus `json:",inline"`

	// lastSyncedAt is when the reconciler last completed a pass.
	// +optional
	LastSyncedAt *metav1.Time `json:"lastSyncedAt,omitempty"`

	// observedGeneration is the generation the status was last computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling, Stalled and one per step.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Tenant is a KubeOpera customer's isolated vCluster.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kt,categories=kubeopera
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenantName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Kubeconfig",type=string,JSONPath=`.status.kubeconfigSecret`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired vCluster.
	// +required
	Spec TenantSpec `json:"spec"`

	// status is written by the platform only.
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&Tenant{}, &TenantList{}))
}
