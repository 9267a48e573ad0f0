package sim_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	xrpkg "github.com/kubeopera/kubeopera/internal/crossplane/xr"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

var xrGVR = schema.GroupVersionResource{Group: "infra.kubeopera.io", Version: "v1alpha1", Resource: "managedclusters"}

// crossplaneBackend is a backend with Crossplane, function-patch-and-transform, the AWS
// provider's CRDs and config/crossplane, and the AWS provider played.
type crossplaneBackend struct {
	cfg      *rest.Config
	dyn      dynamic.Interface
	cs       kubernetes.Interface
	provider *sim.AWSProvider
}

func startCrossplaneBackend(t *testing.T, readyAfter time.Duration) *crossplaneBackend {
	t.Helper()
	b := framework.StartBackend(t)
	cfg := rest.CopyConfig(b.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	sim.CrossplaneForTest(t, cfg, filepath.Dir(framework.ToolsBin()))
	if err := sim.InstallAWSProviderCRDs(cfg, framework.RepoRoot()); err != nil {
		t.Fatal(err)
	}
	if err := sim.ApplyCrossplaneConfig(t.Context(), cfg, framework.RepoRoot()); err != nil {
		t.Fatal(err)
	}
	return &crossplaneBackend{cfg: cfg, dyn: dynamic.NewForConfigOrDie(cfg), cs: kubernetes.NewForConfigOrDie(cfg),
		provider: sim.AWSProviderForTest(t, cfg, readyAfter, 0)}
}

// TestStartCrossplane: Crossplane installed the Function from its package, with the
// capabilities of the package's metadata, and composes with it.
func TestStartCrossplane(t *testing.T) {
	b := framework.StartBackend(t)
	sim.CrossplaneForTest(t, b.Config, filepath.Dir(framework.ToolsBin()))
	dyn := dynamic.NewForConfigOrDie(b.Config)
	fn, err := dyn.Resource(sim.CrossplaneFunctionGVR).Get(t.Context(), sim.FunctionPatchAndTransform, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pkg, _, _ := unstructured.NestedString(fn.Object, "spec", "package")
	if !strings.HasPrefix(pkg, "127.0.0.1:") || !strings.HasSuffix(pkg, "/crossplane-contrib/function-patch-and-transform:v0.5.0") {
		t.Errorf("Function package %q", pkg)
	}
	revs, err := dyn.Resource(sim.CrossplaneFunctionRevisionGVR).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(revs.Items) != 1 {
		t.Fatalf("FunctionRevisions: %v %v", revs, err)
	}
	rev := revs.Items[0]
	caps, _, _ := unstructured.NestedStringSlice(rev.Object, "status", "capabilities")
	endpoint, _, _ := unstructured.NestedString(rev.Object, "status", "endpoint")
	// meta.pkg.crossplane.io Function without capabilities: a composition function
	// (apis/pkg/meta/v1/interfaces.go GetCapabilities).
	if !slices.Equal(caps, []string{"composition"}) || endpoint != "127.0.0.1:9443" {
		t.Errorf("FunctionRevision %s: capabilities %v, endpoint %q", rev.GetName(), caps, endpoint)
	}
}

// awsXR is the ManagedCluster the KubernetesCluster controller writes for an AWS cluster.
func awsXR(ns, name, composition string) *unstructured.Unstructured {
	x := xrpkg.New(xrpkg.Params{Name: name, Namespace: ns, Provider: "AWS", Region: "eu-central-1", KubernetesVersion: "v1.31.2",
		NodeFlavor: "m5.large", NodeCount: 3, NodeDiskSizeGiB: 50, SubnetIDs: xrpkg.SubnetIDs("subnet-0aaa,subnet-0bbb"), KeyPair: "ops",
		CredentialsSecretName: name + "-creds", CredentialsKey: "credentials", KubeconfigSecretName: name + "-conn"})
	if composition != "" {
		x.SetCompositionReference(&corev1.ObjectReference{Name: composition})
	}
	return x.GetUnstructured()
}

// composed reads the resources Crossplane composed for an XR, by Composition resource name
// (annotation crossplane.io/composition-resource-name).
func (b *crossplaneBackend) composed(t *testing.T, xr *unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
	for _, r := range refs {
		m, _ := r.(map[string]any)
		gv, _ := schema.ParseGroupVersion(fmt.Sprint(m["apiVersion"]))
		gvr := schema.GroupVersionResource{Group: gv.Group, Version: gv.Version, Resource: strings.ToLower(fmt.Sprint(m["kind"])) + "s"}
		u, err := b.dyn.Resource(gvr).Namespace(xr.GetNamespace()).Get(t.Context(), fmt.Sprint(m["name"]), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("composed %v: %v", m, err)
		}
		out[u.GetAnnotations()["crossplane.io/composition-resource-name"]] = u
	}
	return out
}

// wrongPatches compares the composed resources of xr (built from awsXR) with what the AWS
// Composition's patches, and the references the provider resolved, must have written, and
// returns one line per difference. The expected values are written out from the XR's spec,
// not read from the Composition: a patch path or transform that changes shows up here.
func wrongPatches(xr *unstructured.Unstructured, c map[string]*unstructured.Unstructured) []string {
	var out []string
	get := func(name string, path ...string) any {
		u := c[name]
		if u == nil {
			return "<not composed>"
		}
		v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		if !found {
			return "<absent>"
		}
		return v
	}
	want := func(name string, v any, path ...string) {
		if got := get(name, path...); fmt.Sprint(got) != fmt.Sprint(v) {
			out = append(out, fmt.Sprintf("%s %s = %v, want %v", name, strings.Join(path, "."), got, v))
		}
	}
	name, ns := xr.GetName(), xr.GetNamespace()
	extName := func(res string) string {
		if u := c[res]; u != nil {
			return u.GetAnnotations()["crossplane.io/external-name"]
		}
		return "<not composed>"
	}
	roleARN := func(res string) string { return "arn:aws:iam::123456789012:role/" + extName(res) }

	want("providerconfig", name+"-aws", "metadata", "name")
	want("providerconfig", "Secret", "spec", "credentials", "source")
	want("providerconfig", name+"-creds", "spec", "credentials", "secretRef", "name")
	want("providerconfig", "credentials", "spec", "credentials", "secretRef", "key")
	want("providerconfig", ns, "spec", "credentials", "secretRef", "namespace")
	for _, res := range []string{"controlplane-role", "controlplane-policy", "node-role", "node-policy-worker", "node-policy-cni", "node-policy-ecr", "cluster", "nodegroup", "clusterauth"} {
		want(res, name+"-aws", "spec", "providerConfigRef", "name")
		want(res, "ProviderConfig", "spec", "providerConfigRef", "kind")
		if u := c[res]; u != nil {
			if o := metav1.GetControllerOf(u); o == nil || o.UID != xr.GetUID() || o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
				out = append(out, fmt.Sprintf("%s: controller reference %+v, want the XR's, blocking its deletion", res, o))
			}
		}
	}
	for _, res := range []string{"cluster", "nodegroup", "clusterauth"} {
		want(res, "eu-central-1", "spec", "forProvider", "region")
	}
	want("controlplane-policy", "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy", "spec", "forProvider", "policyArn")
	want("controlplane-policy", extName("controlplane-role"), "spec", "forProvider", "role")
	for res, policy := range map[string]string{"node-policy-worker": "AmazonEKSWorkerNodePolicy", "node-policy-cni": "AmazonEKS_CNI_Policy", "node-policy-ecr": "AmazonEC2ContainerRegistryReadOnly"} {
		want(res, "arn:aws:iam::aws:policy/"+policy, "spec", "forProvider", "policyArn")
		want(res, extName("node-role"), "spec", "forProvider", "role")
	}
	want("cluster", "1.31", "spec", "forProvider", "version")
	want("cluster", []any{"subnet-0aaa", "subnet-0bbb"}, "spec", "forProvider", "vpcConfig", "subnetIds")
	want("cluster", roleARN("controlplane-role"), "spec", "forProvider", "roleArn")
	want("nodegroup", []any{"subnet-0aaa", "subnet-0bbb"}, "spec", "forProvider", "subnetIds")
	want("nodegroup", []any{"m5.large"}, "spec", "forProvider", "instanceTypes")
	for _, f := range []string{"desiredSize", "minSize", "maxSize"} {
		want("nodegroup", int64(3), "spec", "forProvider", "scalingConfig", f)
	}
	want("nodegroup", int64(50), "spec", "forProvider", "diskSize")
	want("nodegroup", "ops", "spec", "forProvider", "remoteAccess", "ec2SshKey")
	want("nodegroup", extName("cluster"), "spec", "forProvider", "clusterName")
	want("nodegroup", roleARN("node-role"), "spec", "forProvider", "nodeRoleArn")
	want("clusterauth", name+"-conn", "spec", "writeConnectionSecretToRef", "name")
	want("clusterauth", extName("cluster"), "spec", "forProvider", "clusterName")

	// What the ToCompositeFieldPath patches wrote back.
	clusterARN, endpoint := get("cluster", "status", "atProvider", "arn"), get("cluster", "status", "atProvider", "endpoint")
	for path, v := range map[string]any{"clusterID": clusterARN, "endpoint": endpoint} {
		if got, _, _ := unstructured.NestedString(xr.Object, "status", path); got != fmt.Sprint(v) {
			out = append(out, fmt.Sprintf("XR status.%s = %q, want %v", path, got, v))
		}
	}
	return out
}

// waitXRReady waits until Crossplane says the XR is Synced and Ready and returns it.
func (b *crossplaneBackend) waitXRReady(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	framework.Eventually(t, 2*time.Minute, "ManagedCluster "+ns+"/"+name+" Ready", func() (bool, string) {
		var err error
		if u, err = b.dyn.Resource(xrGVR).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		ready, reason, msg := xrpkg.Status(xrpkg.From(u))
		return ready, reason + ": " + msg
	})
	return u
}

// brokenComposition returns a copy of the AWS Composition named name, labelled provider aws-<name>,
// with break applied to its patch-and-transform input's resources.
func brokenComposition(t *testing.T, name string, breakIt func(resources []any)) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "crossplane", "composition-aws.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	if err := dec.Decode(&u.Object); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	u.SetName(name)
	u.SetLabels(map[string]string{xrpkg.ProviderLabel: "aws-" + name})
	steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "pipeline")
	step := steps[0].(map[string]any)
	resources, _, _ := unstructured.NestedSlice(step, "input", "resources")
	breakIt(resources)
	if err := unstructured.SetNestedSlice(step, resources, "input", "resources"); err != nil {
		t.Fatal(err)
	}
	steps[0] = step
	if err := unstructured.SetNestedSlice(u.Object, steps, "spec", "pipeline"); err != nil {
		t.Fatal(err)
	}
	return u
}

