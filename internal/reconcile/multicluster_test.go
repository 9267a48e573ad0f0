package reconcile_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
)

// fakeCluster is only an identity: WorkspaceClients never calls it, New does.
type fakeCluster struct{ cluster.Cluster }

// TestWorkspaceClientsFollowEngagement: a workspace's client exists exactly while the workspace is
// engaged; a workspace engaged anew keeps its new client when the old engagement ends.
func TestWorkspaceClientsFollowEngagement(t *testing.T) {
	built := map[cluster.Cluster]client.Client{}
	w := &reconcile.WorkspaceClients{New: func(cl cluster.Cluster) (client.Client, error) {
		c := client.Client(nil)
		built[cl] = c
		return c, nil
	}}
	first, second := &fakeCluster{}, &fakeCluster{}
	ctx1, cancel1 := context.WithCancel(context.Background())
	if err := w.Engage(ctx1, "kubeopera.io#a", first); err != nil {
		t.Fatal(err)
	}
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	if err := w.Engage(ctxB, "kubeopera.io#b", first); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Get("kubeopera.io#a"); !ok || w.Len() != 2 {
		t.Fatalf("engaged workspaces have no client (len %d)", w.Len())
	}
	// Engaged anew (a new cluster instance) before the old engagement's context ends.
	ctx2, cancel2 := context.WithCancel(context.Background())
	if err := w.Engage(ctx2, "kubeopera.io#a", second); err != nil {
		t.Fatal(err)
	}
	cancel1()
	framework.Consistently(t, 300*time.Millisecond, "the new engagement keeps its client", func() (bool, string) {
		_, ok := w.Get("kubeopera.io#a")
		return ok, "client of a dropped"
	})
	cancel2()
	framework.Eventually(t, 5*time.Second, "the disengaged workspace's client dropped", func() (bool, string) {
		_, ok := w.Get("kubeopera.io#a")
		return !ok && w.Len() == 1, "still there"
	})
	if len(built) != 2 {
		t.Errorf("clients built for %d cluster instances, want 2", len(built))
	}
}
