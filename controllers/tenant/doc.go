// Package tenant is the Tenant reconciler (docs/tenant.md): one vCluster per Tenant, installed with the
// Helm SDK into the workspace's backend namespace kcp-<fp>-vc-<tenantName>, its kubeconfig stored
// in kcp-<fp> and delivered into the Tenant's namespace as tenant-<cloudSpaceID>-kubeconfig.
//
// Watches: Tenants of every workspace bound to the kubeopera.io export (the provider's shared
// wildcard cache). Owns: on the backend, the host namespace (Pod Security baseline), the Helm
// release (its objects in the host namespace, its records in kcp-<fp>, out of the vCluster
// syncer's reach), the stored kubeconfig Secret and the cloudSpaceID claim record; in the
// workspace, the delivered Secret.
//
// Built on internal/reconcile: Reconcile reads the Tenant and hands its steps to a reconcile.Pass.
// Steps (tenant_phases.go), each owning one condition: Admitted (workspace limits, cloudSpaceID
// claim), BackendNamespaceReady, ReleaseDeployed, KubeconfigDelivered, CallbackSucceeded.
package tenant
