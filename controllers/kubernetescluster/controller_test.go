package kubernetescluster_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/kubernetescluster"
	"github.com/kubeopera/kubeopera/controllers/providerconfig"
	"github.com/kubeopera/kubeopera/internal/crossplane"
	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	xrpkg "github.com/kubeopera/kubeopera/internal/crossplane/xr"
	imanager "github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/workspaces"
)

// This suite runs the catalog, ProviderConfig and KubernetesCluster controllers in process as the
// manager does (test/framework/fleettest), on real kcp with two tenant workspaces and a real
// backend carrying the OTC provider's CRDs (test/fixtures/crossplane/otc, trimmed from the real
// schemas). sim.CrossplaneOTC plays Crossplane and the OTC API. For the other providers Crossplane
// core and function-patch-and-transform run for real (sim.CrossplaneForTest) with the platform's
// config/crossplane, and sim.AWSProvider plays provider-upjet-aws and AWS under them.

const akskCredentials = `{"access_key":"AKEXAMPLE0123456789","secret_key":"sk-do-not-leak-0123456789abcdef","auth_url":"https://iam.eu-de.otc.t-systems.com/v3","region":"eu-de"}`

const passwordCredentials = `auth_url=https://iam.eu-de.otc.t-systems.com/v3
user_name=demo-user
password=pw-do-not-leak-0123
domain_name=OTC-EU-DE-000000000010000
tenant_name=eu-de
`

type suite struct {
	h   *fleettest.Harness
	xp  *sim.CrossplaneOTC
	aws *sim.AWSProvider
	ctx context.Context
}

func setup(t *testing.T) *suite {
	t.Helper()
	h := fleettest.StartExport(t, imanager.PlatformProvider, "platform.edgeconnect.eu", "acme", "globex")
	ctx := t.Context()
	if _, err := envtest.InstallCRDs(h.BackendAdmin, envtest.CRDInstallOptions{Paths: []string{filepath.Join(framework.RepoRoot(), "test", "fixtures", "crossplane", "otc")}}); err != nil {
		t.Fatal(err)
	}
	// For providers other than OTC: Crossplane itself, the AWS provider's CRDs and the platform's
	// ManagedCluster XRD and Compositions (config/crossplane).
	sim.CrossplaneForTest(t, h.BackendAdmin, filepath.Dir(framework.ToolsBin()))
	if err := sim.InstallAWSProviderCRDs(h.BackendAdmin, framework.RepoRoot()); err != nil {
		t.Fatal(err)
	}
	if err := sim.ApplyCrossplaneConfig(ctx, h.BackendAdmin, framework.RepoRoot()); err != nil {
		t.Fatal(err)
	}
	// The platform admin's catalog: the sample OTC and AWS catalogs make run loads.
	var flavors []client.Object
	for _, f := range []string{"otc-flavors.yaml", "aws-flavors.yaml"} {
		raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", f))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifests.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			flavors = append(flavors, o)
		}
	}
	h.PublishCatalog(t, flavors...)
	if err := (&providerconfig.Reconciler{Workspaces: h.Fleet, Backend: h.BackendStore()}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	// Nothing is polled in these tests: every backend object a KubernetesCluster waits on is
	// watched (reconcile.Arrivals), and only a watch's event can move it on in time.
	if err := (&kubernetescluster.Reconciler{Workspaces: h.Fleet, Backend: h.BackendStore(), BackendWatcher: h.Managed.BackendWatcher, PollInterval: time.Hour}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)
	// CCE has no capacity for c4.xlarge.2 in eu-de-02 for the clusters whose name says so.
	xp := &sim.CrossplaneOTC{Backend: h.BackendAdmin, ReadyAfter: 500 * time.Millisecond,
		SoldOut: func(namespace, name, flavor, zone string) bool {
			return strings.Contains(name, "-sold-") && flavor == "c4.xlarge.2" && zone == "eu-de-02"
		}}
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = xp.Run(actx) }()
	t.Cleanup(func() { cancel(); <-done })
	// AWS deletes slower than it creates here (EKS takes minutes either way): long enough that a
	// composite cluster deleted without waiting for its composed resources is told apart.
	aws := sim.AWSProviderForTest(t, h.BackendAdmin, 500*time.Millisecond, 3*time.Second)
	return &suite{h: h, xp: xp, aws: aws, ctx: ctx}
}

