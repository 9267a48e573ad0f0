package overview

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/kubeopera/kubeopera/apis/fleet/v1alpha1"
	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/health"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

// NewFleetSource returns the overview's Source of the platform: every HostCluster of every
// workspace the provider engaged (read from its shared cache on every call) and the
// RegisteredClusters of the platform workspace (read through platform at most every 10 s, the
// backend's own one with its live facts from backend).
func NewFleetSource(workspaces *apiexport.Provider, platform client.Reader, backend kubernetes.Interface, platformWorkspace string) Source {
	reg := &registeredSource{platform: platform, backend: backend, platformWorkspace: platformWorkspace, now: time.Now}
	regCache := &ttlCache[[]Cluster]{ttl: 10 * time.Second, fetch: reg.clusters}
	return &fleetSource{workspaces: workspaces, registered: regCache.get}
}

// fleetSource is the fleet overview's Source: every HostCluster of every workspace engaged on the
// kubeopera.io export, read from the fleet's shared cache (no request per workspace), and the
// clusters registered in the platform workspace (registered).
type fleetSource struct {
	workspaces *apiexport.Provider
	// registered lists the platform workspace's self-registered clusters; nil: none.
	registered func(ctx context.Context) ([]Cluster, error)
}

var _ Source = &fleetSource{}

