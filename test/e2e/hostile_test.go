package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/sim"
)

// TestHostileTargetsCannotStallOrKillTheManager: a tenant points four HostClusters at "API
// servers" of their own that answer /version and then attack the node list: continue tokens
// forever, a gzip bomb that decompresses to 2 GiB, ten million empty items (30 MB of JSON, 7 GiB
// once decoded into Nodes), and no answer at all. The manager runs with two HostCluster workers,
// one of which a workspace may hold at a time, and a page cap of 200 (the other caps are the
// defaults). Meanwhile a Tenant and a HostCluster of another workspace reach Ready; the hostile
// workspace never had two requests served at once; each limit fails its HostCluster with reason
// ReadLimitExceeded and the limit named, logged in one line; the hang is retried like an
// unreachable target; and the manager's peak memory stays far below what any of the attacks
// decompresses or decodes to.
func TestHostileTargetsCannotStallOrKillTheManager(t *testing.T) {
	e := sharedEnv(t)
	target := e.hostTarget(t)
	const (
		pageCap   = 200
		pageDelay = 200 * time.Millisecond
		// peakBound is far above what the manager needs (its baseline and one capped answer), and
		// far below what reading either bomb whole takes.
		peakBound = 1 << 30
	)
	t.Cleanup(func() {
		e.stopManager()
		e.mu.Lock()
		e.extraArgs = nil
		e.mu.Unlock()
		if err := e.startManager(); err != nil {
			t.Errorf("failed to start the manager again: %v", err)
		}
	})
	e.stopManager()
	e.mu.Lock()
	e.extraArgs = []string{"--hostcluster-concurrency", "2", "--max-workers-per-workspace", "1", "--target-max-list-pages", strconv.Itoa(pageCap)}
	e.mu.Unlock()
	if err := e.startManager(); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	pid, logPath := e.mgr.Process.Pid, e.managerLogPath(e.starts)
	e.mu.Unlock()

	inFlight := &sim.InFlight{}
	attacks := map[string]sim.HostileOptions{
		"endless": {Attack: sim.AttackEndlessContinue, PageDelay: pageDelay, InFlight: inFlight},
		"bomb":    {Attack: sim.AttackGzipBomb, BombSize: 2 << 30, InFlight: inFlight},
		"items":   {Attack: sim.AttackEmptyItems, Items: 10_000_000, InFlight: inFlight},
		"hang":    {Attack: sim.AttackHang, InFlight: inFlight},
	}
	servers := map[string]*sim.HostileCluster{}
	evil, evilLC, _ := e.tenantWorkspace(t, "hostile")
	for name, opts := range attacks {
		servers[name] = sim.StartHostileCluster(t, opts)
		e.connect(t, evil, e.seedHostCluster(t, name, name+"1", clusterPath, false), servers[name].Kubeconfig)
	}

	// Another workspace, meanwhile: its Tenant and its HostCluster reach Ready.
	good, goodLC, _ := e.tenantWorkspace(t, "bystander")
	e.connect(t, good, e.seedHostCluster(t, "bystander", "bystander1", clusterPath, false), target.Kubeconfig)
	e.readyTenant(t, good, goodLC, seedTenant(t, "default", "bystander", "hostile-bystander-"+goodLC))
	waitHostClusterPhase(t, good, "bystander", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	t.Logf("the bystander workspace is Ready; the endless list has served %d pages", servers["endless"].NodeLists())

	// Each attack ends its HostCluster with the limit named (the hang: retried as unreachable
	// until the give-up time, then failed). Every check below reports, none stops the test.
	wants := map[string]struct{ reason, message string }{
		"endless": {kov1alpha1.ReadLimitExceededReason, fmt.Sprintf("the cluster's node list exceeded %d pages", pageCap)},
		"bomb":    {kov1alpha1.ReadLimitExceededReason, "the cluster's response to GET /api/v1/nodes exceeded 32 MiB (decompressed)"},
		"items":   {kov1alpha1.ReadLimitExceededReason, "the cluster's response to GET /api/v1/nodes exceeded 150000 array elements"},
		"hang":    {kov1alpha1.UnreachableReason, "(timed out)"},
	}
	hcs := map[string]*kov1alpha1.HostCluster{}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		failed := 0
		for name := range wants {
			hcs[name] = getHostCluster(t, evil, name)
			if hcs[name].Status.Phase == kov1alpha1.HostClusterPhaseFailed {
				failed++
			}
		}
		if failed == len(wants) || time.Now().After(deadline) {
			break
		}
	}
	for name, want := range wants {
		hc := hcs[name]
		if hc.Status.Phase != kov1alpha1.HostClusterPhaseFailed {
			t.Errorf("%s did not fail within 5 minutes: %s", name, describeHC(hc))
			continue
		}
		for _, typ := range []string{kov1alpha1.AccessValidatedCondition, kov1alpha1.StalledCondition} {
			c := reconcile.GetCondition(hc, typ)
			if c == nil || c.Reason != want.reason || !strings.Contains(c.Message, want.message) {
				t.Errorf("%s: %s = %+v, want reason %s and %q", name, typ, c, want.reason, want.message)
			}
		}
	}
	if n := servers["endless"].NodeLists(); n != pageCap {
		t.Errorf("the endless list was read for %d pages, want exactly the cap of %d", n, pageCap)
	}
	// Two workers, one share: the hostile workspace never held both.
	if n := inFlight.Max(); n != 1 {
		t.Errorf("the hostile workspace had %d requests served at once, want 1 (its share of the workers)", n)
	}

	peak, err := peakRSS(pid)
	if err != nil {
		t.Fatalf("the manager is gone (%v): killed?", err)
	}
	t.Logf("the manager's peak resident memory: %d MiB (the gzip bomb put %d KiB on the wire)", peak>>20, servers["bomb"].WireBytes()>>10)
	if peak > peakBound {
		t.Errorf("the manager's peak resident memory was %d MiB, over %d MiB", peak>>20, peakBound>>20)
	}

	// One clear line each in the manager's log, not one per page or retry.
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []string{fmt.Sprintf("exceeded %d pages", pageCap), "exceeded 32 MiB (decompressed)", "exceeded 150000 array elements"} {
		var lines []string
		sc := bufio.NewScanner(strings.NewReader(string(raw)))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), limit) {
				lines = append(lines, sc.Text())
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "Reconciler error") || !strings.Contains(lines[0], kov1alpha1.ReadLimitExceededReason) {
			t.Errorf("%d log lines name %q, want one Reconciler error with reason %s:\n%s", len(lines), limit, kov1alpha1.ReadLimitExceededReason, strings.Join(lines, "\n"))
		}
	}
	if t.Failed() {
		e.logManagerLinesAbout(t, evilLC, goodLC)
	}
}

// peakRSS is the peak resident set size of process pid (VmHWM in /proc/<pid>/status), in bytes.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
