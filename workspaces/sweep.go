package workspaces

import (
	"context"
	"sync"
	"time"

	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	orphanNamespaces = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kubeopera_orphan_backend_namespaces",
		Help: "Backend namespaces whose kcp workspace no longer exists, as of the last orphan sweep.",
	})
	orphansDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kubeopera_orphan_backend_namespaces_deleted_total",
		Help: "Backend namespaces deleted by the orphan sweep because their workspace was gone.",
	})
)

func init() {
	metrics.Registry.MustRegister(orphanNamespaces, orphansDeleted)
}

// OrphanSweep periodically looks for backend namespaces whose workspace is gone (a workspace
// deleted while the manager was down, or before the terminator existed). An orphan is reported in
// the metrics and the log and deleted once it has been seen orphaned for MinAge; a namespace whose
// workspace still exists, or whose workspace cannot be looked up, is never deleted. KCPConfig must
// see every shard (the front proxy, or a single-shard kcp): a shard-local identity would report
// workspaces of other shards as gone.
type OrphanSweep struct {
	// KCPConfig is a kcp config; the sweep reads /clusters/<name>'s LogicalCluster.
	KCPConfig *rest.Config
	// Backend lists and deletes backend namespaces.
	Backend Backend
	// Interval between sweeps.
	Interval time.Duration
	// MinAge is how long a namespace must have been seen orphaned before it is deleted, so one
	// wrong answer (a shard restarting, a workspace being moved) never deletes anything.
	MinAge time.Duration

	mu        sync.Mutex
	firstSeen map[string]time.Time
}

// NeedLeaderElection: only the leader sweeps.
func (s *OrphanSweep) NeedLeaderElection() bool { return true }

// Start sweeps every Interval until ctx is done.
func (s *OrphanSweep) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("orphan-sweep")
	wait.JitterUntilWithContext(ctrl.LoggerInto(ctx, log), func(ctx context.Context) {
		if _, err := s.Sweep(ctx); err != nil {
			log.Error(err, "Orphan sweep failed")
		}
	}, s.Interval, 0.2, true)
	return nil
}

// Sweep runs one sweep and returns the orphans it found.
func (s *OrphanSweep) Sweep(ctx context.Context) ([]string, error) {
	log := ctrl.LoggerFrom(ctx)
	list, err := s.Backend.allWorkspaceNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	exists := map[string]bool{}
	var orphans []string
	now := time.Now()
	for _, ns := range list {
		lc := ns.Annotations[LogicalClusterAnnotation]
		if lc == "" {
			continue
		}
		e, known := exists[lc]
		if !known {
			e, err = s.workspaceExists(ctx, lc)
			if err != nil {
				log.Info("Cannot tell whether the workspace of a backend namespace exists; keeping it", "namespace", ns.Name, "cluster", lc, "error", err.Error())
				continue
			}
			exists[lc] = e
		}
		if e {
			continue
		}
		orphans = append(orphans, ns.Name)
		if since := s.seen(ns.Name, now); since < s.MinAge {
			log.Info("Orphaned backend namespace: its workspace is gone; deleting it once confirmed", "namespace", ns.Name, "cluster", lc, "confirmIn", (s.MinAge - since).String())
			continue
		}
		log.Info("Orphaned backend namespace: its workspace is gone; deleting it", "namespace", ns.Name, "cluster", lc)
		if ns.DeletionTimestamp == nil {
			if _, err := s.Backend.DeleteNamespace(ctx, lc, ns.Name, ""); err != nil {
				log.Error(err, "Failed to delete orphaned backend namespace", "namespace", ns.Name)
				continue
			}
			orphansDeleted.Inc()
		}
	}
	orphanNamespaces.Set(float64(len(orphans)))
	s.forgetExcept(orphans)
	return orphans, nil
}

// seen records when name was first seen orphaned and returns for how long it has been.
func (s *OrphanSweep) seen(name string, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstSeen == nil {
		s.firstSeen = map[string]time.Time{}
	}
	first, ok := s.firstSeen[name]
	if !ok {
		s.firstSeen[name] = now
		return 0
	}
	return now.Sub(first)
}

// forgetExcept drops the first-seen times of namespaces that are no longer orphaned.
func (s *OrphanSweep) forgetExcept(orphans []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := map[string]bool{}
	for _, o := range orphans {
		keep[o] = true
	}
	for name := range s.firstSeen {
		if !keep[name] {
			delete(s.firstSeen, name)
		}
	}
}

func (s *OrphanSweep) workspaceExists(ctx context.Context, logicalCluster string) (bool, error) {
	c, err := client.New(ClusterConfig(s.KCPConfig, logicalCluster), client.Options{Scheme: kcpScheme()})
	if err != nil {
		return false, err
	}
	err = c.Get(ctx, client.ObjectKey{Name: "cluster"}, &corev1alpha1.LogicalCluster{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, err
	}
}
