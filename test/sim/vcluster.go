package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	chartutil "helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Keys of the kubeconfig Secret vCluster writes (loft-sh/vcluster v0.21.2,
// pkg/util/kubeconfig/kubeconfig.go lines 28-35).
const (
	VClusterSecretPrefix      = "vc-"
	VClusterKubeconfigKey     = "config"
	VClusterCADataKey         = "certificate-authority"
	VClusterCertificateKey    = "client-certificate"
	VClusterCertificateKeyKey = "client-key"
	VClusterTokenKey          = "token"
)

// releaseWait bounds how long VClusterWritesKubeconfig waits for the release to be deployed.
const releaseWait = 2 * time.Minute

// VClusterKubeconfig is what VClusterWritesKubeconfig wrote.
type VClusterKubeconfig struct {
	// Secret is the Secret as written: vc-<vCluster name> in the host namespace.
	Secret *corev1.Secret
	// ClientKeyPEM is the admin client key in the kubeconfig: the secret material that must never
	// show up in logs, events, status or metrics.
	ClientKeyPEM []byte
}

// VClusterKubeconfigSecretName is the Secret vCluster writes its kubeconfig into: "vc-" + the
// vCluster's name, which is its Helm release name (the chart sets VCLUSTER_NAME to
// {{ .Release.Name }}). Release vc-alice-default -> Secret vc-vc-alice-default.
func VClusterKubeconfigSecretName(release string) string {
	return VClusterSecretPrefix + release
}

