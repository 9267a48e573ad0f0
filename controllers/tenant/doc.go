// Package tenant reconciles Tenants: one vCluster per Tenant, installed with the Helm SDK into the
// backend namespace kcp-<fp>-vc-<tenantName>, its kubeconfig stored in kcp-<fp> and delivered into
// the Tenant's own workspace namespace.
//
// It watches Tenants in every workspace bound to the kubeopera.io export. It owns, on the backend:
// the vCluster host namespace, the Helm release vc-<tenantName> and the Secret
// tenant-<cloudSpaceID>-kubeconfig in kcp-<fp>; in the workspace: the delivered Secret of the same
// name (owner-referenced to the Tenant).
package tenant
