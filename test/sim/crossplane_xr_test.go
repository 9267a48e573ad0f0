package sim_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

var (
	xrdV2GVR = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v2", Resource: "compositeresourcedefinitions"}
	xrGVR    = schema.GroupVersionResource{Group: "infra.kubeopera.io", Version: "v1alpha1", Resource: "managedclusters"}
)

// managedCluster is an XR as the KubernetesCluster controller writes it.
func managedCluster(ns, name, provider string, spec map[string]any) *unstructured.Unstructured {
	s := map[string]any{
		"provider":             provider,
		"kubernetesVersion":    "1.31",
		"nodeFlavor":           "m5.large",
		"nodeCount":            int64(3),
		"nodeDiskSizeGiB":      int64(50),
		"region":               "eu-central-1",
		"subnetID":             "subnet-0a1b2c3d,subnet-4e5f6a7b",
		"credentialsSecretRef": map[string]any{"name": name + "-creds", "key": "credentials"},
		"kubeconfigSecretName": name + "-kubeconfig",
		"crossplane": map[string]any{
			"compositionSelector": map[string]any{"matchLabels": map[string]any{"infra.kubeopera.io/provider": strings.ToLower(provider)}},
		},
	}
	for k, v := range spec {
		if v == nil {
			delete(s, k)
			continue
		}
		s[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infra.kubeopera.io/v1alpha1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     s,
	}}
}

