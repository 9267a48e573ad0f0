// Package otc is the platform's knowledge of Open Telekom Cloud through Crossplane: it checks a
// tenant's OTC credentials and renders them as the provider's credentials Secret
// (credentials.go), and builds the Crossplane v2 objects of provider-opentelekomcloud
// (github.com/opentelekomcloud/provider-opentelekomcloud) that the KubernetesCluster controller
// writes into a workspace's backend namespace kcp-<fp>: the namespaced managed resources VpcV1,
// SubnetV1, EIPV1 (vpc.opentelekomcloud.m.crossplane.io), ClusterV3, NodePoolV3
// (cce.opentelekomcloud.m.crossplane.io), all v1alpha1, and the namespaced ProviderConfig
// (opentelekomcloud.m.crossplane.io/v1beta1) they use.
//
// Field names follow the provider's CRDs at commit d711db8cf9730d4faf355ec690ede78eeb181969
// (package/crds/*.m.crossplane.io_*.yaml); trimmed copies live in test/fixtures/crossplane/otc
// and the tests here create every built object on a real kube-apiserver carrying them.
//
// The builders are pure: no client, no I/O, no validation beyond what is documented, and they
// never invent names — every metadata.name, every OTC-side name and every referenced object's
// name is passed in by the caller. Empty optional inputs are omitted from the object, so the
// provider's (or OTC's) default applies; the few defaults applied here are the exported Default*
// constants.
//
// Things the provider's schema and code imply for the caller:
//   - Namespaced managed resources have no spec.deletionPolicy in Crossplane v2; deleting the
//     object deletes the cloud resource (unless managementPolicies says otherwise).
//   - spec.providerConfigRef defaults to {kind: ClusterProviderConfig, name: default}; the
//     builders always write {kind: ProviderConfig, name: <given>} so a workspace's objects use
//     that workspace's credentials only.
//   - A namespaced ProviderConfig's spec.credentials.secretRef.namespace is required by the
//     schema but the provider replaces it with the managed resource's namespace when it reads
//     the Secret; the builder writes the ProviderConfig's own namespace.
//   - The provider json.Unmarshals the credentials Secret key into map[string]string (keys
//     access_key, secret_key, auth_url, region, tenant_name, user_name, password, domain_name,
//     ...): the key must hold a JSON object of strings, not key=value lines.
//   - ClusterV3's subnetId is the subnet's NETWORK id (SubnetV1 status.atProvider.networkId,
//     which OTC also reports as its id); subnetIdRef resolves to exactly that.
//   - A resolved *Ref is written back by Crossplane into the literal field (e.g. vpcId); an
//     Update of the whole object without it makes Crossplane resolve it again.
//   - ClusterV3's eipRef resolves to the EIPV1's observed publicip[0].ipAddress
//     (common.ExtractEipAddress); CCE binds that address to the API server and then reports
//     external certificateClusters entries next to internalCluster (see Kubeconfig).
//   - A node pool's failed create stays failed: see ObserveNodePool.
//   - ClusterV3's client certificate and key are not connection details but
//     status.atProvider.certificateUsers[] {clientCertificateData, clientKeyData} next to
//     certificateClusters[] {certificateAuthorityData, server}: anyone who can read the
//     ClusterV3 on the backend can read cluster-admin credentials.
package otc