// Clusters implements Source.
func (s *fleetSource) Clusters(ctx context.Context) ([]Cluster, error) {
	var out []Cluster
	if s.registered != nil {
		reg, err := s.registered(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, reg...)
	}
	for _, lc := range s.workspaces.EngagedWorkspaces() {
		ws, ok := s.workspaces.Workspace(s.workspaces.ClusterName(lc))
		if !ok {
			continue // disengaged meanwhile
		}
		list := &kov1alpha1.HostClusterList{}
		if err := ws.Client().List(ctx, list); err != nil {
			return nil, fmt.Errorf("failed to list the HostClusters of workspace %s: %w", lc, err)
		}
		for i := range list.Items {
			out = append(out, hostClusterRow(lc, &list.Items[i]))
		}
	}
	slices.SortFunc(out, func(a, b Cluster) int {
		return cmp.Or(cmp.Compare(a.Workspace, b.Workspace), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// hostClusterRow is the overview's row of HostCluster hc of workspace lc.
func hostClusterRow(lc string, hc *kov1alpha1.HostCluster) Cluster {
	row := Cluster{
		Workspace: lc,
		Namespace: hc.Namespace,
		Name:      hc.Name,
		ClusterID: hc.Spec.ClusterID,
		Source:    string(hc.Spec.Mode),
		Phase:     string(hc.Status.Phase),
		Message:   hc.Status.Message,
		Ready:     apimeta.IsStatusConditionTrue(hc.Status.Conditions, kov1alpha1.ReadyCondition),
		Provider:  hc.Spec.Provider,
		Region:    hc.Spec.Region,
	}
	if row.Phase == "" {
		row.Phase = string(kov1alpha1.HostClusterPhasePending)
	}
	inv := hc.Status.Inventory
	if inv != nil && inv.UnreachableSince != nil {
		row.Unreachable, row.UnreachableSince = true, timeOf(inv.UnreachableSince)
	}
	if inv == nil || inv.ObservedAt == nil {
		return row
	}
	row.NodesReady, row.NodesTotal = inv.ReadyNodeCount, inv.NodeCount
	row.CPUPercent, row.MemoryPercent, row.UsageSource = inv.CPUPercent, inv.MemoryPercent, string(inv.UsageSource)
	if c := inv.Cost; c != nil {
		row.Cost = &Cost{
			Monthly: c.Monthly, Currency: c.Currency, PricedNodes: c.PricedNodes, UnpricedNodes: c.UnpricedNodes,
			UnpricedInstanceTypes: c.UnpricedInstanceTypes, Partial: c.UnpricedNodes > 0,
		}
	}
	row.Version = inv.KubernetesVersion
	// What was read from the nodes wins over what the tenant wrote in the spec.
	if inv.Provider != "" {
		row.Provider, row.Region = inv.Provider, inv.Region
	}
	row.ObservedAt = timeOf(inv.ObservedAt)
	if row.Unreachable || inv.HealthScore == nil {
		// Its last score says nothing of it now.
		return row
	}
	h := &Health{Score: *inv.HealthScore, Band: inv.HealthBand, Penalties: []Penalty{}}
	for _, p := range inv.HealthPenalties {
		h.Penalties = append(h.Penalties, Penalty{Reason: p.Reason, Detail: p.Detail, Points: p.Points})
	}
	row.Health = h
	return row
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// ttlCache keeps the last value of a function for ttl, so pages, JSON requests and scrapes do
// not each send requests to kcp and the backend.
type ttlCache[T any] struct {
	ttl   time.Duration
	fetch func(context.Context) (T, error)
	now   func() time.Time

	mu   sync.Mutex
	at   time.Time
	last T
	ok   bool
}

func (c *ttlCache[T]) get(ctx context.Context) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	if c.ok && now().Sub(c.at) < c.ttl {
		return c.last, nil
	}
	v, err := c.fetch(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	c.last, c.at, c.ok = v, now(), true
	return v, nil
}

// hostNote says what the overview does not know of the platform's own cluster.
const hostNote = "The platform's own cluster: its score counts node conditions only, since the manager may not list every Pod on its backend (least privilege), so CPU and memory use are not known either."

// registeredSource lists the RegisteredClusters of the platform workspace. The one whose
// clusterUID is the backend's (the cluster this manager runs against) gets its version, nodes and
// a node-only health score read live from the backend with the manager's own identity; any other
// shows the facts recorded when it was registered.
type registeredSource struct {
	platform          client.Reader
	backend           kubernetes.Interface
	platformWorkspace string
	now               func() time.Time

	uid string
}

func (s *registeredSource) clusters(ctx context.Context) ([]Cluster, error) {
	list := &fleetv1alpha1.RegisteredClusterList{}
	if err := s.platform.List(ctx, list); err != nil {
		if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil // the platform workspace has no RegisteredCluster kind (yet)
		}
		return nil, fmt.Errorf("failed to list the RegisteredClusters of %s: %w", s.platformWorkspace, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	backendUID := s.backendUID(ctx)
	out := make([]Cluster, 0, len(list.Items))
	for i := range list.Items {
		rc := &list.Items[i]
		row := Cluster{
			Workspace:  s.platformWorkspace,
			Name:       rc.Name,
			ClusterID:  rc.Spec.ClusterUID,
			Source:     string(rc.Spec.Source),
			IsHost:     rc.Spec.IsHost,
			Phase:      PhaseRegistered,
			Ready:      apimeta.IsStatusConditionTrue(rc.Status.Conditions, fleetv1alpha1.ReadyCondition),
			Version:    rc.Status.KubernetesVersion,
			Provider:   rc.Status.Provider,
			Region:     rc.Status.Region,
			NodesReady: rc.Status.ReadyNodeCount,
			NodesTotal: rc.Status.NodeCount,
			ObservedAt: timeOf(rc.Status.ObservedAt),
		}
		if row.Source == "" {
			row.Source = SourceSelfRegistered
		}
		for _, n := range rc.Status.Nodes {
			row.Nodes = append(row.Nodes, Node{Name: n.Name, Ready: n.Ready})
		}
		switch {
		case backendUID == "":
			row.Note = "The backend's kube-system namespace could not be read, so whether this is the cluster the manager runs against is not known; facts as recorded."
		case rc.Spec.ClusterUID != backendUID:
			row.Note = fmt.Sprintf("Not the backend this manager runs against (its kube-system UID is %s): facts as recorded when it was registered.", backendUID)
		default:
			inv, err := health.ReadNodes(ctx, s.backend, readlimit.Limits{})
			if err != nil {
				row.Note = fmt.Sprintf("The backend's nodes could not be read (%v): facts as recorded.", err)
				break
			}
			now := s.now()
			row.Ready = true
			row.Version, row.Provider, row.Region = inv.KubernetesVersion, inv.Provider, inv.Region
			row.NodesReady, row.NodesTotal = inv.ReadyNodeCount, inv.NodeCount
			row.ObservedAt = &now
			h := &Health{Score: inv.Score.Value, Band: string(inv.Score.Band), Penalties: []Penalty{}}
			for _, p := range inv.Score.Summarize(32) {
				h.Penalties = append(h.Penalties, Penalty{Reason: p.Reason, Detail: p.Detail, Points: strconv.FormatFloat(p.Points, 'f', -1, 64)})
			}
			row.Health = h
			row.Note = hostNote
			row.Nodes = liveNodes(inv.Facts.Nodes)
		}
		out = append(out, row)
	}
	return out, nil
}

// backendUID returns the UID of the backend's kube-system namespace, read once; "" when it
// cannot be read (tried again next time).
func (s *registeredSource) backendUID(ctx context.Context) string {
	if s.uid != "" {
		return s.uid
	}
	ns, err := s.backend.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	s.uid = string(ns.UID)
	return s.uid
}

// maxNodes is how many nodes the overview lists for a self-registered cluster (as its record).
const maxNodes = fleetv1alpha1.MaxNodes

// liveNodes is the per-node breakdown of node facts read from the backend, the first maxNodes.
func liveNodes(facts []health.NodeFacts) []Node {
	out := make([]Node, 0, min(len(facts), maxNodes))
	for _, f := range facts[:min(len(facts), maxNodes)] {
		n := Node{Name: f.Name, Ready: f.Ready}
		for _, c := range []struct {
			on   bool
			name string
		}{{f.MemoryPressure, "MemoryPressure"}, {f.DiskPressure, "DiskPressure"}, {f.PIDPressure, "PIDPressure"}, {f.NetworkUnavailable, "NetworkUnavailable"}} {
			if c.on {
				n.Conditions = append(n.Conditions, c.name)
			}
		}
		out = append(out, n)
	}
	return out
}
