// Package kubernetescluster is the KubernetesCluster reconciler (docs/kubernetescluster.md): a managed Kubernetes
// cluster built by Crossplane on the backend, in the workspace's namespace kcp-<fp>, for a tenant
// who asked for it in their workspace.
//
// For spec.providerRef.type OTC it writes provider-opentelekomcloud's Crossplane v2 namespaced
// managed resources (internal/crossplane/otc): VpcV1 and SubnetV1 when the tenant gave no vpcID
// and subnetID, EIPV1 when the tenant asked for a public endpoint, ClusterV3 wired to them by
// references, and NodePoolV3 with the cluster's id and the key pair written literally (never
// references, so deleting it cannot deadlock). The node flavor is
// spec.nodeFlavor, or the catalog's best match of the referenced MachineCapabilities
// (internal/flavors). Status mirrors each resource's Synced and Ready conditions; a node pool whose
// create failed (the provider never retries it, and may call it Ready all the same) is read from
// upjet's LastAsyncOperation: a sold-out one says so with the seed's advice, and is deleted and
// created anew once the tenant changed it. The resource a step waits on is watched by name
// (reconcile.Arrivals), so its change wakes the cluster; the poll is the fallback. When the
// cluster is Ready its kubeconfig, built from the ClusterV3's observed certificates for the
// public endpoint (when asked for) or the private one, is delivered as <name>-kubeconfig, and
// status.endpoint says which.
//
// Every other provider type is built by Crossplane from one namespaced composite resource, a
// ManagedCluster (internal/crossplane/xr; its XRD and Compositions are in config/crossplane),
// selected to the Composition labelled for the provider. A type with no such Composition on the
// backend is Stalled with UnsupportedProvider naming the supported ones. ClusterReady mirrors
// the XR's Synced and Ready; the Composition writes the kubeconfig into Secret <base>-conn, which
// is delivered. The ProviderConfig must be of the same type (spec.type).
//
// Deleting tears down in a safe order, waiting for each to be gone: node pool, cluster, elastic IP,
// subnet, VPC (only those this controller created), then the delivered kubeconfig; then the
// finalizer.
//
// Backend names are kc-<namespace>-<name> (crossplane.ClusterName: no collisions across the
// workspace's namespaces; the namespace kcp-<fp> separates workspaces) plus -vpc, -subnet, -eip,
// -cluster, -pool, -conn; every object is labelled with the workspace fingerprint and the
// KubernetesCluster it belongs to.
package kubernetescluster