// VClusterWritesKubeconfig plays, for the bench (which cannot run hundreds of real vClusters on
// one machine) and for `make run` not run as root (VClusterPods needs root), the vCluster control
// plane of Helm release `release` in `namespace` once its Pod is up; every suite runs the real
// vCluster with VClusterPods (there is no kubelet here, so no Pod runs): it writes the
// kubeconfig Secret exactly as loft-sh/vcluster v0.21.2 does, reading its configuration where
// vCluster reads it: the release's values, which the chart renders into Secret
// vc-config-<release> (chart/templates/config-secret.yaml). From vCluster's source at v0.21.2:
//
//   - Name and namespace: kubeconfig.GetDefaultSecretName(translate.VClusterName) = "vc-" +
//     VCLUSTER_NAME, in the control plane's namespace (pkg/setup/controllers.go lines 271-272;
//     translate.VClusterName = vConfig.Name, pkg/setup/config.go line 28; VCLUSTER_NAME is
//     {{ .Release.Name }}, chart/templates/statefulset.yaml lines 191-192).
//   - Content: type Opaque; data "config" (the kubeconfig, clientcmd.Write), "certificate-authority",
//     "client-certificate", "client-key" and "token" (empty with client certificates); no labels;
//     written with CreateOrPatch (pkg/util/kubeconfig/kubeconfig.go lines 37-100).
//   - Owner: with experimental.syncSettings.setOwner (chart default true) the Secret is
//     owner-referenced, controller=false, to the vCluster's Service, named like the release
//     (pkg/setup/config.go lines 192-227, pkg/util/translate/translate.go lines 152-176).
//   - Server: https://localhost:<controlPlane.proxy.port, default 8443>
//     (pkg/setup/controller_context.go line 243); when exportKubeConfig.server is set, every
//     cluster becomes {server: that, certificate-authority-data kept, insecure-skip-tls-verify:
//     exportKubeConfig.insecure} (pkg/setup/controllers.go lines 213-228).
//   - The kubeconfig is the distro's admin kubeconfig with files inlined
//     (pkg/setup/controller_context.go lines 223-271): k3s (the seed's distro) writes cluster
//     "local", user "user", context "Default" with namespace "default" (k3s-io/k3s
//     pkg/daemons/control/deps/deps.go, kubeconfigTemplate) at /data/server/cred/admin.kubeconfig
//     (vCluster starts k3s with --data-dir=/data, pkg/k3s/k3s.go line 33; pkg/config/config.go
//     lines 56-65); the k8s distro (the default when none is
//     enabled, config/config.go lines 249-259) writes cluster "kubernetes", user
//     "kubernetes-admin", context "kubernetes-admin@kubernetes" (pkg/certs/kubeconfig.go line 284,
//     pkg/certs/ensure.go line 181, pkg/certs/kubeconfig_util.go line 26).
//
// Options this actor does not play (exportKubeConfig.context, .serviceAccount, .secret, the k0s
// distro) are refused with an error rather than ignored, so it never silently differs from vCluster.
func VClusterWritesKubeconfig(ctx context.Context, backend *rest.Config, namespace, release string) (*VClusterKubeconfig, error) {
	cs, err := kubernetes.NewForConfig(backend)
	if err != nil {
		return nil, err
	}
	// vCluster's Pod only runs once the chart's StatefulSet exists, and it reads its configuration
	// from Secret vc-config-<release> (key config.yaml: every value of the release, the chart's
	// defaults included; chart/templates/config-secret.yaml), mounted at /var/vcluster
	// (chart/templates/statefulset.yaml, volume vcluster-config), as `vcluster start --config
	// /var/vcluster/config.yaml`. Helm creates the StatefulSet after the Secret and the Service
	// (helm v4.2.4 pkg/release/v1/util/kind_sorter.go InstallOrder, one kind at a time:
	// pkg/kube/client.go batchPerform). So wait for both, up to releaseWait, as the Pod would
	// come up, and read the configuration where vCluster reads it (Helm's release records are no
	// source: they may live in another namespace).
	var config *corev1.Secret
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, releaseWait, true, func(ctx context.Context) (bool, error) {
		if _, err := cs.AppsV1().StatefulSets(namespace).Get(ctx, release, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		config, err = cs.CoreV1().Secrets(namespace).Get(ctx, "vc-config-"+release, metav1.GetOptions{})
		return err == nil && len(config.Data["config.yaml"]) > 0, nil
	})
	if err != nil || config == nil {
		return nil, fmt.Errorf("vCluster %s has no StatefulSet and config Secret vc-config-%s in %s after %s (its Pod only runs once the chart is installed)", release, release, namespace, releaseWait)
	}
	values, err := chartutil.ReadValues(config.Data["config.yaml"])
	if err != nil {
		return nil, fmt.Errorf("failed to read the configuration of vCluster %s/%s: %w", namespace, release, err)
	}
	str := func(path string) string { v, _ := values.PathValue(path); s, _ := v.(string); return s }
	flag := func(path string, def bool) bool {
		v, err := values.PathValue(path)
		if err != nil {
			return def
		}
		switch b := v.(type) {
		case bool:
			return b
		case string:
			return b == "true"
		}
		return def
	}
	for _, path := range []string{"exportKubeConfig.context", "exportKubeConfig.serviceAccount.name", "exportKubeConfig.secret.name"} {
		if str(path) != "" {
			return nil, fmt.Errorf("release %s/%s sets %s, which this vCluster actor does not play", namespace, release, path)
		}
	}
	if flag("controlPlane.distro.k0s.enabled", false) {
		return nil, fmt.Errorf("release %s/%s runs the k0s distro, which this vCluster actor does not play", namespace, release)
	}
	clusterName, userName, contextName, contextNamespace := "kubernetes", "kubernetes-admin", "kubernetes-admin@kubernetes", ""
	clientCN := "kubernetes-admin"
	if flag("controlPlane.distro.k3s.enabled", false) {
		clusterName, userName, contextName, contextNamespace = "local", "user", "Default", "default"
		clientCN = "system:admin"
	}
	port := 8443
	if v, err := values.PathValue("controlPlane.proxy.port"); err == nil {
		switch p := v.(type) {
		case float64:
			port = int(p)
		case int:
			port = p
		case int64:
			port = int(p)
		}
	}

	// vCluster fails to start when it cannot find its Service to own what it writes.
	var owners []metav1.OwnerReference
	if flag("experimental.syncSettings.setOwner", true) {
		svc, err := cs.CoreV1().Services(namespace).Get(ctx, release, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("vCluster %s cannot start without its Service: %w", release, err)
		}
		owners = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: ptr.To(false)}}
	}

	ca, cert, key, err := adminCredentials(clientCN)
	if err != nil {
		return nil, err
	}
	cluster := &clientcmdapi.Cluster{Server: fmt.Sprintf("https://localhost:%d", port), CertificateAuthorityData: ca}
	if server := str("exportKubeConfig.server"); server != "" {
		cluster = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, InsecureSkipTLSVerify: flag("exportKubeConfig.insecure", false)}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[clusterName] = cluster
	kc.AuthInfos[userName] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	kc.Contexts[contextName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: userName, Namespace: contextNamespace}
	kc.CurrentContext = contextName
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, err
	}

	name := VClusterKubeconfigSecretName(release)
	data := map[string][]byte{
		VClusterKubeconfigKey:     raw,
		VClusterCADataKey:         ca,
		VClusterCertificateKey:    cert,
		VClusterCertificateKeyKey: key,
		VClusterTokenKey:          []byte(""),
	}
	secrets := cs.CoreV1().Secrets(namespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, OwnerReferences: owners},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		s, err = secrets.Create(ctx, s, metav1.CreateOptions{})
	case err == nil:
		s.Type = corev1.SecretTypeOpaque
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range data {
			s.Data[k] = v
		}
		if owners != nil {
			s.OwnerReferences = owners
		}
		s, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("vCluster failed to write Secret %s/%s: %w", namespace, name, err)
	}
	return &VClusterKubeconfig{Secret: s, ClientKeyPEM: key}, nil
}

// adminCredentials makes what the distro generates at first start: a server CA (the kubeconfig's
// certificate-authority-data) and an admin client certificate in group system:masters, signed
// by a separate client CA, with ECDSA P-256 keys as k3s makes them.
func adminCredentials(commonName string) (caPEM, certPEM, keyPEM []byte, err error) {
	now := time.Now()
	newCA := func(cn string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: fmt.Sprintf("%s@%d", cn, now.Unix())},
			NotBefore: now.Add(-time.Minute), NotAfter: now.AddDate(10, 0, 0),
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			return nil, nil, nil, err
		}
		c, err := x509.ParseCertificate(der)
		return c, k, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), err
	}
	_, _, caPEM, err = newCA("k3s-server-ca")
	if err != nil {
		return nil, nil, nil, err
	}
	clientCA, clientCAKey, _, err := newCA("k3s-client-ca")
	if err != nil {
		return nil, nil, nil, err
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1), Subject: pkix.Name{CommonName: commonName, Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, clientCA, &k.PublicKey, clientCAKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, nil, err
	}
	return caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
