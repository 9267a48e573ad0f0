package workspaces

import (
	"context"
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
// the metrics and the log and deleted; a namespace whose workspace still exists, or whose workspace
// cannot be looked up, is never deleted.
type OrphanSweep struct {
	// KCPConfig is a kcp config; the sweep reads /clusters/<name>'s LogicalCluster.
	KCPConfig *rest.Config
	// Backend lists and deletes backend namespaces.
	Backend Backend
	// Interval between sweeps.
	Interval time.Duration
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
		log.Info("Orphaned backend namespace: its workspace is gone; deleting it", "namespace", ns.Name, "cluster", lc)
		if ns.DeletionTimestamp == nil {
			if _, err := s.Backend.DeleteNamespace(ctx, lc, ns.Name); err != nil {
				log.Error(err, "Failed to delete orphaned backend namespace", "namespace", ns.Name)
				continue
			}
			orphansDeleted.Inc()
		}
	}
	orphanNamespaces.Set(float64(len(orphans)))
	return orphans, nil
}

func (s *OrphanSweep) workspaceExists(ctx context.Context, logicalCluster string) (bool, error) {
	c, err := client.New(ClusterConfig(s.KCPConfig, logicalCluster), client.Options{Scheme: terminatorScheme()})
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
