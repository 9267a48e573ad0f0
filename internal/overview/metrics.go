package overview

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

// knownPhases are reported on every scrape, 0 when no cluster is in them, so their series do
// not vanish: the HostCluster phases and Registered.
var knownPhases = []string{
	string(kov1alpha1.HostClusterPhasePending),
	string(kov1alpha1.HostClusterPhaseValidatingAccess),
	string(kov1alpha1.HostClusterPhaseProvisioning),
	string(kov1alpha1.HostClusterPhaseBootstrappingFlux),
	string(kov1alpha1.HostClusterPhaseGeneratingGitOpsTree),
	string(kov1alpha1.HostClusterPhaseInstallingKubeOpera),
	string(kov1alpha1.HostClusterPhaseReady),
	string(kov1alpha1.HostClusterPhaseFailed),
	string(kov1alpha1.HostClusterPhaseDeleting),
	PhaseRegistered,
}

// scrapeTimeout bounds the Source's answer to a scrape.
const scrapeTimeout = 10 * time.Second

var (
	clustersDesc = prometheus.NewDesc("kubeopera_fleet_clusters",
		"Clusters of the fleet (HostClusters of every bound workspace and the self-registered cluster) by phase.",
		[]string{"phase"}, nil)
	healthDesc = prometheus.NewDesc("kubeopera_fleet_clusters_by_health",
		"Clusters of the fleet by health band: green (score 80 and above), amber (60-79), red (below 60), unknown (not read yet, or unreachable).",
		[]string{"band"}, nil)
	unreachableDesc = prometheus.NewDesc("kubeopera_fleet_clusters_unreachable",
		"Clusters of the fleet whose API server the platform cannot reach now (their health is unknown).",
		nil, nil)
	nodesDesc = prometheus.NewDesc("kubeopera_fleet_nodes",
		"Nodes of the fleet's clusters, ready or not.",
		[]string{"state"}, nil)
)

// collector computes the fleet's gauges from the Source on each scrape.
type collector struct {
	src Source
}

// NewCollector returns a collector of the fleet's gauges, computed from src on each scrape:
// kubeopera_fleet_clusters{phase}, kubeopera_fleet_clusters_by_health{band},
// kubeopera_fleet_clusters_unreachable and kubeopera_fleet_nodes{state="ready|not_ready"}. No label names a cluster or a workspace. A
// failing Source makes the scrape fail with its error.
func NewCollector(src Source) prometheus.Collector {
	return &collector{src: src}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clustersDesc
	ch <- healthDesc
	ch <- unreachableDesc
	ch <- nodesDesc
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	cs, err := c.src.Clusters(ctx)
	if err != nil {
		err = fmt.Errorf("failed to list the fleet's clusters: %w", err)
		for _, d := range []*prometheus.Desc{clustersDesc, healthDesc, unreachableDesc, nodesDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	phases := map[string]int{}
	for _, p := range knownPhases {
		phases[p] = 0
	}
	bands := map[string]int{}
	for _, b := range Bands {
		bands[b] = 0
	}
	var ready, total int64
	unreachable := 0
	for i := range cs {
		if cs[i].Unreachable {
			unreachable++
		}
		phase := cs[i].Phase
		if phase == "" {
			phase = "Unknown"
		}
		phases[phase]++
		bands[BandOf(&cs[i])]++
		ready += int64(cs[i].NodesReady)
		total += int64(cs[i].NodesTotal)
	}
	for _, p := range sortedKeys(phases) {
		ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, float64(phases[p]), p)
	}
	for _, b := range Bands {
		ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, float64(bands[b]), b)
	}
	ch <- prometheus.MustNewConstMetric(unreachableDesc, prometheus.GaugeValue, float64(unreachable))
	ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(ready), "ready")
	ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(max(total-ready, 0)), "not_ready")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