// setPatchField sets field of the patch of resource res whose toFieldPath is to.
func setPatchField(t *testing.T, resources []any, res, to, field, value string) {
	t.Helper()
	for _, r := range resources {
		m := r.(map[string]any)
		if m["name"] != res {
			continue
		}
		for _, p := range m["patches"].([]any) {
			pm := p.(map[string]any)
			if pm["toFieldPath"] == to {
				pm[field] = value
				return
			}
		}
	}
	t.Fatalf("no patch of %s to %s", res, to)
}

// TestCrossplaneComposesAWS: real Crossplane and function-patch-and-transform compose the AWS
// Composition of config/crossplane for a ManagedCluster; the played provider makes the composed
// resources ready, publishes the ClusterAuth's kubeconfig, and Crossplane reports the XR Ready
// with the cluster's ARN and endpoint. The composed resources carry what the patches wrote, and
// copies of the Composition with one patch path broken are caught by the same checks.
// Deleting the XR in the foreground removes it only after the composed resources are gone;
// Crossplane itself lets go at once (a background deletion leaves them behind it).
func TestCrossplaneComposesAWS(t *testing.T) {
	b := startCrossplaneBackend(t, 2*time.Second)
	ctx := t.Context()
	const ns = "kcp-d37f1981a6be"
	if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Mutants of the Composition, each with one patch path wrong. A path the composed kind does
	// not have is refused by Crossplane's server-side apply (the XR is not Synced); one it has
	// but should not write, or a wrong XR field, shows in the composed values.
	mutants := map[string]struct {
		breakIt func([]any)
		// diff is what wrongPatches must find; refused what the XR's Synced message must hold.
		diff, refused string
	}{
		"wrong-field": {breakIt: func(rs []any) {
			setPatchField(t, rs, "nodegroup", "spec.forProvider.scalingConfig.desiredSize", "toFieldPath", "spec.forProvider.scalingConfig.maxSize")
		}, diff: "nodegroup spec.forProvider.scalingConfig.desiredSize = 1, want 3"},
		"wrong-from": {breakIt: func(rs []any) {
			setPatchField(t, rs, "cluster", "spec.forProvider.version", "fromFieldPath", "spec.kubernetesVersio")
		}, diff: "cluster spec.forProvider.version = <absent>, want 1.31"},
		"wrong-to": {breakIt: func(rs []any) {
			setPatchField(t, rs, "nodegroup", "spec.forProvider.scalingConfig.desiredSize", "toFieldPath", "spec.forProvider.scalingConfig.desiredSiz")
		}, refused: ".spec.forProvider.scalingConfig.desiredSiz: field not declared in schema"},
	}
	for name, m := range mutants {
		if _, err := b.dyn.Resource(sim.CrossplaneCompositionGVR).Create(ctx, brokenComposition(t, name, m.breakIt), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	xrs := b.dyn.Resource(xrGVR).Namespace(ns)
	if _, err := xrs.Create(ctx, awsXR(ns, "good", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name := range mutants {
		if _, err := xrs.Create(ctx, awsXR(ns, name, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	good := b.waitXRReady(t, ns, "good")
	if ref := good.Object["spec"].(map[string]any)["crossplane"].(map[string]any)["compositionRef"]; fmt.Sprint(ref) != "map[name:managedcluster-aws]" {
		t.Errorf("the XR's composition: %v", ref)
	}
	composed := b.composed(t, good)
	if len(composed) != 10 {
		t.Errorf("composed %d resources, want 10: %v", len(composed), slices.Sorted(func(yield func(string) bool) {
			for k := range composed {
				if !yield(k) {
					return
				}
			}
		}))
	}
	for _, d := range wrongPatches(good, composed) {
		t.Error(d)
	}
	// The kubeconfig, as the provider's ClusterAuth publishes it.
	conn, err := b.cs.CoreV1().Secrets(ns).Get(ctx, "good-conn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := metav1.GetControllerOf(conn); o == nil || o.UID != composed["clusterauth"].GetUID() || conn.Type != "connection.crossplane.io/v1alpha1" {
		t.Errorf("connection Secret: controller %+v, type %s", o, conn.Type)
	}
	kc, err := clientcmd.Load(conn.Data[sim.ClusterAuthKubeconfigKey])
	endpoint, _, _ := unstructured.NestedString(good.Object, "status", "endpoint")
	cluster := composed["cluster"].GetAnnotations()["crossplane.io/external-name"]
	if err != nil || kc.CurrentContext != cluster || kc.Clusters[cluster] == nil || kc.Clusters[cluster].Server != endpoint ||
		!strings.HasPrefix(kc.AuthInfos[cluster].Token, "k8s-aws-v1.") || string(conn.Data[sim.ClusterAuthEndpointKey]) != endpoint {
		t.Errorf("kubeconfig %+v (%v), endpoint key %q; want cluster %s at %s", kc, err, conn.Data[sim.ClusterAuthEndpointKey], cluster, endpoint)
	}

	// Each mutant is caught.
	for name, m := range mutants {
		if m.refused != "" {
			framework.Eventually(t, time.Minute, "Crossplane refuses "+name, func() (bool, string) {
				x, err := xrs.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				ready, _, msg := xrpkg.Status(xrpkg.From(x))
				return !ready && strings.Contains(msg, m.refused), msg
			})
			continue
		}
		x := b.waitXRReady(t, ns, name)
		if diffs := wrongPatches(x, b.composed(t, x)); !slices.Equal(diffs, []string{m.diff}) {
			t.Errorf("Composition %s: the checks found %q, want exactly %q", name, diffs, m.diff)
		}
	}

	// Background deletion: Crossplane removes its finalizer at once and the XR is gone while its
	// composed resources are still being deleted by the provider.
	if err := xrs.Delete(ctx, "wrong-field", metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "wrong-field gone", func() (bool, string) {
		_, err := xrs.Get(ctx, "wrong-field", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if left := b.composedOf(t, ns, "wrong-field"); len(left) == 0 {
		t.Error("a background deletion left nothing behind the XR: the played provider deletes nothing slowly enough to tell")
	}

	// Foreground deletion: gone only after every composed resource is.
	if err := xrs.Delete(ctx, "good", metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "good gone", func() (bool, string) {
		u, err := xrs.Get(ctx, "good", metav1.GetOptions{})
		if err == nil {
			return false, fmt.Sprintf("finalizers %v", u.GetFinalizers())
		}
		return apierrors.IsNotFound(err), err.Error()
	})
	if left := b.composedOf(t, ns, "good"); len(left) > 0 {
		t.Errorf("the XR went before what was composed for it: %v", left)
	}
	deleted := b.provider.Deleted()
	for _, kind := range []string{"Role", "RolePolicyAttachment", "Cluster", "NodeGroup", "ClusterAuth"} {
		if !slices.ContainsFunc(deleted, func(d string) bool { return strings.HasPrefix(d, kind+"/"+ns+"/good-") }) {
			t.Errorf("the provider never deleted good's %s: %v", kind, deleted)
		}
	}
	if _, err := b.cs.CoreV1().Secrets(ns).Get(ctx, "good-conn", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the connection Secret outlived its ClusterAuth: %v", err)
	}
}

// composedOf lists the managed resources still there that Crossplane composed for XR name.
func (b *crossplaneBackend) composedOf(t *testing.T, ns, name string) []string {
	t.Helper()
	var out []string
	for _, gvr := range []schema.GroupVersionResource{sim.AWSRoleGVR, sim.AWSRolePolicyAttachmentGVR, sim.AWSClusterGVR, sim.AWSNodeGroupGVR, sim.AWSClusterAuthGVR} {
		l, err := b.dyn.Resource(gvr).Namespace(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "crossplane.io/composite=" + name})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range l.Items {
			out = append(out, gvr.Resource+"/"+u.GetName())
		}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
