package overview

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollector(t *testing.T) {
	cs := append(fleet(), Cluster{Workspace: "root:orgs:acme", Name: "gone", Phase: "Ready", Unreachable: true})
	c := NewCollector(SourceFunc(func(context.Context) ([]Cluster, error) { return cs, nil }))
	want := `
# HELP kubeopera_fleet_clusters Clusters of the fleet (HostClusters of every bound workspace and the self-registered cluster) by phase.
# TYPE kubeopera_fleet_clusters gauge
kubeopera_fleet_clusters{phase="BootstrappingFlux"} 0
kubeopera_fleet_clusters{phase="Deleting"} 0
kubeopera_fleet_clusters{phase="Failed"} 1
kubeopera_fleet_clusters{phase="GeneratingGitOpsTree"} 0
kubeopera_fleet_clusters{phase="InstallingKubeOpera"} 0
kubeopera_fleet_clusters{phase="Pending"} 0
kubeopera_fleet_clusters{phase="Provisioning"} 1
kubeopera_fleet_clusters{phase="Ready"} 3
kubeopera_fleet_clusters{phase="Registered"} 1
kubeopera_fleet_clusters{phase="ValidatingAccess"} 0
# HELP kubeopera_fleet_clusters_by_health Clusters of the fleet by health band: green (score 80 and above), amber (60-79), red (below 60), unknown (not read yet, or unreachable).
# TYPE kubeopera_fleet_clusters_by_health gauge
kubeopera_fleet_clusters_by_health{band="amber"} 1
kubeopera_fleet_clusters_by_health{band="green"} 2
kubeopera_fleet_clusters_by_health{band="red"} 1
kubeopera_fleet_clusters_by_health{band="unknown"} 2
# HELP kubeopera_fleet_clusters_unreachable Clusters of the fleet whose API server the platform cannot reach now (their health is unknown).
# TYPE kubeopera_fleet_clusters_unreachable gauge
kubeopera_fleet_clusters_unreachable 1
# HELP kubeopera_fleet_nodes Nodes of the fleet's clusters, ready or not.
# TYPE kubeopera_fleet_nodes gauge
kubeopera_fleet_nodes{state="not_ready"} 3
kubeopera_fleet_nodes{state="ready"} 6
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// A phase outside the known ones gets its own series; an empty fleet keeps every known series
// at 0.
func TestCollectorPhases(t *testing.T) {
	cs := []Cluster{{Phase: "Mystery"}, {Phase: ""}}
	c := NewCollector(SourceFunc(func(context.Context) ([]Cluster, error) { return cs, nil }))
	if n := testutil.CollectAndCount(c, "kubeopera_fleet_clusters"); n != 12 {
		t.Errorf("%d kubeopera_fleet_clusters series, want 10 known phases + Mystery + Unknown", n)
	}
	want := `
# HELP kubeopera_fleet_clusters_by_health Clusters of the fleet by health band: green (score 80 and above), amber (60-79), red (below 60), unknown (not read yet, or unreachable).
# TYPE kubeopera_fleet_clusters_by_health gauge
kubeopera_fleet_clusters_by_health{band="amber"} 0
kubeopera_fleet_clusters_by_health{band="green"} 0
kubeopera_fleet_clusters_by_health{band="red"} 0
kubeopera_fleet_clusters_by_health{band="unknown"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "kubeopera_fleet_clusters_by_health"); err != nil {
		t.Error(err)
	}
	empty := NewCollector(SourceFunc(func(context.Context) ([]Cluster, error) { return nil, nil }))
	if n := testutil.CollectAndCount(empty); n != 10+4+1+2 {
		t.Errorf("an empty fleet has %d series, want 17", n)
	}
}

func TestCollectorSourceFails(t *testing.T) {
	c := NewCollector(SourceFunc(func(context.Context) ([]Cluster, error) { return nil, errors.New("cache not synced") }))
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "failed to list the fleet's clusters: cache not synced") {
		t.Errorf("Gather = %v, want the Source's error", err)
	}
}
