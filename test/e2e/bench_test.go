package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// BenchmarkEngagedWorkspaceMemory measures what engaging a tenant workspace costs the manager:
// heap per engaged workspace (each with one Tenant being provisioned) and the time from creating
// the workspace to the Tenant reaching Provisioning. The manager runs in this process, so its heap
// is this process's heap. Run with `make bench`.
func BenchmarkEngagedWorkspaceMemory(b *testing.B) {
	const workspacesPerRun = 10
	ctrl.SetLogger(logr.Discard())
	kcp := framework.StartKCP(b)
	backend := framework.StartBackend(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := workspaces.Bootstrap(ctx, kcp.Config, workspaces.PlatformWorkspace); err != nil {
		b.Fatal(err)
	}
	if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		b.Fatal(err)
	}

	opts := manager.DefaultOptions()
	opts.KCPKubeconfig = kcp.KubeconfigPath
	opts.BackendKubeconfig = backend.KubeconfigPath
	opts.VClusterChart = filepath.Join(framework.RepoRoot(), "test", "charts", "vcluster")
	opts.HelmCacheDir = b.TempDir()
	opts.KubeoperaAPIBaseURL = ""
	opts.MetricsAddr, opts.ProbeAddr, opts.LeaderElect = "0", "0", false
	opts.TenantRequeueInterval = time.Minute
	cfgs, err := opts.Configs()
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		if err := manager.Run(ctx, opts, cfgs); err != nil {
			b.Error(err)
		}
	}()

	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		before := settledHeap(b, heap)
		b.StartTimer()
		start := time.Now()
		for w := range workspacesPerRun {
			name := fmt.Sprintf("bench-%d-%d", i, w)
			if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root:orgs", name, workspaces.TenantWorkspaceTypeIn(workspaces.PlatformWorkspace)); err != nil {
				b.Fatal(err)
			}
			c, err := client.New(workspaces.ClusterConfig(kcp.Config, "root:orgs:"+name), client.Options{Scheme: manager.Scheme()})
			if err != nil {
				b.Fatal(err)
			}
			tn := &kov1alpha1.Tenant{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "t"},
				Spec:       kov1alpha1.TenantSpec{UserID: "u", TenantName: "bench-tenant", CloudSpaceID: name},
			}
			tn.Spec.Quota.CPU.Set(1)
			tn.Spec.Quota.Memory.Set(1 << 30)
			framework.Eventually(b, 2*time.Minute, "Tenant created in "+name, func() (bool, string) {
				err := c.Create(ctx, tn)
				return err == nil, fmt.Sprint(err)
			})
			framework.Eventually(b, 2*time.Minute, "Tenant in "+name+" Provisioning", func() (bool, string) {
				got := &kov1alpha1.Tenant{}
				err := c.Get(ctx, client.ObjectKeyFromObject(tn), got)
				return err == nil && got.Status.Phase == kov1alpha1.TenantPhaseProvisioning, fmt.Sprintf("err=%v phase=%q", err, got.Status.Phase)
			})
		}
		elapsed := time.Since(start)
		b.StopTimer()
		after := heap()
		b.ReportMetric(float64(int64(after)-int64(before))/workspacesPerRun, "heap-bytes/workspace")
		b.ReportMetric(elapsed.Seconds()/workspacesPerRun, "s/workspace-to-Provisioning")
		b.StartTimer()
	}
}

// settledHeap returns the heap once the manager has settled (engaging workspaces, first
// reconciles): two readings a poll apart differ by less than 1%.
func settledHeap(b *testing.B, heap func() uint64) uint64 {
	b.Helper()
	var prev, cur uint64
	framework.Eventually(b, time.Minute, "the manager's heap to settle", func() (bool, string) {
		prev, cur = cur, heap()
		diff := int64(cur) - int64(prev)
		if diff < 0 {
			diff = -diff
		}
		return prev != 0 && diff < int64(prev)/100, fmt.Sprintf("heap %d after %d", cur, prev)
	})
	return cur
}
