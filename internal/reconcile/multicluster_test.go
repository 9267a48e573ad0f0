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
	built := 0
	w := &reconcile.WorkspaceClients{New: func(cluster.Cluster) (client.Client, error) {
		built++
		return nil, nil
	}}
	first := &fakeCluster{}
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
	// Engaged anew (even with the same cluster instance) before the old engagement's context ends.
	ctx2, cancel2 := context.WithCancel(context.Background())
	if err := w.Engage(ctx2, "kubeopera.io#a", first); err != nil {
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
	if built != 3 {
		t.Errorf("%d clients built, want one per engagement (3)", built)
	}
}
