package devenv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/bootstrap"
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
		err := kcpClient(t, cfg).Get(ctx, client.ObjectKey{Name: corev1alpha1.LogicalClusterName}, &corev1alpha1.LogicalCluster{})
		switch {
		case s.Name == "shard-1" && err != nil:
			t.Errorf("shard-1 does not serve the workspace it was placed on: %v", err)
		case s.Name == "root" && !apierrors.IsNotFound(err):
			t.Errorf("the root shard answers for the workspace placed on shard-1: %v, want NotFound", err)
		}
	}

	// The export's endpoint slice lists shard-1's virtual workspace once the binding is there, and
	// the manager's identity reads the workspace's Tenants through it.
	platform := workspaces.ClusterConfig(k.Config, bootstrap.PlatformWorkspace)
	platform.Timeout = 20 * time.Second
	var vw string
	framework.Eventually(t, 2*time.Minute, "shard-1's URL in the kubeopera.io endpoint slice", func() (bool, string) {
		es := &apisv1alpha1.APIExportEndpointSlice{}
		if err := kcpClient(t, platform).Get(ctx, client.ObjectKey{Name: "kubeopera.io"}, es); err != nil {
			return false, err.Error()
		}
		for _, ep := range es.Status.APIExportEndpoints {
			if strings.HasPrefix(ep.URL, k.Shards[1].BaseURL+"/") {
				vw = ep.URL
				return true, ""
			}
		}
		return false, fmt.Sprint(es.Status.APIExportEndpoints)
	})
	t.Logf("shard-1's virtual workspace: %s", vw)
	user, err := k.ContextConfig(devenv.ManagerKCPUser)
	if err != nil {
		t.Fatal(err)
	}
	user.Host = vw + "/clusters/" + lc
	user.Timeout = 20 * time.Second
	scheme := runtime.NewScheme()
	if err := kov1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the manager's identity lists the workspace's Tenants on shard-1", func() (bool, string) {
		c, err := client.New(user, client.Options{Scheme: scheme})
		if err == nil {
			err = c.List(ctx, &kov1alpha1.TenantList{})
		}
		return err == nil, fmt.Sprint(err)
	})
}

// kcpClient is a client of cfg that knows kcp's types.
func kcpClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: workspaces.KCPScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
