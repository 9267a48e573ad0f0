package sweep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"

	"github.com/go-logr/logr"
	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	orphanNamespaces = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubeopera_orphan_backend_namespaces",
		Help: "Backend namespaces whose kcp workspace is positively known to be gone, as of the last orphan sweep.",
	})
	inconsistentNamespaces = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubeopera_inconsistent_backend_namespaces",
		Help: "Backend namespaces whose name, fingerprint label and logical-cluster annotation disagree, as of the last orphan sweep; they are never touched.",
	})
	ownerlessNamespaces = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubeopera_ownerless_backend_namespaces",
		Help: "Backend namespaces of a live workspace whose owning object no longer exists, as of the last orphan sweep; they are never deleted by the sweep.",
	})
	unverifiedNamespaces = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubeopera_unverified_backend_namespaces",
		Help: "Backend namespaces whose workspace the last orphan sweep could not look up (cannot tell); they are kept.",
	})
	orphansDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubeopera_orphan_backend_namespaces_deleted_total",
		Help: "Backend namespaces deleted by the orphan sweep because their workspace was gone (only with --orphan-sweep-delete).",
	})
)

func init() {
	metrics.Registry.MustRegister(orphanNamespaces, inconsistentNamespaces, ownerlessNamespaces, unverifiedNamespaces, orphansDeleted)
}

// WorkspaceState is what a lookup knows about a logical cluster.
type WorkspaceState int

const (
	// WorkspaceLive: the logical cluster exists (possibly being deleted).
	WorkspaceLive WorkspaceState = iota + 1
	// WorkspaceGone: positive evidence that the logical cluster no longer exists anywhere.
	WorkspaceGone
)

// WorkspaceLookupFunc tells whether a logical cluster exists. An error means "cannot tell"; it is
// never treated as gone.
type WorkspaceLookupFunc func(ctx context.Context, logicalCluster string) (WorkspaceState, error)

// OrphanSweep periodically checks every backend namespace of a workspace and reports (metrics and
// log lines):
//   - inconsistent namespaces: name, fingerprint label and logical-cluster annotation disagree; they
//     are never touched;
//   - orphans: the workspace is positively known to be gone (see ShardLookup);
//   - ownerless namespaces: the workspace lives but the object named in the namespace's owner
//     annotation does not (a tenant removed a finalizer); they are never deleted by the sweep;
//   - unverified namespaces: the workspace could not be looked up; they are kept.
//
// It deletes nothing unless Delete is set; then it deletes an orphan only once it has been seen
// orphaned on two sweeps at least MinAge apart, and at most MaxDeletions per sweep.
type OrphanSweep struct {
	// Backend lists and deletes backend namespaces.
	Backend syncer.Backend
	// Workspaces looks logical clusters up, e.g. (&ShardLookup{Config: cfg}).State.
	Workspaces WorkspaceLookupFunc
	// OwnerExists looks the owner of a namespace of a live workspace up; nil skips the check.
	OwnerExists workspaces.OwnerExistsFunc
	// Interval between sweeps.
	Interval time.Duration
	// MinAge is how long a namespace must have been seen orphaned, on an earlier sweep, before it
	// is deleted, so one wrong answer (a shard restarting, a workspace being moved) deletes nothing.
	MinAge time.Duration
	// Delete enables deleting orphans; by default the sweep only reports.
	Delete bool
	// MaxDeletions caps the namespaces deleted per sweep; 0 deletes none.
	MaxDeletions int
	// PageSize is how many namespaces' metadata a sweep reads at a time (DefaultPageSize when
	// zero): what it holds in memory at once.
	PageSize int

	mu        sync.Mutex
	firstSeen map[types.UID]time.Time
}

// SweepReport lists what one sweep found, by namespace name.
type SweepReport struct {
	Orphans      []string
	Inconsistent []string
	Ownerless    []string
	Unverified   []string
	Deleted      []string
}

// NeedLeaderElection: only the leader sweeps.
func (s *OrphanSweep) NeedLeaderElection() bool { return true }

// Start sweeps every Interval until ctx is done.
func (s *OrphanSweep) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("orphan-sweep")
	log.Info("Starting the orphan sweep", "delete", s.Delete, "maxDeletions", s.MaxDeletions, "minAge", s.MinAge.String(), "interval", s.Interval.String())
	wait.JitterUntilWithContext(ctrl.LoggerInto(ctx, log), func(ctx context.Context) {
		if _, err := s.Sweep(ctx); err != nil {
			if ctx.Err() != nil {
				// Stopped mid-sweep (the manager shuts down): nothing failed.
				log.V(1).Info("Orphan sweep stopped", "error", err.Error())
				return
			}
			log.Error(err, "Orphan sweep failed")
		}
	}, s.Interval, 0.2, true)
	return nil
}

