// Package health computes a cluster's health score from facts (Compute, a pure function) and
// reads those facts, with the cluster's inventory, from a live cluster (Read).
//
// The score is the penalty table of docs/fleet.md#health-score: start at 100,
// subtract a fixed penalty per issue found, clamp to 0..100. Every penalty that applied is
// returned with its reason and detail, so the fleet overview can show why a score is what it is.
package health

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Band is the badge colour of a score.
type Band string

const (
	// BandGreen is a score of 80 and above.
	BandGreen Band = "green"
	// BandAmber is a score from 60 to 79.
	BandAmber Band = "amber"
	// BandRed is a score below 60.
	BandRed Band = "red"
)

// Penalty reasons, one per row of the penalty table (the CPU and memory rows have two each, one
// per threshold). They are PascalCase like condition reasons.
const (
	ReasonNodeNotReady                   = "NodeNotReady"
	ReasonNodeMemoryPressure             = "NodeMemoryPressure"
	ReasonNodeDiskPressure               = "NodeDiskPressure"
	ReasonNodePIDPressure                = "NodePIDPressure"
	ReasonNodeNetworkUnavailable         = "NodeNetworkUnavailable"
	ReasonPodsFailed                     = "PodsFailed"
	ReasonPodsCrashLooping               = "PodsCrashLooping"
	ReasonPodsRestarting                 = "PodsRestarting"
	ReasonControlPlaneUnhealthy          = "ControlPlaneUnhealthy"
	ReasonControlPlaneAPIServerUnhealthy = "ControlPlaneAPIServerUnhealthy"
	ReasonControlPlaneComponentUnhealthy = "ControlPlaneComponentUnhealthy"
	ReasonCPUCritical                    = "CPUCritical"
	ReasonCPUHigh                        = "CPUHigh"
	ReasonMemoryCritical                 = "MemoryCritical"
	ReasonMemoryHigh                     = "MemoryHigh"
)

// The penalty table (docs/fleet.md#health-score), in points subtracted from 100.
const (
	pointsNodeNotReady           = 5.0
	pointsNodeMemoryPressure     = 3.0
	pointsNodeDiskPressure       = 4.0
	pointsNodePIDPressure        = 2.0
	pointsNodeNetworkUnavailable = 6.0
	pointsFailedPod              = 2.0
	pointsCrashLoopingPod        = 2.5
	pointsRestartingPods         = 5.0 // flat, for more than restartingPodsThreshold pods
	pointsControlPlaneUnhealthy  = 30.0
	pointsControlPlaneAPIServer  = 15.0 // instead of 30 when the API server is the only one
	pointsControlPlaneComponent  = 8.0  // each unhealthy component, on top
	pointsUsageCritical          = 10.0 // CPU or memory at criticalUsagePercent or more
	pointsUsageHigh              = 5.0  // CPU or memory at highUsagePercent or more

	restartingPodsThreshold = 10
	criticalUsagePercent    = 95.0
	highUsagePercent        = 80.0
)

// The bands' lower bounds.
const greenFrom, amberFrom int32 = 80, 60

// APIServerComponent is the control-plane component name of the API server (kubeadm's
// `component` label of its static pod).
const APIServerComponent = "kube-apiserver"

// NodeFacts are the conditions of one node that the score looks at. The pressure and
// NetworkUnavailable fields are true when that condition's status is True.
type NodeFacts struct {
	Name               string
	Ready              bool
	MemoryPressure     bool
	DiskPressure       bool
	PIDPressure        bool
	NetworkUnavailable bool
}

// ControlPlaneFacts say whether the control plane is healthy.
type ControlPlaneFacts struct {
	// Known is false when no control-plane pods are visible (a managed control plane such as
	// EKS, or an API server not run by kubeadm): then the control plane costs no points, since
	// nothing can be said about it.
	Known bool
	// APIServerHealthy is false when the API server is unhealthy. A false value counts the API
	// server as an unhealthy component even when Unhealthy does not list it (Read sets both
	// consistently).
	APIServerHealthy bool
	// Unhealthy are the names of the unhealthy components, e.g. etcd, kube-scheduler.
	Unhealthy []string
}

// Facts are what the score is computed from.
type Facts struct {
	Nodes []NodeFacts
	// FailedPods is the number of pods in phase Failed.
	FailedPods int
	// CrashLoopingPods is the number of pods with a container waiting in CrashLoopBackOff.
	CrashLoopingPods int
	// RestartingPods is the number of pods with a container that restarted within RestartWindow.
	RestartingPods int
	ControlPlane   ControlPlaneFacts
	// CPUPercent and MemoryPercent are the cluster's use in percent; nil is unknown and costs
	// no points.
	CPUPercent, MemoryPercent *float64
}

// Penalty is one penalty that applied.
type Penalty struct {
	// Reason is one of the Reason constants, e.g. NodeNotReady.
	Reason string
	// Detail says what was found, e.g. "node worker-1 is not Ready".
	Detail string
	// Points subtracted from 100.
	Points float64
}

// Score is a computed health score.
type Score struct {
	// Value is 0..100.
	Value int32
	Band  Band
	// Penalties that applied, in the order of the penalty table; within a row, nodes by name.
	Penalties []Penalty
}

// BandOf returns the band of score: green from 80, amber from 60 to 79, red below 60.
func BandOf(score int32) Band {
	switch {
	case score >= greenFrom:
		return BandGreen
	case score >= amberFrom:
		return BandAmber
	default:
		return BandRed
	}
}

