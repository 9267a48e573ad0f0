package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// CredentialsSource is where provider credentials come from.
// +kubebuilder:validation:Enum=Secret
type CredentialsSource string

// CredentialsSourceSecret reads credentials from a Secret in the ProviderConfig's namespace.
const CredentialsSourceSecret CredentialsSource = "Secret"

// SecretKeySelector selects a key of a Secret.
type SecretKeySelector struct {
	// namespace of the Secret; must be the ProviderConfig's own namespace (defaults to it). The
	// platform never reads Secrets from another namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key in the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// ProviderCredentials says where the provider credentials are.
// +kubebuilder:validation:XValidation:rule="self.source != 'Secret' || has(self.secretRef)",message="spec.credentials.secretRef is required when source is Secret"
type ProviderCredentials struct {
	// source of the credentials; only Secret is supported.
	// +required
	Source CredentialsSource `json:"source"`

	// secretRef selects the Secret key holding the credentials.
	// +optional
	SecretRef *SecretKeySelector `json:"secretRef,omitempty"`
}

// ProviderConfigSpec holds provider credentials and configuration.
type ProviderConfigSpec struct {
	// type is the provider these credentials are for; a KubernetesCluster uses a ProviderConfig
	// of its own spec.providerRef.type only. OTC credentials are checked for the seed's two
	// formats (key=value password form, AK/SK JSON form); other providers' credentials are handed
	// to their Crossplane composition as they are.
	// +optional
	// +kubebuilder:default=OTC
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9]*$`
	Type string `json:"type,omitempty"`

	// credentials of the provider.
	// +required
	Credentials ProviderCredentials `json:"credentials"`
}

// ProviderConfigStatus is the platform's word on the ProviderConfig.
type ProviderConfigStatus struct {
	// phase is Pending, Ready, Failed or Deleting.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Ready;Failed;Deleting
	Phase string `json:"phase,omitempty"`

	// message says in a sentence what happened last.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// The retry request last acted upon (lastHandledRetry).
	commonv1alpha1.RetryStatus `json:",inline"`

	// observedGeneration is the generation the status was last computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready and CredentialsValid.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProviderConfig stores provider credentials and configuration.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=kubeopera
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.credentials.source`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.credentials.secretRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProviderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the credentials reference.
	// +required
	Spec ProviderConfigSpec `json:"spec"`

	// status is written by the platform only.
	// +optional
	Status ProviderConfigStatus `json:"status,omitempty"`
}

// ProviderConfigList is a list of ProviderConfigs.
// +kubebuilder:object:root=true
type ProviderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(knownTypes(&ProviderConfig{}, &ProviderConfigList{}))
}
