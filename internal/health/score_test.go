package health

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func pct(v float64) *float64 { return &v }

// healthyNode is a Ready node without pressure.
func healthyNode(name string) NodeFacts { return NodeFacts{Name: name, Ready: true} }

func notReadyNodes(n int) []NodeFacts {
	nodes := make([]NodeFacts, n)
	for i := range nodes {
		nodes[i] = NodeFacts{Name: fmt.Sprintf("worker-%02d", i)}
	}
	return nodes
}

func notReadyPenalties(n int) []Penalty {
	ps := make([]Penalty, n)
	for i := range ps {
		ps[i] = Penalty{Reason: "NodeNotReady", Detail: fmt.Sprintf("node worker-%02d is not Ready", i), Points: 5}
	}
	return ps
}

func TestCompute(t *testing.T) {
	tests := map[string]struct {
		reason string
		facts  Facts
		want   Score
	}{
		"healthy": {
			reason: "nothing found: 100, no penalties",
			facts: Facts{
				Nodes:         []NodeFacts{healthyNode("a"), healthyNode("b")},
				ControlPlane:  ControlPlaneFacts{Known: true, APIServerHealthy: true},
				CPUPercent:    pct(50),
				MemoryPercent: pct(79.9),
				// 10 restarting pods is not more than 10.
				RestartingPods: 10,
			},
			want: Score{Value: 100, Band: BandGreen},
		},
		"no facts": {
			reason: "an empty cluster with unknown use costs nothing",
			want:   Score{Value: 100, Band: BandGreen},
		},
		"node not ready": {
			reason: "each not-ready node −5",
			facts:  Facts{Nodes: []NodeFacts{healthyNode("a"), {Name: "worker-1"}}},
			want: Score{Value: 95, Band: BandGreen, Penalties: []Penalty{
				{Reason: "NodeNotReady", Detail: "node worker-1 is not Ready", Points: 5},
			}},
		},
		"memory pressure": {
			reason: "each node under memory pressure −3",
			facts:  Facts{Nodes: []NodeFacts{{Name: "a", Ready: true, MemoryPressure: true}}},
			want: Score{Value: 97, Band: BandGreen, Penalties: []Penalty{
				{Reason: "NodeMemoryPressure", Detail: "node a is under memory pressure", Points: 3},
			}},
		},
		"disk pressure": {
			reason: "each node under disk pressure −4",
			facts:  Facts{Nodes: []NodeFacts{{Name: "a", Ready: true, DiskPressure: true}}},
			want: Score{Value: 96, Band: BandGreen, Penalties: []Penalty{
				{Reason: "NodeDiskPressure", Detail: "node a is under disk pressure", Points: 4},
			}},
		},
		"PID pressure": {
			reason: "each node under PID pressure −2",
			facts:  Facts{Nodes: []NodeFacts{{Name: "a", Ready: true, PIDPressure: true}}},
			want: Score{Value: 98, Band: BandGreen, Penalties: []Penalty{
				{Reason: "NodePIDPressure", Detail: "node a is under PID pressure", Points: 2},
			}},
		},
		"network unavailable": {
			reason: "each node with network unavailable −6",
			facts:  Facts{Nodes: []NodeFacts{{Name: "a", Ready: true, NetworkUnavailable: true}}},
			want: Score{Value: 94, Band: BandGreen, Penalties: []Penalty{
				{Reason: "NodeNetworkUnavailable", Detail: "node a has its network unavailable", Points: 6},
			}},
		},
		"failed pods": {
			reason: "each failed pod −2, one entry for all",
			facts:  Facts{FailedPods: 3},
			want: Score{Value: 94, Band: BandGreen, Penalties: []Penalty{
				{Reason: "PodsFailed", Detail: "3 pods failed", Points: 6},
			}},
		},
		"one crash-looping pod": {
			reason: "−2.5: 97.5 rounds half up to 98",
			facts:  Facts{CrashLoopingPods: 1},
			want: Score{Value: 98, Band: BandGreen, Penalties: []Penalty{
				{Reason: "PodsCrashLooping", Detail: "1 pod crash-looping", Points: 2.5},
			}},
		},
		"three crash-looping pods": {
			reason: "−7.5: 92.5 rounds to 93",
			facts:  Facts{CrashLoopingPods: 3},
			want: Score{Value: 93, Band: BandGreen, Penalties: []Penalty{
				{Reason: "PodsCrashLooping", Detail: "3 pods crash-looping", Points: 7.5},
			}},
		},
		"more than 10 restarting pods": {
			reason: "−5 flat, however many",
			facts:  Facts{RestartingPods: 400},
			want: Score{Value: 95, Band: BandGreen, Penalties: []Penalty{
				{Reason: "PodsRestarting", Detail: "400 pods restarted containers (more than 10)", Points: 5},
			}},
		},
		"11 restarting pods": {
			reason: "the first count above the threshold",
			facts:  Facts{RestartingPods: 11},
			want: Score{Value: 95, Band: BandGreen, Penalties: []Penalty{
				{Reason: "PodsRestarting", Detail: "11 pods restarted containers (more than 10)", Points: 5},
			}},
		},
		"control plane unknown": {
			reason: "no control-plane pods visible (managed): no penalty, whatever else is set",
			facts:  Facts{ControlPlane: ControlPlaneFacts{Known: false, Unhealthy: []string{"etcd"}}},
			want:   Score{Value: 100, Band: BandGreen},
		},
		"only the API server unhealthy": {
			reason: "−15 instead of −30, plus −8 for the component",
			facts: Facts{ControlPlane: ControlPlaneFacts{
				Known: true, APIServerHealthy: false, Unhealthy: []string{"kube-apiserver"},
			}},
			want: Score{Value: 77, Band: BandAmber, Penalties: []Penalty{
				{Reason: "ControlPlaneAPIServerUnhealthy", Detail: "only the API server is unhealthy", Points: 15},
				{Reason: "ControlPlaneComponentUnhealthy", Detail: "control-plane component kube-apiserver is unhealthy", Points: 8},
			}},
		},
		"API server unhealthy, not listed": {
			reason: "APIServerHealthy false counts the API server even when Unhealthy omits it",
			facts:  Facts{ControlPlane: ControlPlaneFacts{Known: true, APIServerHealthy: false}},
			want: Score{Value: 77, Band: BandAmber, Penalties: []Penalty{
				{Reason: "ControlPlaneAPIServerUnhealthy", Detail: "only the API server is unhealthy", Points: 15},
				{Reason: "ControlPlaneComponentUnhealthy", Detail: "control-plane component kube-apiserver is unhealthy", Points: 8},
			}},
		},
		"etcd unhealthy": {
			reason: "a component other than the API server: −30, plus −8",
			facts: Facts{ControlPlane: ControlPlaneFacts{
				Known: true, APIServerHealthy: true, Unhealthy: []string{"etcd"},
			}},
			want: Score{Value: 62, Band: BandAmber, Penalties: []Penalty{
				{Reason: "ControlPlaneUnhealthy", Detail: "control plane is not fully healthy: etcd", Points: 30},
				{Reason: "ControlPlaneComponentUnhealthy", Detail: "control-plane component etcd is unhealthy", Points: 8},
			}},
		},
		"API server and scheduler unhealthy": {
			reason: "the API server is not the only one: −30, plus −8 each; duplicates count once",
			facts: Facts{ControlPlane: ControlPlaneFacts{
				Known: true, APIServerHealthy: false,
				Unhealthy: []string{"kube-scheduler", "kube-apiserver", "kube-scheduler"},
			}},
			want: Score{Value: 54, Band: BandRed, Penalties: []Penalty{
				{Reason: "ControlPlaneUnhealthy", Detail: "control plane is not fully healthy: kube-apiserver, kube-scheduler", Points: 30},
				{Reason: "ControlPlaneComponentUnhealthy", Detail: "control-plane component kube-apiserver is unhealthy", Points: 8},
				{Reason: "ControlPlaneComponentUnhealthy", Detail: "control-plane component kube-scheduler is unhealthy", Points: 8},
			}},
		},
		"CPU at 80%": {
			reason: "≥80% −5",
			facts:  Facts{CPUPercent: pct(80)},
			want: Score{Value: 95, Band: BandGreen, Penalties: []Penalty{
				{Reason: "CPUHigh", Detail: "cluster CPU use is 80.0% (80% or more)", Points: 5},
			}},
		},
		"CPU at 94.9%": {
			reason: "still below 95%: −5",
			facts:  Facts{CPUPercent: pct(94.9)},
			want: Score{Value: 95, Band: BandGreen, Penalties: []Penalty{
				{Reason: "CPUHigh", Detail: "cluster CPU use is 94.9% (80% or more)", Points: 5},
			}},
		},
		"CPU at 95%": {
			reason: "≥95% −10",
			facts:  Facts{CPUPercent: pct(95)},
			want: Score{Value: 90, Band: BandGreen, Penalties: []Penalty{
				{Reason: "CPUCritical", Detail: "cluster CPU use is 95.0% (95% or more)", Points: 10},
			}},
		},
		"CPU above 100%": {
			reason: "over-committed requests are still −10",
			facts:  Facts{CPUPercent: pct(130)},
			want: Score{Value: 90, Band: BandGreen, Penalties: []Penalty{
				{Reason: "CPUCritical", Detail: "cluster CPU use is 130.0% (95% or more)", Points: 10},
			}},
		},
		"memory at 80%": {
			reason: "≥80% −5",
			facts:  Facts{MemoryPercent: pct(80)},
			want: Score{Value: 95, Band: BandGreen, Penalties: []Penalty{
				{Reason: "MemoryHigh", Detail: "cluster memory use is 80.0% (80% or more)", Points: 5},
			}},
		},
		"memory at 95%": {
			reason: "≥95% −10",
			facts:  Facts{MemoryPercent: pct(99.5)},
			want: Score{Value: 90, Band: BandGreen, Penalties: []Penalty{
				{Reason: "MemoryCritical", Detail: "cluster memory use is 99.5% (95% or more)", Points: 10},
			}},
		},
		"usage just below 80%": {
			reason: "79.99% costs nothing",
			facts:  Facts{CPUPercent: pct(79.99), MemoryPercent: pct(79.99)},
			want:   Score{Value: 100, Band: BandGreen},
		},
		"clamped at 0": {
			reason: "25 not-ready nodes are −125: the score stops at 0",
			facts:  Facts{Nodes: notReadyNodes(25)},
			want:   Score{Value: 0, Band: BandRed, Penalties: notReadyPenalties(25)},
		},
		"clamped at 0, fractional": {
			reason: "41 crash-looping pods are −102.5: 0",
			facts:  Facts{CrashLoopingPods: 41},
			want: Score{Value: 0, Band: BandRed, Penalties: []Penalty{
				{Reason: "PodsCrashLooping", Detail: "41 pods crash-looping", Points: 102.5},
			}},
		},
		"order of the table": {
			reason: "penalties follow the table's rows; within a row, nodes by name",
			facts: Facts{
				Nodes: []NodeFacts{
					{Name: "c", Ready: false, DiskPressure: true},
					{Name: "a", Ready: false, NetworkUnavailable: true},
					{Name: "b", Ready: true, MemoryPressure: true, PIDPressure: true},
				},
				FailedPods:       1,
				CrashLoopingPods: 2,
				RestartingPods:   12,
				ControlPlane:     ControlPlaneFacts{Known: true, APIServerHealthy: true, Unhealthy: []string{"kube-scheduler"}},
				CPUPercent:       pct(96),
				MemoryPercent:    pct(85),
			},
			// 100 − (5+5) − 3 − 4 − 2 − 6 − 2 − 5 − 5 − 30 − 8 − 10 − 5 = 10.
			want: Score{Value: 10, Band: BandRed, Penalties: []Penalty{
				{Reason: "NodeNotReady", Detail: "node a is not Ready", Points: 5},
				{Reason: "NodeNotReady", Detail: "node c is not Ready", Points: 5},
				{Reason: "NodeMemoryPressure", Detail: "node b is under memory pressure", Points: 3},
				{Reason: "NodeDiskPressure", Detail: "node c is under disk pressure", Points: 4},
				{Reason: "NodePIDPressure", Detail: "node b is under PID pressure", Points: 2},
				{Reason: "NodeNetworkUnavailable", Detail: "node a has its network unavailable", Points: 6},
				{Reason: "PodsFailed", Detail: "1 pod failed", Points: 2},
				{Reason: "PodsCrashLooping", Detail: "2 pods crash-looping", Points: 5},
				{Reason: "PodsRestarting", Detail: "12 pods restarted containers (more than 10)", Points: 5},
				{Reason: "ControlPlaneUnhealthy", Detail: "control plane is not fully healthy: kube-scheduler", Points: 30},
				{Reason: "ControlPlaneComponentUnhealthy", Detail: "control-plane component kube-scheduler is unhealthy", Points: 8},
				{Reason: "CPUCritical", Detail: "cluster CPU use is 96.0% (95% or more)", Points: 10},
				{Reason: "MemoryHigh", Detail: "cluster memory use is 85.0% (80% or more)", Points: 5},
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Compute(tc.facts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: Compute() mismatch (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestComputeBands(t *testing.T) {
	tests := map[string]struct {
		facts Facts
		want  Score
	}{
		// 3 not-ready nodes: 85.
		"85 is green": {facts: Facts{Nodes: notReadyNodes(3)}, want: Score{Value: 85, Band: BandGreen}},
		// 6 not-ready nodes: 70.
		"70 is amber": {facts: Facts{Nodes: notReadyNodes(6)}, want: Score{Value: 70, Band: BandAmber}},
		// 12 not-ready nodes: 40.
		"40 is red": {facts: Facts{Nodes: notReadyNodes(12)}, want: Score{Value: 40, Band: BandRed}},
		// 4 not-ready nodes: 80, the lowest green.
		"80 is green": {facts: Facts{Nodes: notReadyNodes(4)}, want: Score{Value: 80, Band: BandGreen}},
		// 16 crash-looping pods: 60, the lowest amber.
		"60 is amber": {facts: Facts{CrashLoopingPods: 16}, want: Score{Value: 60, Band: BandAmber}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Compute(tc.facts)
			got.Penalties = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Compute() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBandOf(t *testing.T) {
	tests := map[int32]Band{
		0: BandRed, 40: BandRed, 59: BandRed,
		60: BandAmber, 70: BandAmber, 79: BandAmber,
		80: BandGreen, 85: BandGreen, 100: BandGreen,
	}
	for score, want := range tests {
		if got := BandOf(score); got != want {
			t.Errorf("BandOf(%d) = %q, want %q", score, got, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	s := Compute(Facts{Nodes: append(notReadyNodes(3), NodeFacts{Name: "z", Ready: true, DiskPressure: true}), FailedPods: 2})
	tests := map[string]struct {
		limit int
		want  []Penalty
	}{
		"fits": {limit: 5, want: s.Penalties},
		"merged by reason": {limit: 4, want: []Penalty{
			{Reason: "NodeNotReady", Detail: "3 times, e.g. node worker-00 is not Ready", Points: 15},
			{Reason: "NodeDiskPressure", Detail: "node z is under disk pressure", Points: 4},
			{Reason: "PodsFailed", Detail: "2 pods failed", Points: 4},
		}},
		"merged and cut": {limit: 2, want: []Penalty{
			{Reason: "NodeNotReady", Detail: "3 times, e.g. node worker-00 is not Ready", Points: 15},
			{Reason: "NodeDiskPressure", Detail: "node z is under disk pressure", Points: 4},
		}},
		"no room": {limit: 0, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, s.Summarize(tc.limit)); diff != "" {
				t.Errorf("Summarize(%d) mismatch (-want +got):\n%s", tc.limit, diff)
			}
		})
	}
	if len(s.Penalties) != 5 {
		t.Errorf("Summarize changed the score's penalties: %v", s.Penalties)
	}
}
