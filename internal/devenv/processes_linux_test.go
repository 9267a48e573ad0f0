package devenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func TestParseStat(t *testing.T) {
	// Fields 3.. of a real /proc/<pid>/stat line; the start time (field 22) is 4242.
	rest := "S 1 1 1 0 -1 4194560 1000 0 0 0 10 5 0 0 20 0 1 0 4242 1000000 100 18446744073709551615"
	tests := map[string]struct {
		stat    string
		state   byte
		started string
		wantErr bool
	}{
		"plain command":             {stat: "123 (etcd) " + rest, state: 'S', started: "4242"},
		"command with space":        {stat: "123 (kube apiserver) " + rest, state: 'S', started: "4242"},
		"command with parentheses":  {stat: "123 (a) b) (c) " + rest, state: 'S', started: "4242"},
		"zombie":                    {stat: "123 (etcd) Z" + rest[1:], state: 'Z', started: "4242"},
		"no command":                {stat: "123 etcd " + rest, wantErr: true},
		"too few fields":            {stat: "123 (etcd) S 1 1", wantErr: true},
		"start time not a number":   {stat: "123 (etcd) " + strings.Replace(rest, "4242", "x", 1), wantErr: true},
		"state longer than a field": {stat: "123 (etcd) SS" + rest[1:], wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			state, started, err := parseStat(tt.stat)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if state != tt.state || started != tt.started {
				t.Errorf("got state %q, started %q; want %q, %q", state, started, tt.state, tt.started)
			}
		})
	}
}

// startSleep starts `sleep 300` in its own process group, untied (as a server a run killed before
// this fix left), handing it files to hold; it is killed when the test ends.
func startSleep(t *testing.T, files ...*os.File) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.ExtraFiles = files
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return cmd
}

// recordOf records the running process pid as name in dir, as Processes does.
func recordOf(t *testing.T, dir, name string, pid int) Record {
	t.Helper()
	started, err := processStarted(pid)
	if err != nil {
		t.Fatal(err)
	}
	r := Record{Name: name, PID: pid, Started: started, Command: processCommand(pid)}
	if err := writeRecord(dir, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestStopLeftoversSparesReusedPIDs: StopLeftovers stops a recorded process that still runs, and
// never signals a process that got the PID of a recorded one that exited (its start time differs).
func TestStopLeftoversSparesReusedPIDs(t *testing.T) {
	dir := t.TempDir()
	leftover, other := startSleep(t), startSleep(t)
	recordOf(t, dir, "kcp", leftover.Process.Pid)
	// The record of an earlier process whose PID other got since: same PID, another start.
	reused := recordOf(t, dir, "backend-etcd", other.Process.Pid)
	boot, _ := bootID()
	reused.Started = boot + "/1"
	if err := writeRecord(dir, reused); err != nil {
		t.Fatal(err)
	}
	// The record of a process that is gone.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(dir, Record{Name: "manager", PID: gone.Process.Pid, Started: boot + "/2"}); err != nil {
		t.Fatal(err)
	}

	stopped, err := (&Processes{dir: dir}).StopLeftovers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 1 || stopped[0].Name != "kcp" || stopped[0].PID != leftover.Process.Pid {
		t.Errorf("stopped %v, want only kcp (PID %d)", stopped, leftover.Process.Pid)
	}
	if _, err := processStarted(leftover.Process.Pid); err == nil {
		t.Errorf("the leftover (PID %d) still runs", leftover.Process.Pid)
	}
	if _, err := processStarted(other.Process.Pid); err != nil {
		t.Errorf("the process that got a recorded PID (%d) was signalled: %v", other.Process.Pid, err)
	}
	if recs, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(recs) != 0 {
		t.Errorf("records left: %v", recs)
	}
}

// TestCheckClaimsNamesTheHolders: a port another process listens on and a directory it has a file
// open in are reported with its PID and command line; free ones are not.
func TestCheckClaimsNamesTheHolders(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	sock, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	data := t.TempDir()
	db, err := os.Create(filepath.Join(data, "db"))
	if err != nil {
		t.Fatal(err)
	}
	holder := startSleep(t, sock, db)
	_ = sock.Close()
	_ = db.Close()
	free, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}

	err = CheckClaims([]Claim{
		{Port: port, What: "kcp"},
		{Dir: data, What: "the backend's etcd"},
		{Port: free[0], What: "the git server"},
		{Dir: t.TempDir(), What: "kcp's state"},
	})
	if err == nil {
		t.Fatal("no error, want the port and the directory reported")
	}
	pid := strconv.Itoa(holder.Process.Pid)
	for _, want := range []string{
		fmt.Sprintf("port %d (kcp): held by PID %s: sleep 300", port, pid),
		data + " (the backend's etcd): held by PID " + pid + ": sleep 300",
		"kill " + pid + ")",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "git server") || strings.Contains(err.Error(), "kcp's state") {
		t.Errorf("error reports a free claim:\n%v", err)
	}
}

