// Package vcluster is what the platform knows of vCluster as a Helm chart on the backend: the
// values every Tenant's release is installed with (Values), the Secret vCluster writes its
// kubeconfig into (KubeconfigSecret), and the backend policy parameter that lets vClusters sync
// Ingresses of one class only and the control plane's own Ingress (EnsureIngressParams), and how
// vClusters are reached from outside the backend (Exposure). controllers/tenant drives the releases.
package vcluster

// KubeconfigKey is the key vCluster writes its kubeconfig under, in Secret KubeconfigSecret
// (docs/tenant.md#naming).
const KubeconfigKey = "config"

// KubeconfigSecret is the Secret vCluster writes its kubeconfig into, in its host namespace: "vc-"
// + the vCluster name, and the vCluster name is the Helm release name. For release
// vc-alice-default that is vc-vc-alice-default.
func KubeconfigSecret(release string) string { return "vc-" + release }
