package terminator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"

	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	"github.com/kcp-dev/sdk/apis/tenancy/termination"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WorkspaceObjectsFunc deletes the platform's CRs left in a workspace (so each goes through its
// finalizer) and returns how many remain.
type WorkspaceObjectsFunc func(ctx context.Context, logicalCluster string) (remaining int, err error)

// Terminator is the kubeopera-tenant WorkspaceType's terminator. When a tenant workspace is
// deleted, kcp keeps its LogicalCluster until every terminator is removed. The Terminator deletes
// the workspace's CRs and waits until their finalizers have run, deletes the workspace's backend
// namespaces and waits until they are gone, and only then removes its terminator entry, so deleting
// a workspace cleans the backend. It never deletes anything for a workspace that is not being
// deleted.
type Terminator struct {
	// KCPConfig points at the platform workspace (the manager's --platform-workspace), where the
	// WorkspaceType lives.
	KCPConfig *rest.Config
	// WorkspaceType is the name of the WorkspaceType whose terminator this is.
	WorkspaceType string
	// Backend reads and deletes backend namespaces.
	Backend syncer.Backend
	// Workspace deletes and counts the CRs left in a terminating workspace.
	Workspace WorkspaceObjectsFunc
	// Interval between looks for terminating workspaces.
	Interval time.Duration

	mu      sync.Mutex
	clients map[string]client.Client // by terminating virtual workspace URL
}

// NeedLeaderElection: only the leader terminates workspaces.
func (t *Terminator) NeedLeaderElection() bool { return true }

// Start polls the terminating virtual workspaces until ctx is done.
func (t *Terminator) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("terminator")
	ctx = ctrl.LoggerInto(ctx, log)
	wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
		if err := t.Once(ctx); err != nil {
			log.Error(err, "Terminator pass failed; retrying")
		}
	}, t.Interval, 0.2, true)
	return nil
}

// Once looks at every terminating workspace of the type once. It cleans up those it can and
// returns the errors of the others; a workspace whose clean-up failed keeps its terminator.
func (t *Terminator) Once(ctx context.Context) error {
	urls, name, err := t.virtualWorkspaceURLs(ctx)
	if err != nil {
		return fmt.Errorf("terminating virtual workspaces not available: %w", err)
	}
	var errs []error
	// One terminating virtual workspace per shard; the list is read anew each pass.
	for _, u := range urls {
		c, err := t.client(u)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to create terminating virtual workspace client for %s: %w", u, err))
			continue
		}
		if err := t.pass(ctx, u, name, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// client returns the wildcard client of a terminating virtual workspace URL, made once.
func (t *Terminator) client(vwURL string) (client.Client, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.clients[vwURL]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(t.KCPConfig)
	cfg.Host = vwURL + "/clusters/*"
	c, err := client.New(cfg, client.Options{Scheme: workspaces.KCPScheme()})
	if err != nil {
		return nil, err
	}
	if t.clients == nil {
		t.clients = map[string]client.Client{}
	}
	t.clients[vwURL] = c
	return c, nil
}

// virtualWorkspaceURLs returns the WorkspaceType's terminating virtual workspace URLs and the
// terminator kcp puts into status.terminators of its workspaces ("<type's logical cluster>:<type
// name>", termination.TerminatorForType).
func (t *Terminator) virtualWorkspaceURLs(ctx context.Context) ([]string, corev1alpha1.LogicalClusterTerminator, error) {
	c, err := client.New(t.KCPConfig, client.Options{Scheme: workspaces.KCPScheme()})
	if err != nil {
		return nil, "", err
	}
	wt := &tenancyv1alpha1.WorkspaceType{}
	if err := c.Get(ctx, client.ObjectKey{Name: t.WorkspaceType}, wt); err != nil {
		return nil, "", fmt.Errorf("failed to get WorkspaceType %s: %w", t.WorkspaceType, err)
	}
	var urls []string
	for _, vw := range wt.Status.VirtualWorkspaces {
		if vw.Type == "terminating" {
			urls = append(urls, vw.URL)
		}
	}
	if len(urls) == 0 {
		return nil, "", fmt.Errorf("WorkspaceType %s publishes no terminating virtual workspace URL", t.WorkspaceType)
	}
	return urls, termination.TerminatorForType(wt), nil
}

func (t *Terminator) pass(ctx context.Context, vwURL string, name corev1alpha1.LogicalClusterTerminator, vw client.Client) error {
	log := ctrl.LoggerFrom(ctx)
	list := &corev1alpha1.LogicalClusterList{}
	if err := vw.List(ctx, list); err != nil {
		return fmt.Errorf("failed to list terminating logical clusters through %s: %w", vwURL, err)
	}
	var errs []error
	for i := range list.Items {
		lc := &list.Items[i]
		cluster := lc.Annotations["kcp.io/cluster"]
		if cluster == "" || lc.DeletionTimestamp == nil || !termination.TerminatorPresent(name, lc.Status.Terminators) {
			continue
		}
		clog := log.WithValues("cluster", cluster)
		done, err := t.terminate(ctrl.LoggerInto(ctx, clog), cluster)
		if err != nil {
			// Keep the terminator and the backend namespaces; the next pass retries.
			errs = append(errs, fmt.Errorf("failed to clean up terminating workspace %s: %w", cluster, err))
			continue
		}
		if !done {
			continue
		}
		if err := t.removeTerminator(ctx, vwURL, name, lc); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove the terminator of workspace %s: %w", cluster, err))
			continue
		}
		clog.Info("Workspace terminated: its CRs went through their finalizers and its backend namespaces are gone")
	}
	return errors.Join(errs...)
}

// terminate returns true once nothing of the workspace is left.
func (t *Terminator) terminate(ctx context.Context, logicalCluster string) (bool, error) {
	if t.Workspace != nil {
		remaining, err := t.Workspace(ctx, logicalCluster)
		if err != nil {
			return false, err
		}
		if remaining > 0 {
			ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the workspace's CRs to be finalized", "remaining", remaining)
			return false, nil
		}
	}
	nss, err := t.Backend.WorkspaceNamespaces(ctx, logicalCluster)
	if err != nil {
		return false, err
	}
	for _, ns := range nss {
		if _, err := t.Backend.DeleteNamespace(ctx, logicalCluster, ns.Name, ""); err != nil {
			return false, err
		}
	}
	return len(nss) == 0, nil
}

func (t *Terminator) removeTerminator(ctx context.Context, vwURL string, name corev1alpha1.LogicalClusterTerminator, lc *corev1alpha1.LogicalCluster) error {
	cfg := rest.CopyConfig(t.KCPConfig)
	cfg.Host = vwURL + "/clusters/" + lc.Annotations["kcp.io/cluster"]
	c, err := client.New(cfg, client.Options{Scheme: workspaces.KCPScheme()})
	if err != nil {
		return err
	}
	base := lc.DeepCopy()
	lc.Status.Terminators = slices.DeleteFunc(slices.Clone(lc.Status.Terminators), func(x corev1alpha1.LogicalClusterTerminator) bool {
		return x == name
	})
	if len(lc.Status.Terminators) == len(base.Status.Terminators) {
		return nil
	}
	return c.Status().Patch(ctx, lc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}