func TestCrossplaneXR(t *testing.T) {
	backend := framework.StartCluster(t, framework.ClusterOptions{})
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(backend.Config)
	cs := kubernetes.NewForConfigOrDie(backend.Config)
	ext := apiextensionsclient.NewForConfigOrDie(backend.Config)
	const ns = "kcp-d37f1981a6be"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sim.InstallCrossplane(ctx, backend.Config, framework.RepoRoot()); err != nil {
		t.Fatal(err)
	}

	const readyAfter = 1500 * time.Millisecond
	actor := &sim.CrossplaneXR{
		Backend:    backend.Config,
		ReadyAfter: readyAfter,
		Fail:       map[string]string{ns + "/kc-failing": "nodegroup"},
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- actor.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	// The XRD is established: its CRD generated, served, and the XRD says so.
	xrs := dyn.Resource(xrGVR).Namespace(ns)
	framework.Eventually(t, 20*time.Second, "the ManagedCluster kind is served", func() (bool, string) {
		_, err := xrs.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
	t.Logf("ManagedCluster served %s after the actor started", time.Since(started).Round(10*time.Millisecond))
	framework.Eventually(t, 10*time.Second, "XRD Established", func() (bool, string) {
		xrd, err := dyn.Resource(xrdV2GVR).Get(ctx, "managedclusters.infra.kubeopera.io", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s, r, _ := conditionOf(xrd, sim.CrossplaneTypeEstablished)
		typ, _, _ := unstructured.NestedStringMap(xrd.Object, "status", "controllers", "compositeResourceType")
		return s == "True" && r == sim.CrossplaneReasonWatchingComposite && slices.Contains(xrd.GetFinalizers(), sim.CrossplaneXRDFinalizer) &&
			typ["apiVersion"] == "infra.kubeopera.io/v1alpha1" && typ["kind"] == "ManagedCluster", fmt.Sprintf("Established %s %s, type %v", s, r, typ)
	})
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "managedclusters.infra.kubeopera.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOf(crd); owner == nil || owner.Kind != "CompositeResourceDefinition" || owner.APIVersion != "apiextensions.crossplane.io/v1" {
		t.Errorf("XR CRD controller: %+v", owner)
	}
	if crd.Spec.Scope != "Namespaced" || !slices.Contains(crd.Spec.Names.Categories, sim.CrossplaneCategoryComposite) || len(crd.Spec.Versions) != 1 ||
		!crd.Spec.Versions[0].Served || !crd.Spec.Versions[0].Storage || crd.Spec.Versions[0].Subresources == nil {
		t.Errorf("XR CRD spec: scope %s, categories %v, versions %+v", crd.Spec.Scope, crd.Spec.Names.Categories, crd.Spec.Versions)
	}
	var cols []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		cols = append(cols, c.Name)
	}
	if want := []string{"PROVIDER", "REGION", "VERSION", "ENDPOINT", "SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"}; !slices.Equal(cols, want) {
		t.Errorf("printer columns %v, want %v", cols, want)
	}
	crossplaneProps := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["crossplane"].Properties
	for _, p := range []string{"compositionRef", "compositionSelector", "compositionRevisionRef", "compositionRevisionSelector", "compositionUpdatePolicy", "resourceRefs"} {
		if _, ok := crossplaneProps[p]; !ok {
			t.Errorf("XR CRD has no spec.crossplane.%s", p)
		}
	}

	get := func(name string) *unstructured.Unstructured {
		u, err := xrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return u
	}
	create := func(u *unstructured.Unstructured) {
		t.Helper()
		if _, err := xrs.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", u.GetName(), err)
		}
	}

	// The XRD's rules refuse an AWS cluster EKS cannot build.
	_, err = xrs.Create(ctx, managedCluster(ns, "kc-one-subnet", "AWS", map[string]any{"subnetID": "subnet-0a1b2c3d"}), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at least two existing subnets") {
		t.Errorf("AWS XR with one subnet: %v, want Invalid naming the subnet rule", err)
	}

	create(managedCluster(ns, "kc-default-demo", "AWS", nil))
	create(managedCluster(ns, "kc-default-gcp", "GCP", nil))
	create(managedCluster(ns, "kc-failing", "AWS", nil))
	create(managedCluster(ns, "kc-missing-comp", "AWS", map[string]any{
		"crossplane": map[string]any{"compositionRef": map[string]any{"name": "managedcluster-nope"}},
	}))

	const wantUnready = sim.CrossplaneMessageUnreadyPrefix + "cluster, clusterauth, controlplane-policy, and 6 more"
	framework.Eventually(t, 10*time.Second, "demo XR composed and Creating", func() (bool, string) {
		u := get("kc-default-demo")
		ref, _, _ := unstructured.NestedString(u.Object, "spec", "crossplane", "compositionRef", "name")
		ss, sr, _ := conditionOf(u, sim.CrossplaneTypeSynced)
		rs, rr, rm := conditionOf(u, sim.CrossplaneTypeReady)
		ok := ref == "managedcluster-aws" && slices.Contains(u.GetFinalizers(), sim.CrossplaneCompositeFinalizer) &&
			u.GetLabels()[sim.CrossplaneCompositeLabel] == "kc-default-demo" &&
			ss == "True" && sr == sim.CrossplaneReasonReconcileSuccess && rs == "False" && rr == sim.CrossplaneReasonCreating && rm == wantUnready
		return ok, fmt.Sprintf("ref %q finalizers %v labels %v Synced %s %s Ready %s %s %q", ref, u.GetFinalizers(), u.GetLabels(), ss, sr, rs, rr, rm)
	})
	framework.Eventually(t, 10*time.Second, "no Composition for GCP", func() (bool, string) {
		u := get("kc-default-gcp")
		s, r, m := conditionOf(u, sim.CrossplaneTypeSynced)
		ref, found, _ := unstructured.NestedString(u.Object, "spec", "crossplane", "compositionRef", "name")
		return s == "False" && r == sim.CrossplaneReasonReconcileError && m == sim.CrossplaneMessageNoComposition && !found &&
			slices.Contains(u.GetFinalizers(), sim.CrossplaneCompositeFinalizer), fmt.Sprintf("Synced %s %s %q ref %q", s, r, m, ref)
	})
	framework.Eventually(t, 10*time.Second, "a compositionRef to a missing Composition", func() (bool, string) {
		s, r, m := conditionOf(get("kc-missing-comp"), sim.CrossplaneTypeSynced)
		return s == "False" && r == sim.CrossplaneReasonReconcileError &&
			m == `cannot fetch Composition: cannot get Composition: compositions.apiextensions.crossplane.io "managedcluster-nope" not found`, m
	})

	var demo *unstructured.Unstructured
	framework.Eventually(t, 20*time.Second, "demo XR Ready with status and kubeconfig", func() (bool, string) {
		demo = get("kc-default-demo")
		s, r, m := conditionOf(demo, sim.CrossplaneTypeReady)
		return s == "True" && r == sim.CrossplaneReasonAvailable, fmt.Sprintf("Ready %s %s %q", s, r, m)
	})
	clusterID, _, _ := unstructured.NestedString(demo.Object, "status", "clusterID")
	endpoint, _, _ := unstructured.NestedString(demo.Object, "status", "endpoint")
	if !strings.HasPrefix(clusterID, "arn:aws:eks:eu-central-1:123456789012:cluster/kc-default-demo-") ||
		!strings.HasPrefix(endpoint, "https://") || !strings.HasSuffix(endpoint, ".gr7.eu-central-1.eks.amazonaws.com") {
		t.Errorf("status clusterID %q endpoint %q", clusterID, endpoint)
	}
	for _, typ := range []string{sim.CrossplaneTypeSynced, sim.CrossplaneTypeResponsive} {
		if s, _, _ := conditionOf(demo, typ); s != "True" {
			t.Errorf("%s = %q, want True", typ, s)
		}
	}
	conds, _, _ := unstructured.NestedSlice(demo.Object, "status", "conditions")
	for _, c := range conds {
		if g := c.(map[string]any)["observedGeneration"]; g != demo.GetGeneration() {
			t.Errorf("condition %v: observedGeneration %v, want %d", c, g, demo.GetGeneration())
		}
	}
	if refs, found, _ := unstructured.NestedSlice(demo.Object, "spec", "crossplane", "resourceRefs"); found || len(refs) > 0 {
		t.Errorf("resourceRefs %v: no composed resource exists", refs)
	}
	secret, err := cs.CoreV1().Secrets(ns).Get(ctx, "kc-default-demo-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubeconfig Secret: %v", err)
	}
	if secret.Type != sim.CrossplaneConnectionSecretType {
		t.Errorf("Secret type %s", secret.Type)
	}
	if owner := metav1.GetControllerOf(secret); owner == nil || owner.UID != demo.GetUID() || owner.Kind != "ManagedCluster" || owner.BlockOwnerDeletion == nil || !*owner.BlockOwnerDeletion {
		t.Errorf("Secret controller %+v, want the XR", owner)
	}
	kc, err := clientcmd.Load(secret.Data[sim.ClusterAuthKubeconfigKey])
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	cur := kc.Contexts[kc.CurrentContext]
	if cur == nil || kc.Clusters[cur.Cluster] == nil || kc.Clusters[cur.Cluster].Server != endpoint || len(kc.Clusters[cur.Cluster].CertificateAuthorityData) == 0 ||
		kc.AuthInfos[cur.AuthInfo] == nil || !strings.HasPrefix(kc.AuthInfos[cur.AuthInfo].Token, "k8s-aws-v1.") {
		t.Errorf("kubeconfig: current context %q %+v", kc.CurrentContext, cur)
	}
	if string(secret.Data[sim.ClusterAuthEndpointKey]) != endpoint || len(secret.Data[sim.ClusterAuthCAKey]) == 0 {
		t.Errorf("Secret endpoint %q, clusterCA %d bytes", secret.Data[sim.ClusterAuthEndpointKey], len(secret.Data[sim.ClusterAuthCAKey]))
	}

	// A composed resource that never syncs.
	framework.Consistently(t, readyAfter+time.Second, "the failing XR never becomes Ready", func() (bool, string) {
		u := get("kc-failing")
		rs, _, _ := conditionOf(u, sim.CrossplaneTypeReady)
		return rs != "True", rs
	})
	u := get("kc-failing")
	if s, r, m := conditionOf(u, sim.CrossplaneTypeSynced); s != "False" || r != sim.CrossplaneReasonReconcileError || m != sim.CrossplaneMessageUnsyncedPrefix+"nodegroup" {
		t.Errorf("failing XR Synced %s %s %q", s, r, m)
	}
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "kc-failing-kubeconfig", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("failing XR's kubeconfig Secret: %v, want none", err)
	}

	// Deletion: held while the composed resources go, then the Secret and the finalizer.
	if err := xrs.Delete(ctx, "kc-default-demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 10*time.Second, "demo XR Deleting", func() (bool, string) {
		u := get("kc-default-demo")
		if u == nil {
			return false, "already gone"
		}
		s, r, _ := conditionOf(u, sim.CrossplaneTypeReady)
		return s == "False" && r == sim.CrossplaneReasonDeleting, r
	})
	framework.Eventually(t, 20*time.Second, "demo XR and its Secret gone", func() (bool, string) {
		_, err := cs.CoreV1().Secrets(ns).Get(ctx, "kc-default-demo-kubeconfig", metav1.GetOptions{})
		return get("kc-default-demo") == nil && apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if got := actor.Deleted(); !slices.Equal(got, []string{ns + "/kc-default-demo"}) {
		t.Errorf("Deleted() = %v", got)
	}

	// Deleting the XRD deletes every XR, then the CRD, then lets the XRD go.
	if err := dyn.Resource(xrdV2GVR).Delete(ctx, "managedclusters.infra.kubeopera.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "XRD, CRD and XRs gone", func() (bool, string) {
		_, xrdErr := dyn.Resource(xrdV2GVR).Get(ctx, "managedclusters.infra.kubeopera.io", metav1.GetOptions{})
		_, crdErr := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "managedclusters.infra.kubeopera.io", metav1.GetOptions{})
		return apierrors.IsNotFound(xrdErr) && apierrors.IsNotFound(crdErr), fmt.Sprintf("XRD: %v; CRD: %v", xrdErr, crdErr)
	})
	got := actor.Deleted()
	slices.Sort(got[1:])
	if want := []string{ns + "/kc-default-demo", ns + "/kc-default-gcp", ns + "/kc-failing", ns + "/kc-missing-comp"}; !slices.Equal(got, want) {
		t.Errorf("Deleted() = %v, want %v", got, want)
	}
}
