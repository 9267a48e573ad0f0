// Package v1alpha1 holds what every KubeOpera API group shares: the condition and reason
// vocabulary, the retry annotation and the embeddable retry status. It is not an API group of its
// own; kubeopera.io and platform.edgeconnect.eu embed and reuse it, so every kind speaks the same
// language in `kubectl describe` and every reconciler is built on one skeleton
// (internal/reconcile).
// +kubebuilder:object:generate=true
package v1alpha1
