package reconcile

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces"
)

// RequestLogger returns ctx carrying the request's logger and the logger itself: every line
// carries `cluster` (the logical cluster, without the provider prefix) and the object under the
// kind's lowerCamel name (e.g. "tenant"). multicluster-runtime does not add them; every reconciler
// starts with this.
func RequestLogger(ctx context.Context, req mcreconcile.Request, kind string) (context.Context, logr.Logger) {
	log := ctrl.LoggerFrom(ctx).WithValues(
		"cluster", workspaces.LogicalCluster(req.ClusterName),
		lowerFirst(kind), klog.KRef(req.Namespace, req.Name),
	)
	return ctrl.LoggerInto(ctx, log), log
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// DirectClientFunc builds an uncached client for an engaged workspace cluster.
type DirectClientFunc func(cluster.Cluster) (client.Client, error)

// WorkspaceClients keeps one uncached client per engaged workspace (for Secrets, which are never
// cached). A client is built when the workspace is engaged and dropped when it is disengaged (its
// engagement context ends), so the map holds exactly the engaged workspaces. Register it with the
// multicluster manager (mgr.Add) so it is engaged with every cluster.
type WorkspaceClients struct {
	// New builds the client of an engaged cluster.
	New DirectClientFunc

	mu      sync.RWMutex
	clients map[multicluster.ClusterName]engaged
}

type engaged struct {
	token  *byte
	client client.Client
}

// Engage implements multicluster.Aware: it builds name's client and forgets it when ctx ends.
// No goroutine is kept per workspace (context.AfterFunc).
func (w *WorkspaceClients) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	c, err := w.New(cl)
	if err != nil {
		return fmt.Errorf("failed to create workspace client for %s: %w", name, err)
	}
	w.mu.Lock()
	if w.clients == nil {
		w.clients = map[multicluster.ClusterName]engaged{}
	}
	token := new(byte) // identifies this engagement
	w.clients[name] = engaged{token: token, client: c}
	w.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		// A workspace engaged anew keeps the client of its new engagement.
		if e, ok := w.clients[name]; ok && e.token == token {
			delete(w.clients, name)
		}
	})
	return nil
}

// Get returns the client of engaged workspace name, or false when it is not engaged. A workspace
// engaged anew has its client replaced by Engage.
func (w *WorkspaceClients) Get(name multicluster.ClusterName) (client.Client, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	e, ok := w.clients[name]
	return e.client, ok
}

// Len returns the number of engaged workspaces with a client.
func (w *WorkspaceClients) Len() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.clients)
}

// Start implements manager.Runnable; the clients live as long as their engagements.
func (w *WorkspaceClients) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// NeedLeaderElection: clients are needed by every replica's reconcilers once it leads, and cost
// nothing until then.
func (w *WorkspaceClients) NeedLeaderElection() bool { return false }