// demo applies the seed's demo objects in namespace default of a workspace.
func (s *suite) demo(t *testing.T, ws, credentials, capsName string, caps platformv1alpha1.Capabilities, kc *platformv1alpha1.KubernetesCluster) {
	t.Helper()
	c := s.h.WS[ws]
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "otc-creds-" + kc.Name, Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}},
			Data: map[string][]byte{"credentials": []byte(credentials)}},
		&platformv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "provider-" + kc.Name},
			Spec: platformv1alpha1.ProviderConfigSpec{Credentials: platformv1alpha1.ProviderCredentials{Source: platformv1alpha1.CredentialsSourceSecret,
				SecretRef: &platformv1alpha1.SecretKeySelector{Name: "otc-creds-" + kc.Name, Key: "credentials"}}}},
		&platformv1alpha1.MachineCapabilities{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: capsName}, Spec: caps},
	}
	kc.Namespace = "default"
	kc.Spec.ProviderRef = platformv1alpha1.ProviderRef{Type: "OTC", ConfigRef: &platformv1alpha1.LocalObjectReference{Name: "provider-" + kc.Name}}
	kc.Spec.MachineCapabilitiesRef = platformv1alpha1.LocalObjectReference{Name: capsName}
	if kc.Spec.NodeCount == 0 {
		kc.Spec.NodeCount = 3
	}
	kc.Spec.NodeDiskSize = ptr.To(resource.MustParse("100Gi"))
	kc.Spec.Kubernetes.Version = "1.28.0"
	if kc.Spec.NodeAvailableZone == "" {
		kc.Spec.NodeAvailableZone = "random"
	}
	objs = append(objs, kc)
	for _, o := range objs {
		if err := c.Create(s.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

const awsCredentials = `[default]
aws_access_key_id = AKIAEXAMPLE0123456789
aws_secret_access_key = aws-sk-do-not-leak-0123456789
`

// awsDemo applies config/samples/kubernetescluster-aws.yaml's objects in namespace default of a
// workspace, with subnets subnetIDs.
func (s *suite) awsDemo(t *testing.T, ws, name, subnetIDs string) {
	t.Helper()
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "aws-creds-" + name, Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}},
			Data: map[string][]byte{"credentials": []byte(awsCredentials)}},
		&platformv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "provider-" + name},
			Spec: platformv1alpha1.ProviderConfigSpec{Type: "AWS", Credentials: platformv1alpha1.ProviderCredentials{Source: platformv1alpha1.CredentialsSourceSecret,
				SecretRef: &platformv1alpha1.SecretKeySelector{Name: "aws-creds-" + name, Key: "credentials"}}}},
		&platformv1alpha1.MachineCapabilities{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "workers-" + name},
			Spec: platformv1alpha1.Capabilities{VCPUCount: 4, MemorySize: resource.MustParse("8Gi")}},
		&platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: platformv1alpha1.KubernetesClusterSpec{
			MachineCapabilitiesRef: platformv1alpha1.LocalObjectReference{Name: "workers-" + name}, NodeCount: 2, NodeDiskSize: ptr.To(resource.MustParse("50Gi")),
			Region: "eu-central-1", VpcID: "vpc-0123", SubnetID: subnetIDs, Kubernetes: platformv1alpha1.KubernetesSpec{Version: "1.31"},
			ProviderRef: platformv1alpha1.ProviderRef{Type: "AWS", ConfigRef: &platformv1alpha1.LocalObjectReference{Name: "provider-" + name}}}},
	}
	for _, o := range objs {
		if err := s.h.WS[ws].Create(s.ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// managedCluster reads a ManagedCluster XR of the workspace's backend namespace; nil when absent.
func (s *suite) managedCluster(t *testing.T, ws, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(xrpkg.GVK)
	if err := s.h.Backend.Get(s.ctx, client.ObjectKey{Namespace: workspaces.Namespace(s.h.LC[ws]), Name: name}, u); err != nil {
		return nil
	}
	return u
}

func (s *suite) get(t *testing.T, ws, name string) *platformv1alpha1.KubernetesCluster {
	t.Helper()
	kc := &platformv1alpha1.KubernetesCluster{}
	if err := s.h.WS[ws].Get(s.ctx, client.ObjectKey{Namespace: "default", Name: name}, kc); err != nil {
		t.Fatal(err)
	}
	return kc
}

func describe(kc *platformv1alpha1.KubernetesCluster) string {
	var conds []string
	for _, c := range kc.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s(%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %q conditions %v", kc.Status.Phase, conds)
}

func (s *suite) waitReady(t *testing.T, ws, name string) *platformv1alpha1.KubernetesCluster {
	t.Helper()
	var kc *platformv1alpha1.KubernetesCluster
	framework.Eventually(t, 2*time.Minute, "KubernetesCluster "+ws+"/"+name+" Ready", func() (bool, string) {
		kc = s.get(t, ws, name)
		return kc.Status.Phase == platformv1alpha1.KubernetesClusterPhaseReady, describe(kc)
	})
	return kc
}

func (s *suite) waitCondition(t *testing.T, ws, name, typ, reason, msgPart string) *platformv1alpha1.KubernetesCluster {
	t.Helper()
	var kc *platformv1alpha1.KubernetesCluster
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s %s/%s", typ, ws, name), func() (bool, string) {
		kc = s.get(t, ws, name)
		c := reconcile.GetCondition(kc, typ)
		return c != nil && c.Reason == reason && strings.Contains(c.Message, msgPart), describe(kc)
	})
	return kc
}

func (s *suite) backendObject(t *testing.T, ws string, gvkKind string, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	switch gvkKind {
	case "VpcV1":
		u.SetGroupVersionKind(otc.VPCGVK)
	case "SubnetV1":
		u.SetGroupVersionKind(otc.SubnetGVK)
	case "ClusterV3":
		u.SetGroupVersionKind(otc.ClusterGVK)
	case "NodePoolV3":
		u.SetGroupVersionKind(otc.NodePoolGVK)
	case "EIPV1":
		u.SetGroupVersionKind(otc.EIPGVK)
	}
	if err := s.h.Backend.Get(s.ctx, client.ObjectKey{Namespace: workspaces.Namespace(s.h.LC[ws]), Name: name}, u); err != nil {
		return nil
	}
	return u
}

// certificateCluster is the server and decoded CA of the certificateClusters entry name the
// ClusterV3 cluster of a workspace observes.
func (s *suite) certificateCluster(t *testing.T, ws, cluster, name string) (server string, ca []byte) {
	t.Helper()
	cl := s.backendObject(t, ws, "ClusterV3", cluster)
	if cl == nil {
		t.Fatalf("%s: no ClusterV3 %s", ws, cluster)
	}
	entries, _, _ := unstructured.NestedSlice(cl.Object, "status", "atProvider", "certificateClusters")
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if m["name"] == name {
			server, _ = m["server"].(string)
			ca, _ = base64.StdEncoding.DecodeString(fmt.Sprint(m["certificateAuthorityData"]))
			return server, ca
		}
	}
	t.Fatalf("%s: ClusterV3 %s observes no %s entry: %v", ws, cluster, name, entries)
	return "", nil
}

