package devenv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/bootstrap"
)

var (
	logicalClusterGVR = schema.GroupVersionResource{Group: "core.kcp.io", Version: "v1alpha1", Resource: "logicalclusters"}
	endpointSliceGVR  = schema.GroupVersionResource{Group: "apis.kcp.io", Version: "v1alpha1", Resource: "apiexportendpointslices"}
	tenantGVR         = schema.GroupVersionResource{Group: "kubeopera.io", Version: "v1alpha1", Resource: "tenants"}
)

// TestShardedKCP: two shards behind the front proxy share what the platform needs. The platform
// is installed through the proxy; a tenant workspace asked for on shard-1 lives there (shard-1
// serves its LogicalCluster, the root shard does not); its type's default bindings to the
// platform's exports resolve across shards (the exports' workspace may be on either shard: kcp
// replicates APIExports, schemas, WorkspaceTypes and the binding RBAC through the cache server);
// the export's endpoint slice lists shard-1's virtual workspace, and the manager's identity (the
// "user" context) reads the workspace's Tenants there.
func TestShardedKCP(t *testing.T) {
	framework.SkipWithoutServers(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "kcp.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logf.Close() }()
	k, err := devenv.StartShardedKCP(ctx, devenv.ShardedKCPOptions{BinDir: framework.ToolsBin(), RootDir: filepath.Join(dir, "kcp"), Shards: 2, Output: logf})
	if err != nil {
		t.Fatalf("%v (log in %s)", err, logf.Name())
	}
	t.Cleanup(k.Stop)
	if len(k.Shards) != 2 || k.Shards[0].Name != "root" || k.Shards[1].Name != "shard-1" {
		t.Fatalf("shards %+v, want root and shard-1", k.Shards)
	}

	t.Logf("kcp up: shards %+v, front proxy %s", k.Shards, k.FrontProxyURL)
	if err := bootstrap.Bootstrap(ctx, k.Config, bootstrap.PlatformWorkspace); err != nil {
		t.Fatal(err)
	}
	if err := bootstrap.BindManagerRole(ctx, k.Config, bootstrap.PlatformWorkspace, devenv.ManagerKCPUser); err != nil {
		t.Fatal(err)
	}
	if _, err := workspaces.EnsureWorkspaceOn(ctx, k.Config, "root", "orgs", workspaces.WorkspaceType{}, "root"); err != nil {
		t.Fatal(err)
	}
	lc, err := workspaces.EnsureWorkspaceOn(ctx, k.Config, "root:orgs", "on-shard-1", workspaces.TenantWorkspaceTypeIn(bootstrap.PlatformWorkspace), "shard-1")
	if err != nil {
		t.Fatal(err)
	}

	t.Logf("tenant workspace %s made", lc)
	// Where it lives: shard-1 serves its LogicalCluster, the root shard has none.
	admin, err := k.ContextConfig("system:admin")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range k.Shards {
		cfg := rest.CopyConfig(admin)
		cfg.Timeout = 20 * time.Second
		cfg.Host = s.BaseURL + "/clusters/" + lc
		_, err := dynamic.NewForConfigOrDie(cfg).Resource(logicalClusterGVR).Get(ctx, "cluster", metav1.GetOptions{})
		switch {
		case s.Name == "shard-1" && err != nil:
			t.Errorf("shard-1 does not serve the workspace it was placed on: %v", err)
		case s.Name == "root" && !apierrors.IsNotFound(err):
			t.Errorf("the root shard answers for the workspace placed on shard-1: %v, want NotFound", err)
		}
	}

	// The export's endpoint slice lists shard-1's virtual workspace once the binding is there, and
	// the manager's identity reads the workspace's Tenants through it.
	platform := rest.CopyConfig(k.Config)
	platform.Timeout = 20 * time.Second
	platform.Host = strings.TrimSuffix(platform.Host, "/clusters/root") + "/clusters/" + bootstrap.PlatformWorkspace
	var vw string
	framework.Eventually(t, 2*time.Minute, "shard-1's URL in the kubeopera.io endpoint slice", func() (bool, string) {
		es, err := dynamic.NewForConfigOrDie(platform).Resource(endpointSliceGVR).Get(ctx, "kubeopera.io", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		eps, _, _ := unstructured.NestedSlice(es.Object, "status", "endpoints")
		for _, ep := range eps {
			if u, _ := ep.(map[string]any)["url"].(string); strings.HasPrefix(u, k.Shards[1].BaseURL+"/") {
				vw = u
				return true, ""
			}
		}
		return false, fmt.Sprint(eps)
	})
	t.Logf("shard-1's virtual workspace: %s", vw)
	user, err := k.ContextConfig(devenv.ManagerKCPUser)
	if err != nil {
		t.Fatal(err)
	}
	user.Host = vw + "/clusters/" + lc
	user.Timeout = 20 * time.Second
	framework.Eventually(t, time.Minute, "the manager's identity lists the workspace's Tenants on shard-1", func() (bool, string) {
		_, err := dynamic.NewForConfigOrDie(user).Resource(tenantGVR).List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err)
	})
}