// helperEnv makes the test binary run as the parent in TestChildrenDieWithTheirParent: it holds
// the records' directory the variable names.
const helperEnv = "DEVENV_TEST_PARENT_DIR"

// TestChildrenDieWithTheirParent starts a parent process (this test binary) that starts two
// children as devenv does: one through Processes.Start, one the way envtest starts etcd and
// kube-apiserver (exec.Command of a tiedBinary script, Setpgid). It kills the parent with
// SIGKILL, which gives it no time to stop anything, and waits until both recorded children are
// gone.
func TestChildrenDieWithTheirParent(t *testing.T) {
	if dir := os.Getenv(helperEnv); dir != "" {
		runParent(dir)
		return
	}
	dir := t.TempDir()
	parent := exec.Command(os.Args[0], "-test.run=^TestChildrenDieWithTheirParent$")
	parent.Env = append(os.Environ(), helperEnv+"="+dir)
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() { _ = parent.Process.Kill(); <-exited })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				ready <- sc.Text()
			}
		}
		_ = parent.Wait()
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		t.Fatal("the parent exited before it started its children")
	case <-time.After(30 * time.Second):
		t.Fatal("the parent did not start its children within 30s")
	}

	recs, err := ReadRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range recs {
		names[r.Name] = true
		if !r.Running() {
			t.Errorf("%s does not run before its parent is killed", r)
		}
	}
	if !names["direct"] || !names["scripted"] || len(recs) != 2 {
		t.Fatalf("records %v, want direct and scripted", recs)
	}
	t.Cleanup(func() {
		// Children that outlived their parent (the test failed) do not outlive the test.
		for _, r := range recs {
			signalRecorded(r, syscall.SIGKILL)
		}
	})
	// Another environment on the same directory is refused while the parent holds it.
	if _, err := OpenProcesses(dir); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", parent.Process.Pid)) {
		t.Errorf("OpenProcesses of a held directory: %v, want an error naming PID %d", err, parent.Process.Pid)
	}

	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var running []string
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		running = running[:0]
		for _, r := range recs {
			if r.Running() {
				running = append(running, r.String())
			}
		}
		return len(running) == 0, nil
	})
	if err != nil {
		t.Fatalf("children still run 10s after their parent was killed: %s", strings.Join(running, "; "))
	}
	// The directory is free again, and nothing is left to stop.
	p, err := OpenProcesses(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	if stopped, err := p.StopLeftovers(context.Background()); err != nil || len(stopped) != 0 {
		t.Errorf("StopLeftovers after the kill: stopped %v, %v; want nothing", stopped, err)
	}
}

// runParent is the parent of TestChildrenDieWithTheirParent: it starts its two children, says
// "ready" once both are recorded and waits to be killed.
func runParent(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "parent:", err)
		os.Exit(1)
	}
	procs, err := OpenProcesses(dir)
	if err != nil {
		fail(err)
	}
	direct := exec.Command("sleep", "300")
	direct.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if _, err := procs.Start("direct", direct); err != nil {
		fail(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		fail(err)
	}
	script, _, err := procs.tiedBinary("scripted", sleep)
	if err != nil {
		fail(err)
	}
	// As envtest's process.State.Start does, on a thread kept as StartBackend keeps it.
	err = onOwnThread(func() error {
		cmd := exec.Command(script, "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd.Start()
	}, make(chan struct{}))
	if err != nil {
		fail(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		recs, err := ReadRecords(dir)
		if err != nil || len(recs) < 2 {
			return false, nil
		}
		for _, r := range recs {
			// The scripted child is recorded before it execs sleep.
			if cmd := processCommand(r.PID); !r.Running() || len(cmd) == 0 || filepath.Base(cmd[0]) != "sleep" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		fail(fmt.Errorf("the children were not recorded: %w", err))
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// TestStartRecordsAPathLikeName: a process named after a Deployment outside flux-system
// (namespace/name, as FluxPods names the sealed-secrets controller) starts, is recorded under
// its name and is stopped as a leftover by the next run.
func TestStartRecordsAPathLikeName(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenProcesses(dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	child, err := p.With("target-flux").Start("kube-system/sealed-secrets-controller", cmd)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-child.Done() })
	recs, err := ReadRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Name != "target-flux-kube-system/sealed-secrets-controller" || recs[0].PID != cmd.Process.Pid {
		t.Fatalf("records %v, want target-flux-kube-system/sealed-secrets-controller (PID %d)", recs, cmd.Process.Pid)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	next, err := OpenProcesses(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = next.Close() }()
	stopped, err := next.StopLeftovers(context.Background())
	if err != nil || len(stopped) != 1 || stopped[0].PID != cmd.Process.Pid {
		t.Errorf("StopLeftovers: stopped %v, %v; want the sealed-secrets controller (PID %d)", stopped, err, cmd.Process.Pid)
	}
}