// Consistent reports whether a backend namespace's name, fingerprint label and logical-cluster
// annotation agree: the name is kcp-<fp> or kcp-<fp>-<suffix> with fp = Fingerprint(annotation),
// and the label is fp.
func Consistent(ns *corev1.Namespace) bool {
	lc := ns.Annotations[workspaces.LogicalClusterAnnotation]
	if lc == "" {
		return false
	}
	fp := workspaces.Fingerprint(lc)
	if ns.Labels[workspaces.FingerprintLabel] != fp {
		return false
	}
	base := workspaces.NamespacePrefix + fp
	return ns.Name == base || (strings.HasPrefix(ns.Name, base+"-") && len(ns.Name) > len(base)+1)
}

// Sweep runs one sweep.
func (s *OrphanSweep) Sweep(ctx context.Context) (*SweepReport, error) {
	if s.Workspaces == nil {
		return nil, errors.New("orphan sweep has no workspace lookup")
	}
	r := &SweepReport{}
	states := map[string]WorkspaceState{}
	lookupErrs := map[string]error{}
	now := time.Now()
	var orphanUIDs []types.UID
	// The namespaces' metadata a page at a time: a sweep of thousands of namespaces holds one
	// page, not all of them, while it asks kcp about their workspaces.
	var each []*corev1.Namespace
	next := ""
	for {
		page := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}}
		size := s.PageSize
		if size <= 0 {
			size = DefaultPageSize
		}
		if err := s.Backend.Reader.List(ctx, page, client.Limit(int64(size)), client.Continue(next)); err != nil {
			return nil, fmt.Errorf("failed to list backend namespaces: %w", err)
		}
		each = each[:0]
		for i := range page.Items {
			each = append(each, &corev1.Namespace{ObjectMeta: page.Items[i].ObjectMeta})
		}
		orphanUIDs = s.sweepPage(ctx, each, r, states, lookupErrs, now, orphanUIDs)
		if next = page.Continue; next == "" {
			break
		}
	}
	orphanNamespaces.Set(float64(len(r.Orphans)))
	inconsistentNamespaces.Set(float64(len(r.Inconsistent)))
	ownerlessNamespaces.Set(float64(len(r.Ownerless)))
	unverifiedNamespaces.Set(float64(len(r.Unverified)))
	s.forgetExcept(orphanUIDs)
	return r, nil
}

// DefaultPageSize is how many namespaces a sweep reads at a time unless PageSize says.
const DefaultPageSize = 250

// sweepPage sweeps one page of namespaces into r and returns orphanUIDs with the page's orphans.
func (s *OrphanSweep) sweepPage(ctx context.Context, page []*corev1.Namespace, r *SweepReport, states map[string]WorkspaceState, lookupErrs map[string]error, now time.Time, orphanUIDs []types.UID) []types.UID {
	log := ctrl.LoggerFrom(ctx)
	for _, ns := range page {
		lc := ns.Annotations[workspaces.LogicalClusterAnnotation]
		if lc == "" && ns.Labels[workspaces.FingerprintLabel] == "" {
			continue // not a workspace's namespace
		}
		nlog := log.WithValues("namespace", ns.Name, "cluster", lc)
		if !Consistent(ns) {
			r.Inconsistent = append(r.Inconsistent, ns.Name)
			nlog.Info("Backend namespace's name, fingerprint label and logical-cluster annotation disagree; leaving it alone",
				"fingerprintLabel", ns.Labels[workspaces.FingerprintLabel])
			continue
		}
		state, known := states[lc]
		if _, failed := lookupErrs[lc]; !known && !failed {
			var err error
			if state, err = s.Workspaces(ctx, lc); err != nil {
				lookupErrs[lc] = err
			} else {
				states[lc] = state
			}
		}
		if err := lookupErrs[lc]; err != nil {
			r.Unverified = append(r.Unverified, ns.Name)
			nlog.Info("Cannot tell whether the workspace of a backend namespace exists; keeping it", "error", err.Error())
			continue
		}
		switch state {
		case WorkspaceLive:
			s.checkOwner(ctx, nlog, ns, lc, r)
		case WorkspaceGone:
			r.Orphans = append(r.Orphans, ns.Name)
			orphanUIDs = append(orphanUIDs, ns.UID)
			s.handleOrphan(ctx, nlog, ns, lc, now, r)
		default:
			r.Unverified = append(r.Unverified, ns.Name)
		}
	}
	return orphanUIDs
}

func (s *OrphanSweep) checkOwner(ctx context.Context, log logr.Logger, ns *corev1.Namespace, lc string, r *SweepReport) {
	owner := ns.Annotations[syncer.OwnerAnnotation]
	if owner == "" || s.OwnerExists == nil {
		return
	}
	exists, err := s.OwnerExists(ctx, lc, owner)
	if err != nil {
		log.V(1).Info("Cannot tell whether the owner of a backend namespace exists", "owner", owner, "error", err.Error())
		return
	}
	if !exists {
		r.Ownerless = append(r.Ownerless, ns.Name)
		log.Info("Backend namespace's owner no longer exists in its live workspace (was a finalizer removed?); reporting it, not deleting it", "owner", owner)
	}
}

