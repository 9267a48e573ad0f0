package otc

import (
	"encoding/base64"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The names CCE gives the API server entries of a cluster's certificate API (GET
// /api/v3/projects/{project_id}/clusters/{cluster_id}/clustercert, which the Terraform resource
// reads with clusters.GetCert and copies name by name into certificate_clusters,
// terraform-provider-opentelekomcloud resource_opentelekomcloud_cce_cluster_v3.go Read). OTC's CCE
// API reference (opentelekomcloud-docs/cloud-container-engine, api-ref/source/apis/
// cluster_management/obtaining_cluster_certificates.rst, Tables 5 and 6): without an EIP there is
// one entry, internalCluster; with one there are more, externalCluster among them, whose
// insecure-skip-tls-verify is true. The provider's schema has no field for that flag
// (certificate_clusters holds name, server, certificate_authority_data only), so the insecure
// entry cannot be told apart but by its name; CCE's clients name the verifying external entry
// externalClusterTLSVerify (e.g. cnrancher/cce-operator pkg/controller/
// cce-cluster-config-handler.go, createCASecret: externalClusterTLSVerify when public,
// internalCluster otherwise). The provider's own acceptance test checks the private case
// (opentelekomcloud/acceptance/cce/resource_opentelekomcloud_cce_cluster_v3_test.go lines 46-49:
// one entry, internalCluster; user "user").
const (
	// CertificateClusterInternal is the private endpoint, https://<private IP>:5443, with the
	// cluster's CA.
	CertificateClusterInternal = "internalCluster"
	// CertificateClusterExternal is the public endpoint without server verification: never
	// delivered.
	CertificateClusterExternal = "externalCluster"
	// CertificateClusterExternalTLSVerify is the public endpoint, https://<EIP>:5443, with the
	// cluster's CA.
	CertificateClusterExternalTLSVerify = "externalClusterTLSVerify"
)

// Endpoint is the API server a built kubeconfig names.
type Endpoint struct {
	// Server is its URL.
	Server string
	// Public is true for the entry reachable from the internet (through the cluster's EIP),
	// false for the private one (only inside the cluster's VPC).
	Public bool
}

// Kubeconfig builds the kubeconfig of a Ready ClusterV3 from its observed certificates, naming
// the public endpoint when public is set and the private one otherwise. The provider publishes
// no connection details for opentelekomcloud_cce_cluster_v3 (the Terraform resource has no
// sensitive attribute and the provider maps none), so its connection Secret is empty; the
// Terraform resource copies CCE's certificate API into certificate_clusters (name, server,
// certificate_authority_data) and certificate_users (name, client_certificate_data,
// client_key_data, base64 PEM), which the provider observes as status.atProvider
// .certificateClusters / .certificateUsers (provider-opentelekomcloud d711db8,
// package/crds/cce.opentelekomcloud.m.crossplane.io_clusterv3s.yaml).
//
// The cluster entry is chosen by name: CertificateClusterExternalTLSVerify when public,
// CertificateClusterInternal otherwise; CertificateClusterExternal (no server verification) is
// never used, and a cluster asked to be public never gets the private entry instead. The first
// user is used. While the entry wanted or the user is not observed yet, waiting says what is
// missing (and kubeconfig is nil). Errors never quote data.
func Kubeconfig(cluster *unstructured.Unstructured, public bool) (kubeconfig []byte, ep Endpoint, waiting string, err error) {
	clusters, _, _ := unstructured.NestedSlice(cluster.Object, "status", "atProvider", "certificateClusters")
	users, _, _ := unstructured.NestedSlice(cluster.Object, "status", "atProvider", "certificateUsers")
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	want := CertificateClusterInternal
	if public {
		want = CertificateClusterExternalTLSVerify
	}
	var c map[string]any
	index := -1
	for i, e := range clusters {
		if m, _ := e.(map[string]any); str(m, "name") == want {
			c, index = m, i
			break
		}
	}
	what := fmt.Sprintf("%s %s", cluster.GetKind(), cluster.GetName())
	switch {
	case len(clusters) == 0 || len(users) == 0:
		return nil, Endpoint{}, what + " has not observed its certificates yet (status.atProvider.certificateClusters and certificateUsers)", nil
	case c == nil && public:
		return nil, Endpoint{}, fmt.Sprintf("%s reports no public endpoint yet: status.atProvider.certificateClusters has no %s entry (CCE adds it once the cluster's EIP is bound); the private endpoint is not delivered in its place", what, want), nil
	case c == nil:
		return nil, Endpoint{}, fmt.Sprintf("%s reports no private endpoint: status.atProvider.certificateClusters has no %s entry", what, want), nil
	case str(c, "server") == "":
		return nil, Endpoint{}, fmt.Sprintf("%s reports no server for its %s entry yet", what, want), nil
	}
	u, _ := users[0].(map[string]any)
	decode := func(field, v string) ([]byte, error) {
		if v == "" {
			return nil, nil
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("status.atProvider %s is not base64", field)
		}
		return b, nil
	}
	ca, err := decode(fmt.Sprintf("certificateClusters[%d].certificateAuthorityData", index), str(c, "certificateAuthorityData"))
	if err != nil {
		return nil, Endpoint{}, "", err
	}
	if public && len(ca) == 0 {
		return nil, Endpoint{}, "", fmt.Errorf("status.atProvider.certificateClusters[%d] (%s) has no certificateAuthorityData", index, want)
	}
	cert, err := decode("certificateUsers[0].clientCertificateData", str(u, "clientCertificateData"))
	if err != nil {
		return nil, Endpoint{}, "", err
	}
	key, err := decode("certificateUsers[0].clientKeyData", str(u, "clientKeyData"))
	if err != nil {
		return nil, Endpoint{}, "", err
	}
	if len(cert) == 0 || len(key) == 0 {
		return nil, Endpoint{}, "", errors.New("status.atProvider.certificateUsers[0] has no client certificate and key")
	}
	ep = Endpoint{Server: str(c, "server"), Public: public}
	name := cluster.GetName()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: ep.Server, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, Endpoint{}, "", errors.New("cannot serialise the cluster's kubeconfig")
	}
	return out, ep, "", nil
}
