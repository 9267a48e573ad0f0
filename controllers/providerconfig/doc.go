// Package providerconfig is the ProviderConfig reconciler (docs/kubernetescluster.md): it reads
// the tenant's provider credentials from a Secret in the ProviderConfig's own namespace, checks
// their shape (internal/crossplane/otc: the key=value password form and the AK/SK JSON form), and gives
// Crossplane what it needs in the workspace's backend namespace kcp-<fp>: the credentials,
// normalized to the JSON object the OTC provider reads, and the provider's namespaced
// ProviderConfig pointing at them. KubernetesClusters name the ProviderConfig and wait until it is
// Ready.
//
// Watches: ProviderConfigs of every workspace bound to the platform.edgeconnect.eu export, and the
// KubernetesClusters naming them (a ProviderConfig being deleted waits for them). Owns: on the
// backend, the credentials Secret and the OTC ProviderConfig (both labelled with the workspace's
// fingerprint and annotated with the owner). Credentials are never logged, put in status, events
// or errors.
package providerconfig