// Compute computes the health score of f: 100 minus the sum of the penalties, clamped to 0..100
// and rounded to the nearest integer, halves up (97.5 is 98: one crash-looping pod).
//
// The table's control-plane row ("−30, or −15 if only the API server is affected") is read as:
// when the control plane is Known and at least one component is unhealthy, −15 if the API server
// is the only unhealthy component, else −30; in both cases each unhealthy component costs −8 more.
func Compute(f Facts) Score {
	var ps []Penalty
	add := func(reason string, points float64, format string, args ...any) {
		ps = append(ps, Penalty{Reason: reason, Detail: fmt.Sprintf(format, args...), Points: points})
	}

	nodes := slices.Clone(f.Nodes)
	slices.SortStableFunc(nodes, func(a, b NodeFacts) int { return strings.Compare(a.Name, b.Name) })
	nodeRows := []struct {
		reason string
		points float64
		bad    func(NodeFacts) bool
		what   string
	}{
		{ReasonNodeNotReady, pointsNodeNotReady, func(n NodeFacts) bool { return !n.Ready }, "is not Ready"},
		{ReasonNodeMemoryPressure, pointsNodeMemoryPressure, func(n NodeFacts) bool { return n.MemoryPressure }, "is under memory pressure"},
		{ReasonNodeDiskPressure, pointsNodeDiskPressure, func(n NodeFacts) bool { return n.DiskPressure }, "is under disk pressure"},
		{ReasonNodePIDPressure, pointsNodePIDPressure, func(n NodeFacts) bool { return n.PIDPressure }, "is under PID pressure"},
		{ReasonNodeNetworkUnavailable, pointsNodeNetworkUnavailable, func(n NodeFacts) bool { return n.NetworkUnavailable }, "has its network unavailable"},
	}
	for _, row := range nodeRows {
		for _, n := range nodes {
			if row.bad(n) {
				add(row.reason, row.points, "node %s %s", n.Name, row.what)
			}
		}
	}

	if f.FailedPods > 0 {
		add(ReasonPodsFailed, pointsFailedPod*float64(f.FailedPods), "%s failed", pods(f.FailedPods))
	}
	if f.CrashLoopingPods > 0 {
		add(ReasonPodsCrashLooping, pointsCrashLoopingPod*float64(f.CrashLoopingPods), "%s crash-looping", pods(f.CrashLoopingPods))
	}
	if f.RestartingPods > restartingPodsThreshold {
		add(ReasonPodsRestarting, pointsRestartingPods, "%s restarted containers (more than %d)", pods(f.RestartingPods), restartingPodsThreshold)
	}

	if unhealthy := unhealthyComponents(f.ControlPlane); f.ControlPlane.Known && len(unhealthy) > 0 {
		if len(unhealthy) == 1 && unhealthy[0] == APIServerComponent {
			add(ReasonControlPlaneAPIServerUnhealthy, pointsControlPlaneAPIServer, "only the API server is unhealthy")
		} else {
			add(ReasonControlPlaneUnhealthy, pointsControlPlaneUnhealthy, "control plane is not fully healthy: %s", strings.Join(unhealthy, ", "))
		}
		for _, c := range unhealthy {
			add(ReasonControlPlaneComponentUnhealthy, pointsControlPlaneComponent, "control-plane component %s is unhealthy", c)
		}
	}

	usage := func(pct *float64, resource, critical, high string) {
		switch {
		case pct == nil:
		case *pct >= criticalUsagePercent:
			add(critical, pointsUsageCritical, "cluster %s use is %.1f%% (%.0f%% or more)", resource, *pct, criticalUsagePercent)
		case *pct >= highUsagePercent:
			add(high, pointsUsageHigh, "cluster %s use is %.1f%% (%.0f%% or more)", resource, *pct, highUsagePercent)
		}
	}
	usage(f.CPUPercent, "CPU", ReasonCPUCritical, ReasonCPUHigh)
	usage(f.MemoryPercent, "memory", ReasonMemoryCritical, ReasonMemoryHigh)

	total := 0.0
	for _, p := range ps {
		total += p.Points
	}
	value := int32(math.Round(math.Max(0, math.Min(100, 100-total))))
	return Score{Value: value, Band: BandOf(value), Penalties: ps}
}

// unhealthyComponents returns the unhealthy components of cp, sorted and without duplicates,
// with the API server added when APIServerHealthy is false.
func unhealthyComponents(cp ControlPlaneFacts) []string {
	var out []string
	for _, c := range cp.Unhealthy {
		if c != "" {
			out = append(out, c)
		}
	}
	if !cp.APIServerHealthy {
		out = append(out, APIServerComponent)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// Summarize returns the penalties of s in at most limit entries, for a status field with a
// bounded list: when there are more, the penalties of one reason are merged into one entry (points
// summed, the detail counting them and naming the first), and what still does not fit is cut.
// The value of the score is never changed by it.
func (s Score) Summarize(limit int) []Penalty {
	if limit <= 0 {
		return nil
	}
	if len(s.Penalties) <= limit {
		return slices.Clone(s.Penalties)
	}
	var out []Penalty
	count := map[string]int{}
	index := map[string]int{}
	for _, p := range s.Penalties {
		i, ok := index[p.Reason]
		if !ok {
			index[p.Reason] = len(out)
			out = append(out, p)
			count[p.Reason] = 1
			continue
		}
		out[i].Points += p.Points
		count[p.Reason]++
	}
	for i, p := range out {
		if n := count[p.Reason]; n > 1 {
			out[i].Detail = fmt.Sprintf("%d times, e.g. %s", n, p.Detail)
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
