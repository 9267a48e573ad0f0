package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// Status accessors: every kind satisfies internal/reconcile's Object interface (conditions,
// observedGeneration, retry status) and, where it has a state machine, its PhaseObject interface
// (phase and message), so one reconcile skeleton serves every kind.

// GetConditions returns the status conditions.
func (k *KubernetesCluster) GetConditions() []metav1.Condition { return k.Status.Conditions }

// SetConditions replaces the status conditions.
func (k *KubernetesCluster) SetConditions(c []metav1.Condition) { k.Status.Conditions = c }

// GetObservedGeneration returns status.observedGeneration.
func (k *KubernetesCluster) GetObservedGeneration() int64 { return k.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (k *KubernetesCluster) SetObservedGeneration(g int64) { k.Status.ObservedGeneration = g }

// GetRetryStatus returns the status' retry record.
func (k *KubernetesCluster) GetRetryStatus() *commonv1alpha1.RetryStatus {
	return &k.Status.RetryStatus
}

// GetPhase returns status.phase.
func (k *KubernetesCluster) GetPhase() string { return string(k.Status.Phase) }

// SetPhase sets status.phase.
func (k *KubernetesCluster) SetPhase(p string) { k.Status.Phase = KubernetesClusterPhase(p) }

// SetMessage sets status.message.
func (k *KubernetesCluster) SetMessage(m string) { k.Status.Message = m }

// GetConditions returns the status conditions.
func (p *ProviderConfig) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the status conditions.
func (p *ProviderConfig) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetObservedGeneration returns status.observedGeneration.
func (p *ProviderConfig) GetObservedGeneration() int64 { return p.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (p *ProviderConfig) SetObservedGeneration(g int64) { p.Status.ObservedGeneration = g }

// GetRetryStatus returns the status' retry record.
func (p *ProviderConfig) GetRetryStatus() *commonv1alpha1.RetryStatus { return &p.Status.RetryStatus }

// GetPhase returns status.phase.
func (p *ProviderConfig) GetPhase() string { return string(p.Status.Phase) }

// SetPhase sets status.phase.
func (p *ProviderConfig) SetPhase(phase string) { p.Status.Phase = phase }

// SetMessage sets status.message.
func (p *ProviderConfig) SetMessage(m string) { p.Status.Message = m }

// GetConditions returns the status conditions.
func (m *MachineCapabilities) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the status conditions.
func (m *MachineCapabilities) SetConditions(c []metav1.Condition) { m.Status.Conditions = c }

// GetObservedGeneration returns status.observedGeneration.
func (m *MachineCapabilities) GetObservedGeneration() int64 { return m.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (m *MachineCapabilities) SetObservedGeneration(g int64) { m.Status.ObservedGeneration = g }

// GetRetryStatus returns the status' retry record.
func (m *MachineCapabilities) GetRetryStatus() *commonv1alpha1.RetryStatus {
	return &m.Status.RetryStatus
}
