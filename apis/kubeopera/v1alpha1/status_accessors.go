package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
)

// Status accessors: every kind satisfies internal/reconcile's Object interface (conditions,
// observedGeneration, retry status) and, where it has a state machine, its PhaseObject interface
// (phase and message), so one reconcile skeleton serves every kind.

// GetConditions returns the status conditions.
func (t *Tenant) GetConditions() []metav1.Condition { return t.Status.Conditions }

// SetConditions replaces the status conditions.
func (t *Tenant) SetConditions(c []metav1.Condition) { t.Status.Conditions = c }

// GetObservedGeneration returns status.observedGeneration.
func (t *Tenant) GetObservedGeneration() int64 { return t.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (t *Tenant) SetObservedGeneration(g int64) { t.Status.ObservedGeneration = g }

// GetRetryStatus returns the status' retry record.
func (t *Tenant) GetRetryStatus() *commonv1alpha1.RetryStatus { return &t.Status.RetryStatus }

// GetPhase returns status.phase.
func (t *Tenant) GetPhase() string { return string(t.Status.Phase) }

// SetPhase sets status.phase.
func (t *Tenant) SetPhase(p string) { t.Status.Phase = TenantPhase(p) }

// SetMessage sets status.message.
func (t *Tenant) SetMessage(m string) { t.Status.Message = m }

// GetConditions returns the status conditions.
func (h *HostCluster) GetConditions() []metav1.Condition { return h.Status.Conditions }

// SetConditions replaces the status conditions.
func (h *HostCluster) SetConditions(c []metav1.Condition) { h.Status.Conditions = c }

// GetObservedGeneration returns status.observedGeneration.
func (h *HostCluster) GetObservedGeneration() int64 { return h.Status.ObservedGeneration }

// SetObservedGeneration sets status.observedGeneration.
func (h *HostCluster) SetObservedGeneration(g int64) { h.Status.ObservedGeneration = g }

// GetRetryStatus returns the status' retry record.
func (h *HostCluster) GetRetryStatus() *commonv1alpha1.RetryStatus { return &h.Status.RetryStatus }

// GetPhase returns status.phase.
func (h *HostCluster) GetPhase() string { return string(h.Status.Phase) }

// SetPhase sets status.phase.
func (h *HostCluster) SetPhase(p string) { h.Status.Phase = HostClusterPhase(p) }

// SetMessage sets status.message.
func (h *HostCluster) SetMessage(m string) { h.Status.Message = m }
