package otc

import (
	"encoding/base64"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig builds the kubeconfig of a Ready ClusterV3 from its observed certificates. The
// provider publishes no connection details for opentelekomcloud_cce_cluster_v3 (the Terraform
// resource has no sensitive attribute and the provider maps none), so its connection Secret is
// empty; the Terraform resource copies CCE's certificate API into certificate_clusters (name,
// server, certificate_authority_data) and certificate_users (name, client_certificate_data,
// client_key_data, base64 PEM), which the provider observes as status.atProvider
// .certificateClusters / .certificateUsers (provider-opentelekomcloud d711db8,
// package/crds/cce.opentelekomcloud.m.crossplane.io_clusterv3s.yaml). The first cluster entry and
// the first user are used; ok is false while they are not observed yet. Errors never quote data.
func Kubeconfig(cluster *unstructured.Unstructured) (kubeconfig []byte, ok bool, err error) {
	clusters, _, _ := unstructured.NestedSlice(cluster.Object, "status", "atProvider", "certificateClusters")
	users, _, _ := unstructured.NestedSlice(cluster.Object, "status", "atProvider", "certificateUsers")
	if len(clusters) == 0 || len(users) == 0 {
		return nil, false, nil
	}
	c, _ := clusters[0].(map[string]any)
	u, _ := users[0].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	server := str(c, "server")
	if server == "" {
		return nil, false, nil
	}
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
	ca, err := decode("certificateClusters[0].certificateAuthorityData", str(c, "certificateAuthorityData"))
	if err != nil {
		return nil, false, err
	}
	cert, err := decode("certificateUsers[0].clientCertificateData", str(u, "clientCertificateData"))
	if err != nil {
		return nil, false, err
	}
	key, err := decode("certificateUsers[0].clientKeyData", str(u, "clientKeyData"))
	if err != nil {
		return nil, false, err
	}
	if len(cert) == 0 || len(key) == 0 {
		return nil, false, errors.New("status.atProvider.certificateUsers[0] has no client certificate and key")
	}
	name := cluster.GetName()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, false, errors.New("cannot serialise the cluster's kubeconfig")
	}
	return out, true, nil
}