func (s *OrphanSweep) handleOrphan(ctx context.Context, log logr.Logger, ns *corev1.Namespace, lc string, now time.Time, r *SweepReport) {
	since, earlier := s.seen(ns.UID, now)
	switch {
	case !s.Delete:
		log.Info("Orphaned backend namespace: its workspace is gone; reporting only (--orphan-sweep-delete is off)")
	case ns.DeletionTimestamp != nil:
		log.V(1).Info("Orphaned backend namespace is being deleted")
	case !earlier || since < s.MinAge:
		log.Info("Orphaned backend namespace: its workspace is gone; deleting it once a later sweep confirms it", "confirmIn", (s.MinAge - since).String())
	case len(r.Deleted) >= s.MaxDeletions:
		log.Info("Orphaned backend namespace: deletion cap of this sweep reached; a later sweep deletes it", "maxDeletions", s.MaxDeletions)
	default:
		log.Info("Orphaned backend namespace: its workspace is gone, confirmed on two sweeps; deleting it", "firstSeen", since.String())
		if _, err := s.Backend.DeleteNamespace(ctx, lc, ns.Name, ""); err != nil {
			log.Error(err, "Failed to delete orphaned backend namespace")
			return
		}
		r.Deleted = append(r.Deleted, ns.Name)
		orphansDeleted.Inc()
	}
}

// seen records when the namespace was first seen orphaned and returns for how long it has been,
// and whether that was on an earlier sweep.
func (s *OrphanSweep) seen(uid types.UID, now time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstSeen == nil {
		s.firstSeen = map[types.UID]time.Time{}
	}
	first, ok := s.firstSeen[uid]
	if !ok {
		s.firstSeen[uid] = now
		return 0, false
	}
	return now.Sub(first), true
}

// forgetExcept drops the first-seen times of namespaces that are no longer orphaned.
func (s *OrphanSweep) forgetExcept(orphans []types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := map[types.UID]bool{}
	for _, o := range orphans {
		keep[o] = true
	}
	for uid := range s.firstSeen {
		if !keep[uid] {
			delete(s.firstSeen, uid)
		}
	}
}

// ShardLookup tells whether a logical cluster exists by asking every kcp shard for its
// LogicalCluster object. Config needs read access to logicalclusters in every workspace on every
// shard (e.g. a shard admin, member of system:masters, whose requests skip kcp's workspace
// authorizers) and to shards in root.
//
// A logical cluster exists exactly as long as its singleton LogicalCluster "cluster" does, on the
// one shard that hosts it. A single shard's NotFound therefore only says "not on this shard": on a
// multi-shard kcp, a workspace on another shard looks the same. So Gone needs every shard listed in
// root's Shard objects to answer NotFound naming that object (details core.kcp.io/logicalclusters
// "cluster", i.e. the shard's storage answered); an unreachable shard, a Forbidden (an identity
// subject to kcp's authorizers gets 403 for an unknown logical cluster, the same as for no
// access), an empty shard list or any other answer is "cannot tell".
type ShardLookup struct {
	// Config is a kcp config; its host is used to read root's shards.
	Config *rest.Config

	rest workspaces.RESTClients
}

// State implements WorkspaceLookupFunc.
func (l *ShardLookup) State(ctx context.Context, logicalCluster string) (WorkspaceState, error) {
	shards := &corev1alpha1.ShardList{}
	if err := l.rest.Get(ctx, l.Config, workspaces.ServerBase(l.Config.Host), "/clusters/root/apis/core.kcp.io/v1alpha1/shards", shards); err != nil {
		return 0, fmt.Errorf("failed to list kcp shards: %w", err)
	}
	if len(shards.Items) == 0 {
		return 0, errors.New("no kcp shards listed in root; cannot tell which shards to ask")
	}
	for _, shard := range shards.Items {
		if shard.Spec.BaseURL == "" {
			return 0, fmt.Errorf("shard %s has no base URL", shard.Name)
		}
		err := l.rest.Get(ctx, l.Config, shard.Spec.BaseURL, "/clusters/"+logicalCluster+"/apis/core.kcp.io/v1alpha1/logicalclusters/"+corev1alpha1.LogicalClusterName, nil)
		switch {
		case err == nil:
			return WorkspaceLive, nil
		case workspaces.IsNotFoundOf(err, corev1alpha1.SchemeGroupVersion.Group, corev1alpha1.LogicalClusterName):
			continue // not on this shard
		default:
			return 0, fmt.Errorf("shard %s (%s): %w", shard.Name, shard.Spec.BaseURL, err)
		}
	}
	return WorkspaceGone, nil
}