// checkKubeconfig checks the kubeconfig delivered for the KubernetesCluster name names server,
// verified with ca, and carries a client certificate and key.
func (s *suite) checkKubeconfig(t *testing.T, ws, name, server string, ca []byte) {
	t.Helper()
	sec := &corev1.Secret{}
	if err := s.h.WS[ws].Get(s.ctx, client.ObjectKey{Namespace: "default", Name: name + "-kubeconfig"}, sec); err != nil {
		t.Fatalf("%s: kubeconfig not delivered: %v", ws, err)
	}
	cfg, err := clientcmd.Load(sec.Data["kubeconfig"])
	if err != nil {
		t.Fatalf("%s: delivered kubeconfig does not parse: %v", ws, err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.Clusters[kctx.Cluster] == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		t.Fatalf("%s: delivered kubeconfig has no usable current context", ws)
	}
	c, u := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	if c.Server != server || len(ca) == 0 || string(c.CertificateAuthorityData) != string(ca) || c.InsecureSkipTLSVerify {
		t.Errorf("%s: delivered kubeconfig names %q (CA %d bytes, insecure %v), want %q with the cluster's CA", ws, c.Server, len(c.CertificateAuthorityData), c.InsecureSkipTLSVerify, server)
	}
	if len(u.ClientCertificateData) == 0 || len(u.ClientKeyData) == 0 {
		t.Errorf("%s: delivered kubeconfig has no client certificate and key", ws)
	}
}

// conditionStatus is the status of a Crossplane condition of u.
func conditionStatus(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			st, _ := m["status"].(string)
			return st
		}
	}
	return ""
}

