// Package hostcluster is the HostCluster reconciler (docs/hostcluster.md) for clusters connected
// by kubeconfig or provisioned by the cluster provisioner: Pending -> [Provisioning] ->
// ValidatingAccess -> BootstrappingFlux -> GeneratingGitOpsTree -> InstallingKubeOpera -> Ready,
// Failed when retrying cannot help, Deleting on delete.
//
// Watches: HostClusters of every workspace bound to the kubeopera.io export (the provider's shared
// wildcard cache). Owns: on the backend, in the workspace's namespace kcp-<fp>, the stored
// kubeconfig, the copied Git and registry credentials and the admin password; in the workspace,
// the delivered kubeconfig and admin password. On the target cluster it installs Flux (Helm SDK)
// and writes Flux's GitRepository and Kustomization and the Git credentials Secret, but never
// deletes anything there: deleting a HostCluster is a disconnect.
//
// Built on internal/reconcile: Reconcile reads the HostCluster and hands its steps to a
// reconcile.Pass. Steps (hostcluster_phases.go), each owning one condition: BackendNamespaceReady,
// Provisioned (runs of the provisioner: internal/provisioning), AccessValidated (also the kubeconfig delivery and the inventory and health score),
// FluxReady, GitOpsTreeGenerated, KubeOperaInstalled, AdminBootstrapped. Long work runs outside
// the reconcile workers (the Flux Helm install, in reconcile.Operations) or elsewhere (the
// scaffolder's job, tracked by the annotation kubeopera.io/scaffold-job-id), and is polled. The
// job-ID annotations are the tenant's to write: a provisioning run or scaffold job is followed
// only while the provisioner or scaffolder says it was started for this HostCluster (its
// workspace and UID, checked on every poll), else the HostCluster fails with RunNotOwned. The
// provisioning runs a workspace starts per hour are capped by a ledger in kcp-<fp> (internal/provisioning).
//
// A kubeconfig is untrusted input (internal/kubeconfig.ParseUntrusted): exec and auth-provider
// plugins, local file references and proxies are refused, so no tenant can make the manager run
// a program or read its files. A provisioned vanilla cluster's admin.conf comes from the tenant's
// cloud account and is checked the same way; a provisioned EKS cluster's kubeconfig must be
// exactly the runner's (internal/kubeconfig.ParseEKS) and its exec plugin is never run: the
// manager mints its tokens in process (eksConfig, internal/aws/ekstoken) with the tenant's own access key. Every
// sts:AssumeRole for a workspace carries the platform's external ID (internal/aws/externalid),
// shown in status.awsExternalID; the credential's own external_id is ignored. Every connection to
// a target goes through the Reconciler's Guard (internal/netguard, checked at dial time on the
// address connected to): a kubeconfig naming loopback, link-local or cloud metadata, kcp or the
// backend's own addresses fails the HostCluster with ForbiddenAddress, naming the class of the
// address, without retrying.
package hostcluster
