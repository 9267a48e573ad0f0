package e2e

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	xrpkg "github.com/kubeopera/kubeopera/internal/crossplane/xr"
	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/bootstrap"
)

// KubernetesClusters of providers other than OTC through the manager binary: Crossplane core and
// function-patch-and-transform run on the backend (sim.StartCrossplane) with config/crossplane,
// as make run runs them, and sim.AWSProvider plays provider-upjet-aws and AWS under what
// Crossplane composes.

const (
	// awsSample is the AWS sample a tenant applies (namespace demo-aws, KubernetesCluster
	// eks-cluster); awsCatalogFile the catalog of AWS instance types make run loads.
	awsSample      = "config/samples/kubernetescluster-aws.yaml"
	awsCatalogFile = "config/samples/aws-flavors.yaml"
)

// crossplaneAWS is the suite's Crossplane, started by the first test that needs it.
var crossplaneAWS lazy[*sim.AWSProvider]

// crossplaneAWS returns the AWS provider played under the suite's real Crossplane, starting both
// (and loading the AWS catalog into the platform workspace) at the first call.
func (e *env) crossplaneAWS(t *testing.T) *sim.AWSProvider {
	t.Helper()
	return crossplaneAWS.get(t, e, "Crossplane", func() (*sim.AWSProvider, func(), error) {
		ctx := context.Background()
		logf, err := os.Create(filepath.Join(e.dir, "crossplane.log"))
		if err != nil {
			return nil, nil, err
		}
		xp, err := sim.StartCrossplane(ctx, sim.CrossplaneOptions{Backend: e.backend.Config, ToolsDir: filepath.Dir(framework.ToolsBin()),
			Dir: filepath.Join(e.dir, "crossplane"), Log: logf})
		if err != nil {
			_ = logf.Close()
			return nil, nil, fmt.Errorf("%w (log in %s)", err, logf.Name())
		}
		stop := func() { xp.Stop(); _ = logf.Close() }
		if err := sim.InstallAWSProviderCRDs(e.backend.Config, framework.RepoRoot()); err != nil {
			stop()
			return nil, nil, err
		}
		if err := sim.ApplyCrossplaneConfig(ctx, e.backend.Config, framework.RepoRoot()); err != nil {
			stop()
			return nil, nil, err
		}
		if err := e.loadCatalog(ctx, awsCatalogFile); err != nil {
			stop()
			return nil, nil, err
		}
		// AWS deletes slower than it creates (EKS takes minutes either way), so a cluster gone
		// before its resources would show.
		p := &sim.AWSProvider{Backend: e.backend.Config, ReadyAfter: 500 * time.Millisecond, DeleteAfter: 3 * time.Second}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Run(pctx) }()
		return p, func() { cancel(); <-done; stop() }, nil
	})
}

// loadCatalog creates the flavors of a sample catalog in the platform workspace (the catalog's
// kind may be served a moment after the platform workspace's bootstrap: each create is retried
// for a minute).
func (e *env) loadCatalog(ctx context.Context, file string) error {
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), file))
	if err != nil {
		return err
	}
	objs, err := manifests.Decode(raw)
	if err != nil {
		return err
	}
	c, err := client.New(e.kcpConfig(bootstrap.PlatformWorkspace), client.Options{})
	if err != nil {
		return err
	}
	for _, o := range objs {
		var last error
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			last = c.Create(ctx, o.DeepCopy())
			return last == nil || apierrors.IsAlreadyExists(last), nil
		}); err != nil {
			return fmt.Errorf("failed to create %s %s from %s in %s: %v (%w)", o.GetKind(), o.GetName(), file, bootstrap.PlatformWorkspace, last, err)
		}
	}
	return nil
}

// TestAWSKubernetesClusterComposedByCrossplane: the AWS sample as a tenant applies it goes Ready
// through a ManagedCluster that the real Crossplane composes; the tenant gets the kubeconfig the
// composed ClusterAuth published; deleting the KubernetesCluster ends only after AWS deleted
// every composed resource.
func TestAWSKubernetesClusterComposedByCrossplane(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	aws := e.crossplaneAWS(t)
	ctx := context.Background()
	c, lc, _ := e.tenantWorkspace(t, "kc-aws")
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), awsSample))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		framework.Eventually(t, time.Minute, "create "+o.GetKind()+" "+o.GetName(), func() (bool, string) {
			err := c.Create(ctx, o.DeepCopy())
			return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err)
		})
	}
	key := client.ObjectKey{Namespace: "demo-aws", Name: "eks-cluster"}
	kc := &platformv1alpha1.KubernetesCluster{}
	framework.Eventually(t, 4*time.Minute, "KubernetesCluster demo-aws/eks-cluster Ready", func() (bool, string) {
		if err := c.Get(ctx, key, kc); err != nil {
			return false, err.Error()
		}
		return kc.Status.Phase == platformv1alpha1.KubernetesClusterPhaseReady, describeKC(kc)
	})

	// The ManagedCluster Crossplane composed, and the kubeconfig its ClusterAuth published,
	// delivered to the tenant.
	ns := workspaces.Namespace(lc)
	dyn := dynamic.NewForConfigOrDie(e.backend.Config)
	xrs, err := dyn.Resource(xrpkg.GVK.GroupVersion().WithResource("managedclusters")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(xrs.Items) != 1 {
		t.Fatalf("ManagedClusters in %s: %v (%v)", ns, xrs, err)
	}
	endpoint, _, _ := unstructured.NestedString(xrs.Items[0].Object, "status", "endpoint")
	delivered := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "demo-aws", Name: "eks-cluster-kubeconfig"}, delivered); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(delivered.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.Clusters[kctx.Cluster] == nil || cfg.Clusters[kctx.Cluster].Server != endpoint || !strings.HasSuffix(endpoint, ".eu-central-1.eks.amazonaws.com") ||
		!strings.HasPrefix(cfg.AuthInfos[kctx.AuthInfo].Token, "k8s-aws-v1.") {
		t.Errorf("delivered kubeconfig: context %+v, want the EKS cluster at the ManagedCluster's endpoint %s with an STS token", kctx, endpoint)
	}

	// Deleting it: gone only once every composed resource is.
	if err := c.Delete(ctx, kc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the KubernetesCluster gone", func() (bool, string) {
		err := c.Get(ctx, key, &platformv1alpha1.KubernetesCluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	for _, gvr := range []schema.GroupVersionResource{sim.AWSRoleGVR, sim.AWSRolePolicyAttachmentGVR, sim.AWSClusterGVR, sim.AWSNodeGroupGVR, sim.AWSClusterAuthGVR} {
		l, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, mr := range l.Items {
			t.Errorf("the KubernetesCluster went while %s %s was still being deleted", mr.GetKind(), mr.GetName())
		}
	}
	deleted := aws.Deleted()
	for _, kind := range []string{"Role", "RolePolicyAttachment", "Cluster", "NodeGroup", "ClusterAuth"} {
		if !slices.ContainsFunc(deleted, func(d string) bool { return strings.HasPrefix(d, kind+"/"+ns+"/") }) {
			t.Errorf("AWS never deleted the cluster's %s: %v", kind, deleted)
		}
	}
}