func TestKubernetesCluster(t *testing.T) {
	s := setup(t)
	demoCaps := platformv1alpha1.Capabilities{VCPUCount: 4, MemorySize: resource.MustParse("8Gi")}

	t.Run("the seed's demo flow in two workspaces with identical names", func(t *testing.T) {
		s.demo(t, "acme", akskCredentials, "my-capabilities", demoCaps, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "my-cluster"}})
		s.demo(t, "globex", passwordCredentials, "my-capabilities", demoCaps, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "my-cluster"}})
		for _, ws := range []string{"acme", "globex"} {
			kc := s.waitReady(t, ws, "my-cluster")
			for _, typ := range []string{platformv1alpha1.CredentialsValidCondition, platformv1alpha1.FlavorMatchedCondition, platformv1alpha1.NetworkReadyCondition,
				platformv1alpha1.ClusterReadyCondition, platformv1alpha1.NodePoolReadyCondition, platformv1alpha1.KubeconfigDeliveredCondition} {
				if !reconcile.IsTrue(kc, typ) {
					t.Errorf("%s: %s not True: %s", ws, typ, describe(kc))
				}
			}
			if kc.Status.Flavor != "c4.xlarge.2" {
				t.Errorf("%s: flavor %q, want the catalog's smallest match c4.xlarge.2", ws, kc.Status.Flavor)
			}
			// Not asked to be public: the kubeconfig names the private endpoint, with the CA.
			server, ca := s.certificateCluster(t, ws, "kc-default-my-cluster-cluster", otc.CertificateClusterInternal)
			s.checkKubeconfig(t, ws, "my-cluster", server, ca)
			if kc.Status.Endpoint != server || kc.Status.EndpointAccess != platformv1alpha1.EndpointPrivate {
				t.Errorf("%s: status.endpoint %q (%s), want the private %q", ws, kc.Status.Endpoint, kc.Status.EndpointAccess, server)
			}
			if c := reconcile.GetCondition(kc, platformv1alpha1.KubeconfigDeliveredCondition); c == nil || !strings.Contains(c.Message, "private endpoint "+server) {
				t.Errorf("%s: KubeconfigDelivered does not name the private endpoint: %v", ws, c)
			}
			if s.backendObject(t, ws, "EIPV1", "kc-default-my-cluster-eip") != nil {
				t.Errorf("%s: an elastic IP was made for a private cluster", ws)
			}
			for _, kind := range []string{"VpcV1", "SubnetV1", "ClusterV3", "NodePoolV3"} {
				suffix := map[string]string{"VpcV1": "vpc", "SubnetV1": "subnet", "ClusterV3": "cluster", "NodePoolV3": "pool"}[kind]
				u := s.backendObject(t, ws, kind, "kc-default-my-cluster-"+suffix)
				if u == nil {
					t.Errorf("%s: %s kc-default-my-cluster-%s not in %s", ws, kind, suffix, workspaces.Namespace(s.h.LC[ws]))
					continue
				}
				if u.GetLabels()[workspaces.FingerprintLabel] != workspaces.Fingerprint(s.h.LC[ws]) {
					t.Errorf("%s: %s labels %v", ws, kind, u.GetLabels())
				}
			}
			pool := s.backendObject(t, ws, "NodePoolV3", "kc-default-my-cluster-pool")
			cl := s.backendObject(t, ws, "ClusterV3", "kc-default-my-cluster-cluster")
			if pool != nil && cl != nil {
				id, _ := otc.AtProviderID(cl)
				got, _, _ := unstructured.NestedString(pool.Object, "spec", "forProvider", "clusterId")
				if got == "" || got != id {
					t.Errorf("%s: node pool clusterId %q, want the cluster's id %q literally", ws, got, id)
				}
				if _, has, _ := unstructured.NestedMap(pool.Object, "spec", "forProvider", "clusterIdRef"); has {
					t.Errorf("%s: the node pool has a clusterIdRef", ws)
				}
			}
		}
		// The credentials reached the backend normalized to the provider's JSON, never elsewhere.
		sec := &corev1.Secret{}
		if err := s.h.Backend.Get(s.ctx, client.ObjectKey{Namespace: workspaces.Namespace(s.h.LC["globex"]), Name: crossplane.ProviderConfigName("default", "provider-my-cluster") + "-credentials"}, sec); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(sec.Data["credentials"]), `"user_name":"demo-user"`) {
			t.Error("the password-form credentials were not normalized to the provider's JSON")
		}
		if strings.Contains(s.h.Log.String(), "pw-do-not-leak") || strings.Contains(s.h.Log.String(), "sk-do-not-leak") {
			t.Error("the manager logged credentials")
		}
	})

	t.Run("with the tenant's VPC and subnet nothing of the network is created", func(t *testing.T) {
		s.demo(t, "acme", akskCredentials, "caps-net", demoCaps, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "with-net"},
			Spec: platformv1alpha1.KubernetesClusterSpec{VpcID: "vpc-0123", SubnetID: "net-4567"}})
		s.waitReady(t, "acme", "with-net")
		if s.backendObject(t, "acme", "VpcV1", "kc-default-with-net-vpc") != nil || s.backendObject(t, "acme", "SubnetV1", "kc-default-with-net-subnet") != nil {
			t.Error("a VPC or subnet was created although the tenant gave both")
		}
		cl := s.backendObject(t, "acme", "ClusterV3", "kc-default-with-net-cluster")
		if v, _, _ := unstructured.NestedString(cl.Object, "spec", "forProvider", "vpcId"); v != "vpc-0123" {
			t.Errorf("cluster vpcId %q", v)
		}
	})

	t.Run("no matching flavor waits, naming what is missing; spec.nodeFlavor overrides", func(t *testing.T) {
		gpu := platformv1alpha1.Capabilities{VCPUCount: 4, MemorySize: resource.MustParse("8Gi"), GPUModelName: ptr.To("RTX3080")}
		s.demo(t, "acme", akskCredentials, "caps-gpu", gpu, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}})
		s.waitCondition(t, "acme", "gpu", platformv1alpha1.FlavorMatchedCondition, platformv1alpha1.NoMatchingFlavorReason, "RTX3080")
		// The platform admin adds such a flavor: the workspace's catalog copy gets it and the
		// waiting cluster matches it then, long before its recheck (referenceRecheck, 5 minutes)
		// would have looked again.
		rtx := &platformv1alpha1.ProviderMachineFlavor{ObjectMeta: metav1.ObjectMeta{Name: "otc-test-rtx3080"},
			Spec: platformv1alpha1.ProviderMachineFlavorSpec{Available: true, ProviderRef: platformv1alpha1.ProviderRef{Type: "OTC"}, Flavor: "test.rtx3080.2",
				Capabilities:   platformv1alpha1.Capabilities{VCPUCount: 4, MemorySize: resource.MustParse("8Gi"), GPUModelName: ptr.To("RTX3080")},
				AvailableZones: []string{"eu-de-01", "eu-de-02", "eu-de-03"}}}
		if err := s.h.PlatformAdmin(t).Create(s.ctx, rtx); err != nil {
			t.Fatal(err)
		}
		if kc := s.waitCondition(t, "acme", "gpu", platformv1alpha1.FlavorMatchedCondition, commonv1alpha1.SucceededReason, "test.rtx3080.2"); kc.Status.Flavor != "test.rtx3080.2" {
			t.Errorf("flavor %q, want the catalog's new test.rtx3080.2", kc.Status.Flavor)
		}
		s.demo(t, "acme", akskCredentials, "caps-gpu", gpu, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "override"},
			Spec: platformv1alpha1.KubernetesClusterSpec{NodeFlavor: "s3.xlarge.4"}})
		kc := s.waitReady(t, "acme", "override")
		if kc.Status.Flavor != "s3.xlarge.4" {
			t.Errorf("flavor %q, want the override", kc.Status.Flavor)
		}
	})

	t.Run("a missing MachineCapabilities or ProviderConfig is waited for, named", func(t *testing.T) {
		c := s.h.WS["globex"]
		kc := &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orphan"}, Spec: platformv1alpha1.KubernetesClusterSpec{
			MachineCapabilitiesRef: platformv1alpha1.LocalObjectReference{Name: "nowhere-caps"}, NodeCount: 1, Kubernetes: platformv1alpha1.KubernetesSpec{Version: "1.28.0"},
			ProviderRef: platformv1alpha1.ProviderRef{Type: "OTC", ConfigRef: &platformv1alpha1.LocalObjectReference{Name: "nowhere-provider"}}}}
		if err := c.Create(s.ctx, kc); err != nil {
			t.Fatal(err)
		}
		s.waitCondition(t, "globex", "orphan", platformv1alpha1.CredentialsValidCondition, platformv1alpha1.ProviderConfigNotReadyReason, "ProviderConfig default/nowhere-provider does not exist")
		kc = s.get(t, "globex", "orphan")
		kc.Spec.ProviderRef.ConfigRef.Name = "provider-my-cluster"
		if err := c.Update(s.ctx, kc); err != nil {
			t.Fatal(err)
		}
		s.waitCondition(t, "globex", "orphan", platformv1alpha1.FlavorMatchedCondition, platformv1alpha1.MachineCapabilitiesMissingReason, "MachineCapabilities default/nowhere-caps does not exist")
		// Creating it is noticed without waiting for the (long) recheck: the watch maps it.
		if err := c.Create(s.ctx, &platformv1alpha1.MachineCapabilities{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nowhere-caps"}, Spec: demoCaps}); err != nil {
			t.Fatal(err)
		}
		s.waitReady(t, "globex", "orphan")
	})

	t.Run("an unknown provider type is refused with a clear reason", func(t *testing.T) {
		kc := &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "equinix"}, Spec: platformv1alpha1.KubernetesClusterSpec{
			MachineCapabilitiesRef: platformv1alpha1.LocalObjectReference{Name: "my-capabilities"}, NodeCount: 1, Kubernetes: platformv1alpha1.KubernetesSpec{Version: "1.28.0"},
			ProviderRef: platformv1alpha1.ProviderRef{Type: "EquinixMetal", ConfigRef: &platformv1alpha1.LocalObjectReference{Name: "provider-my-cluster"}}}}
		if err := s.h.WS["globex"].Create(s.ctx, kc); err != nil {
			t.Fatal(err)
		}
		// The supported providers are OTC and those with a Composition installed (config/crossplane's aws).
		kc = s.waitCondition(t, "globex", "equinix", platformv1alpha1.CredentialsValidCondition, platformv1alpha1.UnsupportedProviderReason, "supported: OTC, aws")
		if !strings.Contains(reconcile.GetCondition(kc, platformv1alpha1.CredentialsValidCondition).Message, "EquinixMetal") {
			t.Errorf("the reason does not name the type: %s", describe(kc))
		}
		if kc.Status.Phase != platformv1alpha1.KubernetesClusterPhaseFailed {
			t.Errorf("phase %q, want Failed", kc.Status.Phase)
		}
	})

	t.Run("a sold-out node pool (a failed create) says so with the seed's advice; following it replaces the pool", func(t *testing.T) {
		s.demo(t, "acme", akskCredentials, "caps-sold", demoCaps, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "x-sold-out"},
			Spec: platformv1alpha1.KubernetesClusterSpec{NodeAvailableZone: "eu-de-02"}})
		pool := "kc-default-x-sold-out-pool"
		t.Cleanup(func() {
			if t.Failed() {
				if u := s.backendObject(t, "acme", "NodePoolV3", pool); u != nil {
					st, _, _ := unstructured.NestedMap(u.Object, "status")
					t.Logf("node pool status on the backend: %v", st)
				}
			}
		})
		kc := s.waitCondition(t, "acme", "x-sold-out", platformv1alpha1.NodePoolReadyCondition, platformv1alpha1.SoldOutReason, "no capacity")
		msg := reconcile.GetCondition(kc, platformv1alpha1.NodePoolReadyCondition).Message
		for _, want := range []string{"flavor c4.xlarge.2", "zone eu-de-02", "spec.nodeAvailableZone: random", "spec.nodeFlavor", "spec.nodeCount"} {
			if !strings.Contains(msg, want) {
				t.Errorf("SoldOut message %q lacks %q", msg, want)
			}
		}
		// The provider ends up calling the failed pool Ready (upjet marks the tainted Terraform
		// resource Available): the cluster still is not.
		framework.Eventually(t, time.Minute, "the failed pool Ready on the backend", func() (bool, string) {
			u := s.backendObject(t, "acme", "NodePoolV3", pool)
			st, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "status")
			return conditionStatus(u, "Ready") == "True" && st == sim.OTCNodePoolSoldOut, fmt.Sprint(u.Object["status"])
		})
		firstUID := s.backendObject(t, "acme", "NodePoolV3", pool).GetUID()
		framework.Consistently(t, 2*time.Second, "still SoldOut", func() (bool, string) {
			kc := s.get(t, "acme", "x-sold-out")
			c := reconcile.GetCondition(kc, platformv1alpha1.NodePoolReadyCondition)
			return c != nil && c.Reason == platformv1alpha1.SoldOutReason && kc.Status.Phase != platformv1alpha1.KubernetesClusterPhaseReady, describe(kc)
		})
		// The tenant takes the advice: another flavor. The provider never retries the failed
		// create, so the pool is deleted and created anew, and this one finds capacity.
		kc = s.get(t, "acme", "x-sold-out")
		kc.Spec.NodeFlavor = "s3.xlarge.4"
		if err := s.h.WS["acme"].Update(s.ctx, kc); err != nil {
			t.Fatal(err)
		}
		kc = s.waitReady(t, "acme", "x-sold-out")
		u := s.backendObject(t, "acme", "NodePoolV3", pool)
		if f, _, _ := unstructured.NestedString(u.Object, "spec", "forProvider", "flavor"); f != "s3.xlarge.4" || u.GetUID() == firstUID {
			t.Errorf("node pool flavor %q, uid %s (the failed one's %s): want a new pool of s3.xlarge.4", f, u.GetUID(), firstUID)
		}
		ns := workspaces.Namespace(s.h.LC["acme"])
		if !slices.Contains(s.xp.Deleted(), "NodePoolV3/"+ns+"/"+pool) {
			t.Errorf("the failed pool was never deleted: %v", s.xp.Deleted())
		}
	})

	t.Run("a public endpoint: an elastic IP bound to the cluster, the kubeconfig naming it; torn down after the cluster", func(t *testing.T) {
		s.demo(t, "globex", passwordCredentials, "caps-public", demoCaps, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "public"},
			Spec: platformv1alpha1.KubernetesClusterSpec{PublicEndpoint: &platformv1alpha1.PublicEndpoint{BandwidthMbit: 10}}})
		kc := s.waitReady(t, "globex", "public")
		eip := s.backendObject(t, "globex", "EIPV1", "kc-default-public-eip")
		if eip == nil {
			t.Fatal("no EIPV1 kc-default-public-eip")
		}
		if eip.GetLabels()[workspaces.FingerprintLabel] != workspaces.Fingerprint(s.h.LC["globex"]) || eip.GetLabels()["platform.edgeconnect.eu/owner-name"] != "public" {
			t.Errorf("EIPV1 labels %v", eip.GetLabels())
		}
		if pc, _, _ := unstructured.NestedString(eip.Object, "spec", "providerConfigRef", "name"); pc != crossplane.ProviderConfigName("default", "provider-public") {
			t.Errorf("EIPV1 providerConfigRef %q", pc)
		}
		if bw, _, _ := unstructured.NestedSlice(eip.Object, "spec", "forProvider", "bandwidth"); len(bw) != 1 || fmt.Sprint(bw[0].(map[string]any)["size"]) != "10" {
			t.Errorf("EIPV1 bandwidth %v, want 10 Mbit/s", bw)
		}
		ips, _, _ := unstructured.NestedSlice(eip.Object, "status", "atProvider", "publicip")
		address, _ := ips[0].(map[string]any)["ipAddress"].(string)
		cl := s.backendObject(t, "globex", "ClusterV3", "kc-default-public-cluster")
		ref, _, _ := unstructured.NestedString(cl.Object, "spec", "forProvider", "eipRef", "name")
		bound, _, _ := unstructured.NestedString(cl.Object, "spec", "forProvider", "eip")
		if ref != "kc-default-public-eip" || address == "" || bound != address {
			t.Errorf("ClusterV3 eipRef %q, eip %q; want the EIPV1 and its address %q", ref, bound, address)
		}
		server, ca := s.certificateCluster(t, "globex", "kc-default-public-cluster", otc.CertificateClusterExternalTLSVerify)
		if server != "https://"+address+":5443" {
			t.Errorf("the verifying external entry names %q, want the EIP's https://%s:5443", server, address)
		}
		s.checkKubeconfig(t, "globex", "public", server, ca)
		if kc.Status.Endpoint != server || kc.Status.EndpointAccess != platformv1alpha1.EndpointPublic {
			t.Errorf("status.endpoint %q (%s), want the public %q", kc.Status.Endpoint, kc.Status.EndpointAccess, server)
		}
		if c := reconcile.GetCondition(kc, platformv1alpha1.KubeconfigDeliveredCondition); c == nil || !strings.Contains(c.Message, "public endpoint "+server) {
			t.Errorf("KubeconfigDelivered does not name the public endpoint: %v", c)
		}
		if c := reconcile.GetCondition(kc, platformv1alpha1.NetworkReadyCondition); c == nil || !strings.Contains(c.Message, "elastic IP kc-default-public-eip (10 Mbit/s)") {
			t.Errorf("NetworkReady does not name the elastic IP: %v", c)
		}
		// Another provider's cluster cannot ask for one: kcp refuses it at admission.
		aws := &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "public-eks"}, Spec: platformv1alpha1.KubernetesClusterSpec{
			MachineCapabilitiesRef: platformv1alpha1.LocalObjectReference{Name: "caps-public"}, NodeCount: 1, Kubernetes: platformv1alpha1.KubernetesSpec{Version: "1.31"},
			ProviderRef:    platformv1alpha1.ProviderRef{Type: "AWS", ConfigRef: &platformv1alpha1.LocalObjectReference{Name: "provider-public"}},
			PublicEndpoint: &platformv1alpha1.PublicEndpoint{}}}
		if err := s.h.WS["globex"].Create(s.ctx, aws); err == nil || !strings.Contains(err.Error(), "spec.publicEndpoint is offered for OTC clusters only") {
			t.Errorf("an AWS cluster with a public endpoint: %v, want refused at admission", err)
		}

		if err := s.h.WS["globex"].Delete(s.ctx, kc); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "public gone", func() (bool, string) {
			err := s.h.WS["globex"].Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "public"}, &platformv1alpha1.KubernetesCluster{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		ns := workspaces.Namespace(s.h.LC["globex"])
		var order []string
		for _, d := range s.xp.Deleted() {
			if strings.Contains(d, "/"+ns+"/kc-default-public-") {
				order = append(order, strings.SplitN(d, "/", 2)[0])
			}
		}
		if want := []string{"NodePoolV3", "ClusterV3", "EIPV1", "SubnetV1", "VpcV1"}; !slices.Equal(order, want) {
			t.Errorf("deletion order %v, want %v", order, want)
		}
	})

	t.Run("malformed credentials: the ProviderConfig says what is wrong, the cluster waits on it", func(t *testing.T) {
		s.demo(t, "globex", "auth_url=http://iam.example\nuser_name=x\n", "caps-bad", demoCaps, &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "bad"}})
		framework.Eventually(t, time.Minute, "ProviderConfig not Ready with the reason", func() (bool, string) {
			pc := &platformv1alpha1.ProviderConfig{}
			if err := s.h.WS["globex"].Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "provider-bad"}, pc); err != nil {
				return false, err.Error()
			}
			c := reconcile.GetCondition(pc, platformv1alpha1.CredentialsValidCondition)
			return c != nil && c.Reason == platformv1alpha1.InvalidCredentialsReason, fmt.Sprint(pc.Status.Conditions)
		})
		s.waitCondition(t, "globex", "bad", platformv1alpha1.CredentialsValidCondition, platformv1alpha1.ProviderConfigNotReadyReason, "provider-bad")
		// Well-formed, but naming a host that is not an OTC IAM endpoint (the provider would
		// connect there from the backend's network): refused the same way.
		s.demo(t, "globex", `{"access_key":"AK","secret_key":"SK","auth_url":"https://169.254.169.254/v3","region":"eu-de"}`, "caps-bad", demoCaps,
			&platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Name: "metadata"}})
		s.waitCondition(t, "globex", "metadata", platformv1alpha1.CredentialsValidCondition, platformv1alpha1.ProviderConfigNotReadyReason, "not an IAM endpoint this platform allows")
	})

	t.Run("deletion tears down node pool, cluster, subnet, VPC in order, then the finalizer", func(t *testing.T) {
		c := s.h.WS["acme"]
		if err := c.Delete(s.ctx, s.get(t, "acme", "my-cluster")); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "my-cluster gone", func() (bool, string) {
			err := c.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "my-cluster"}, &platformv1alpha1.KubernetesCluster{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		ns := workspaces.Namespace(s.h.LC["acme"])
		var order []string
		for _, d := range s.xp.Deleted() {
			if strings.Contains(d, "/"+ns+"/kc-default-my-cluster-") {
				order = append(order, strings.SplitN(d, "/", 2)[0])
			}
		}
		if want := []string{"NodePoolV3", "ClusterV3", "SubnetV1", "VpcV1"}; !slices.Equal(order, want) {
			t.Errorf("deletion order %v, want %v", order, want)
		}
		if err := c.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "my-cluster-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("delivered kubeconfig still there: %v", err)
		}
		// The other workspace's cluster of the same name is untouched.
		if kc := s.get(t, "globex", "my-cluster"); kc.Status.Phase != platformv1alpha1.KubernetesClusterPhaseReady {
			t.Errorf("globex's my-cluster: %s", describe(kc))
		}
	})

	t.Run("another provider: one ManagedCluster composed by its Composition, then torn down", func(t *testing.T) {
		c := s.h.WS["acme"]
		ns := workspaces.Namespace(s.h.LC["acme"])
		s.awsDemo(t, "acme", "eks", "subnet-0aaa,subnet-0bbb")
		kc := s.waitReady(t, "acme", "eks")
		for _, typ := range []string{platformv1alpha1.CredentialsValidCondition, platformv1alpha1.FlavorMatchedCondition,
			platformv1alpha1.ClusterReadyCondition, platformv1alpha1.KubeconfigDeliveredCondition} {
			if !reconcile.IsTrue(kc, typ) {
				t.Errorf("%s not True: %s", typ, describe(kc))
			}
		}
		// The composition builds network and workers: no OTC step claims them.
		for _, typ := range []string{platformv1alpha1.NetworkReadyCondition, platformv1alpha1.NodePoolReadyCondition} {
			if c := reconcile.GetCondition(kc, typ); c != nil {
				t.Errorf("%s set on a composed cluster: %v", typ, c)
			}
		}
		if kc.Status.Flavor != "c5.xlarge" {
			t.Errorf("flavor %q, want the AWS catalog's smallest 4 vCPU/8Gi type c5.xlarge (c6i.xlarge ties, the name decides)", kc.Status.Flavor)
		}
		x := s.managedCluster(t, "acme", "kc-default-eks-cluster")
		if x == nil {
			t.Fatalf("no ManagedCluster kc-default-eks-cluster in %s", ns)
		}
		sel, _, _ := unstructured.NestedStringMap(x.Object, "spec", "crossplane", "compositionSelector", "matchLabels")
		ref, _, _ := unstructured.NestedString(x.Object, "spec", "crossplane", "compositionRef", "name")
		if sel[xrpkg.ProviderLabel] != "aws" || ref != "managedcluster-aws" {
			t.Errorf("composition selector %v, selected %q; want provider aws and Composition managedcluster-aws", sel, ref)
		}
		spec, _, _ := unstructured.NestedMap(x.Object, "spec")
		for k, want := range map[string]any{"provider": "AWS", "nodeFlavor": "c5.xlarge", "nodeCount": int64(2), "nodeDiskSizeGiB": int64(50),
			"region": "eu-central-1", "kubernetesVersion": "1.31", "subnetIDs": []any{"subnet-0aaa", "subnet-0bbb"}, "kubeconfigSecretName": "kc-default-eks-conn"} {
			if fmt.Sprint(spec[k]) != fmt.Sprint(want) {
				t.Errorf("ManagedCluster spec.%s = %v, want %v", k, spec[k], want)
			}
		}
		if x.GetLabels()[workspaces.FingerprintLabel] != workspaces.Fingerprint(s.h.LC["acme"]) {
			t.Errorf("ManagedCluster labels %v", x.GetLabels())
		}
		// What Crossplane composed from it: the workers and the control plane of the tenant's spec.
		dyn := dynamic.NewForConfigOrDie(s.h.BackendAdmin)
		for gvr, fields := range map[schema.GroupVersionResource]map[string]any{
			sim.AWSNodeGroupGVR: {"instanceTypes": "[c5.xlarge]", "scalingConfig": "map[desiredSize:2 maxSize:2 minSize:2]", "diskSize": "50",
				"subnetIds": "[subnet-0aaa subnet-0bbb]", "region": "eu-central-1"},
			sim.AWSClusterGVR: {"version": "1.31", "region": "eu-central-1"},
		} {
			l, err := dyn.Resource(gvr).Namespace(ns).List(s.ctx, metav1.ListOptions{LabelSelector: "crossplane.io/composite=kc-default-eks-cluster"})
			if err != nil || len(l.Items) != 1 {
				t.Fatalf("composed %s: %v (%v)", gvr.Resource, l, err)
			}
			fp, _, _ := unstructured.NestedMap(l.Items[0].Object, "spec", "forProvider")
			for f, want := range fields {
				if fmt.Sprint(fp[f]) != want {
					t.Errorf("composed %s spec.forProvider.%s = %v, want %v", gvr.Resource, f, fp[f], want)
				}
			}
		}
		// The credentials the composition's ProviderConfig reads: the tenant's, as they are.
		credName, _, _ := unstructured.NestedString(x.Object, "spec", "credentialsSecretRef", "name")
		creds := &corev1.Secret{}
		if err := s.h.Backend.Get(s.ctx, client.ObjectKey{Namespace: ns, Name: credName}, creds); err != nil {
			t.Fatalf("credentials Secret %s/%s: %v", ns, credName, err)
		}
		if string(creds.Data[crossplane.CredentialsKey]) != awsCredentials {
			t.Error("the AWS credentials were not handed over as they are")
		}
		// The kubeconfig delivered is the one the composition wrote.
		conn, delivered := &corev1.Secret{}, &corev1.Secret{}
		if err := s.h.Backend.Get(s.ctx, client.ObjectKey{Namespace: ns, Name: "kc-default-eks-conn"}, conn); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "eks-kubeconfig"}, delivered); err != nil {
			t.Fatal(err)
		}
		if len(conn.Data["kubeconfig"]) == 0 || string(delivered.Data["kubeconfig"]) != string(conn.Data["kubeconfig"]) {
			t.Error("the delivered kubeconfig is not the composition's")
		}
		if strings.Contains(s.h.Log.String(), "aws-sk-do-not-leak") {
			t.Error("the manager logged credentials")
		}

		// Deleting the ProviderConfig first: it waits for the cluster, whose teardown needs the
		// credentials.
		pc := &platformv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "provider-eks"}}
		if err := c.Delete(s.ctx, pc); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "the ProviderConfig waits for the cluster", func() (bool, string) {
			if err := c.Get(s.ctx, client.ObjectKeyFromObject(pc), pc); err != nil {
				return false, err.Error()
			}
			r := reconcile.GetCondition(pc, "Reconciling")
			return r != nil && strings.Contains(r.Message, "eks"), fmt.Sprint(pc.Status.Conditions)
		})
		if err := s.h.Backend.Get(s.ctx, client.ObjectKey{Namespace: ns, Name: credName}, &corev1.Secret{}); err != nil {
			t.Errorf("the credentials went before the cluster: %v", err)
		}
		if err := c.Delete(s.ctx, s.get(t, "acme", "eks")); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "eks and its ProviderConfig gone", func() (bool, string) {
			errKC := c.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "eks"}, &platformv1alpha1.KubernetesCluster{})
			errPC := c.Get(s.ctx, client.ObjectKeyFromObject(pc), &platformv1alpha1.ProviderConfig{})
			return apierrors.IsNotFound(errKC) && apierrors.IsNotFound(errPC), fmt.Sprint(errKC, " / ", errPC)
		})
		// Foreground: the composite cluster went only after what Crossplane composed for it, so
		// the KubernetesCluster is gone only once AWS deleted every resource.
		for _, gvr := range []schema.GroupVersionResource{sim.AWSRoleGVR, sim.AWSRolePolicyAttachmentGVR, sim.AWSClusterGVR, sim.AWSNodeGroupGVR, sim.AWSClusterAuthGVR} {
			u, err := dynamic.NewForConfigOrDie(s.h.BackendAdmin).Resource(gvr).Namespace(ns).List(s.ctx, metav1.ListOptions{LabelSelector: "crossplane.io/composite=kc-default-eks-cluster"})
			if err != nil {
				t.Fatal(err)
			}
			for _, mr := range u.Items {
				t.Errorf("the KubernetesCluster went while %s %s was still being deleted", mr.GetKind(), mr.GetName())
			}
		}
		deleted := s.aws.Deleted()
		for _, kind := range []string{"Role", "RolePolicyAttachment", "Cluster", "NodeGroup", "ClusterAuth"} {
			if !slices.ContainsFunc(deleted, func(d string) bool { return strings.HasPrefix(d, kind+"/"+ns+"/kc-default-eks-cluster-") }) {
				t.Errorf("AWS never deleted the cluster's %s: %v", kind, deleted)
			}
		}
		if s.managedCluster(t, "acme", "kc-default-eks-cluster") != nil {
			t.Error("the ManagedCluster is still there")
		}
		if err := c.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "eks-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("delivered kubeconfig still there: %v", err)
		}
		if err := s.h.Backend.Get(s.ctx, client.ObjectKey{Namespace: ns, Name: credName}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("backend credentials still there: %v", err)
		}
	})

	t.Run("another provider: what its composition refuses is Stalled with the field; a ProviderConfig of another type is waited on", func(t *testing.T) {
		s.awsDemo(t, "globex", "one-subnet", "subnet-0aaa")
		kc := s.waitCondition(t, "globex", "one-subnet", platformv1alpha1.ClusterReadyCondition, "InvalidSpec", "at least two existing subnets")
		if kc.Status.Phase != platformv1alpha1.KubernetesClusterPhaseFailed {
			t.Errorf("phase %q, want Failed", kc.Status.Phase)
		}
		if s.managedCluster(t, "globex", "kc-default-one-subnet-cluster") != nil {
			t.Error("a ManagedCluster was written although its XRD refuses it")
		}
		// An AWS cluster naming an OTC ProviderConfig (the demo's provider-my-cluster).
		mixed := &platformv1alpha1.KubernetesCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mixed"}, Spec: platformv1alpha1.KubernetesClusterSpec{
			MachineCapabilitiesRef: platformv1alpha1.LocalObjectReference{Name: "my-capabilities"}, NodeCount: 1, Kubernetes: platformv1alpha1.KubernetesSpec{Version: "1.31"},
			Region: "eu-central-1", VpcID: "vpc-1", SubnetID: "subnet-1,subnet-2",
			ProviderRef: platformv1alpha1.ProviderRef{Type: "AWS", ConfigRef: &platformv1alpha1.LocalObjectReference{Name: "provider-my-cluster"}}}}
		if err := s.h.WS["globex"].Create(s.ctx, mixed); err != nil {
			t.Fatal(err)
		}
		s.waitCondition(t, "globex", "mixed", platformv1alpha1.CredentialsValidCondition, platformv1alpha1.ProviderConfigNotReadyReason, "holds OTC credentials, not AWS")
		// And the type cannot be changed afterwards: kcp refuses it at admission.
		mixed = s.get(t, "globex", "mixed")
		mixed.Spec.ProviderRef.Type = "OTC"
		if err := s.h.WS["globex"].Update(s.ctx, mixed); err == nil || !strings.Contains(err.Error(), "spec.providerRef.type cannot be changed") {
			t.Errorf("changing spec.providerRef.type: %v, want refused", err)
		}
	})
}
