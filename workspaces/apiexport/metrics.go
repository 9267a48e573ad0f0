package apiexport

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// engagedWorkspaces is how many workspaces each export's provider serves.
	engagedWorkspaces = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubeopera_engaged_workspaces",
		Help: "Workspaces bound to the export and served by the manager, by export.",
	}, []string{"export"})
	// deferredDriftChecks counts the objects listed at an informer's start whose first pass was
	// scheduled later (Watch.Settled).
	deferredDriftChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubeopera_deferred_drift_checks_total",
		Help: "Settled objects (Ready at their generation, their backend namespaces there) found at a cold start whose drift check was scheduled on their usual interval instead of run at once, by controller.",
	}, []string{"controller"})
)

func init() { metrics.Registry.MustRegister(engagedWorkspaces, deferredDriftChecks) }
