package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Processes starts the long-running processes of one environment (kcp, etcd, kube-apiserver,
// kube-controller-manager, Flux's controllers, the manager) so that they die with the process that
// started them, and records them, so that what outlives a run anyway is found and stopped by the
// next one.
//
// Dying with the parent: on Linux every process is started with the parent-death signal SIGKILL
// (SysProcAttr.Pdeathsig), so however `make run` ends (Ctrl-C, a closed terminal, kill -9, a CI
// timeout) the kernel kills what it started. SIGKILL rather than SIGTERM: once the parent is gone
// nobody is left to escalate to SIGKILL when a server does not stop, and the servers' data
// survives it (what a killed process wrote is in the page cache, not lost). The kernel sends the
// signal when the thread that forked the child ends, not the process, and Go ends a thread when a
// goroutine locked to it returns (https://go.dev/issue/27505). So every child is forked on a
// goroutine locked to its own OS thread, which it keeps, blocked, until the child exited: no other
// goroutine ever runs on that thread, so none can end it early (Start, onOwnThread).
//
// envtest starts etcd and kube-apiserver itself and sets no parent-death signal (controller-runtime
// v0.24.1 pkg/internal/testing/process: State.Start takes its SysProcAttr from GetSysProcAttr,
// Setpgid only, with no way to add one). StartBackend therefore gives envtest, as the binaries'
// paths, scripts that run each binary through this process's own executable, whose init sets the
// signal with prctl(PR_SET_PDEATHSIG) and then execs the binary in place (tiedBinary, execTied),
// and calls envtest from such a locked thread too.
//
// Records: with a directory (OpenProcesses), each process is recorded as <name>.json (a Record)
// until it exits. One environment holds the directory at a time. StopLeftovers stops the recorded
// processes that still run, after checking that each is still the process recorded: the system
// gives a PID to a new process once the old one is gone, and such a process is never signalled.
//
// A nil *Processes starts processes tied to this process and records nothing.
type Processes struct {
	dir    string
	prefix string
	lock   *os.File
}

// lockFile is the file of the records' directory that the environment holding it keeps locked
// (flock); it holds that process's PID and command line, for the message another one gets.
const lockFile = "lock"

// leftoverGrace is how long StopLeftovers waits for leftovers to exit after SIGTERM before it
// sends SIGKILL, and again after SIGKILL before it gives up.
const leftoverGrace = 20 * time.Second

// OpenProcesses takes dir (created when missing) for the environment of this process. It fails,
// naming the process, while another process holds it: another `make run` on the same state. The
// directory is held until Close or the end of this process.
func OpenProcesses(dir string) (*Processes, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	// A process killed a moment ago may hold the lock a little longer than its children run: its
	// files close when its last thread ends.
	for i := 0; i < 20; i++ {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		holder, _ := io.ReadAll(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another environment runs on %s (%s): stop it first", filepath.Dir(dir), strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("failed to lock %s: %w", f.Name(), err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, err
	}
	if _, err := f.WriteAt([]byte(describe(os.Getpid(), os.Args)+"\n"), 0); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &Processes{dir: dir, lock: f}, nil
}

// Close releases the directory; the processes and their records stay.
func (p *Processes) Close() error {
	if p == nil || p.lock == nil {
		return nil
	}
	return p.lock.Close()
}

// With returns Processes recording in the same directory under names prefixed with prefix and a
// dash, e.g. With("backend") records etcd as backend-etcd.
func (p *Processes) With(prefix string) *Processes {
	if p == nil {
		return nil
	}
	return &Processes{dir: p.dir, prefix: p.prefix + prefix + "-"}
}

// Child is a process started by Processes.Start or StartTied.
type Child struct {
	// Cmd is the started command.
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Done is closed once the process exited and cmd.Wait returned.
func (c *Child) Done() <-chan struct{} { return c.done }

// Wait waits until the process exited and returns what cmd.Wait returned.
func (c *Child) Wait() error {
	<-c.done
	return c.err
}

// StartTied starts cmd tied to this process (see Processes) without recording it, and waits for
// it in the background: call Child.Wait, not cmd.Wait.
func StartTied(cmd *exec.Cmd) (*Child, error) {
	return (*Processes)(nil).Start("", cmd)
}

// Start starts cmd as the environment's process name, tied to this process (see Processes), and
// records it until it exited. It keeps cmd's SysProcAttr (e.g. Setpgid) and adds the
// parent-death signal. It waits for cmd in the background: call Child.Wait, not cmd.Wait.
func (p *Processes) Start(name string, cmd *exec.Cmd) (*Child, error) {
	tie(cmd)
	c := &Child{Cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(c.done)
		// Never unlocked: the thread is the child's parent thread, and ends with this goroutine
		// once the child exited (see Processes).
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		rec, err := p.record(name, cmd.Process.Pid, cmd.Args)
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			started <- err
			return
		}
		started <- nil
		c.err = cmd.Wait()
		p.forget(rec)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// onOwnThread calls start on a goroutine locked to its own OS thread and returns what start
// returned; the goroutine keeps the thread until release is closed. Every process start forks,
// directly or through a library (envtest), has that thread as its parent thread: close release only
// once they exited (see Processes).
func onOwnThread(start func() error, release <-chan struct{}) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine.
		runtime.LockOSThread()
		errc <- start()
		<-release
	}()
	return <-errc
}

// Record is what Processes keeps of a process it started, in <dir>/<Name>.json.
type Record struct {
	// Name is the process's name in the environment, e.g. kcp or backend-etcd.
	Name string `json:"name"`
	// PID is its process ID.
	PID int `json:"pid"`
	// Started tells it from a later process given the same PID: on Linux the boot's ID and the
	// process's start time in clock ticks after boot (/proc/<pid>/stat), elsewhere ps's start
	// time.
	Started string `json:"started"`
	// Command is its command line.
	Command []string `json:"command"`
}

// Running tells whether the process r records still runs: a process with PID r.PID runs (a zombie
// does not) and started when r says.
func (r Record) Running() bool {
	started, err := processStarted(r.PID)
	return err == nil && r.matches(started)
}

// matches tells whether a process that started at started is the process r records.
func (r Record) matches(started string) bool {
	return r.Started != "" && started == r.Started
}

// String is the record for people: name, PID and command line.
func (r Record) String() string {
	return r.Name + " (" + describe(r.PID, r.Command) + ")"
}

// ReadRecords returns the records of dir, skipping files that are no record.
func ReadRecords(dir string) ([]Record, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, f := range files {
		if r, err := readRecord(f); err == nil {
			recs = append(recs, r)
		}
	}
	return recs, nil
}

func readRecord(path string) (Record, error) {
	var r Record
	raw, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	if r.PID <= 0 || recordFile(r.Name) != filepath.Base(path) {
		return r, fmt.Errorf("%s: not a process record", path)
	}
	return r, nil
}

// record records the process pid as name, when p records and the process can still be told
// apart (it may have exited already: then there is nothing to record).
func (p *Processes) record(name string, pid int, command []string) (*Record, error) {
	if p == nil || p.dir == "" {
		return nil, nil
	}
	started, err := processStarted(pid)
	if err != nil {
		return nil, nil //nolint:nilerr // gone already: nothing to record
	}
	r := &Record{Name: p.prefix + name, PID: pid, Started: started, Command: command}
	if err := writeRecord(p.dir, *r); err != nil {
		return nil, fmt.Errorf("failed to record %s: %w", r.Name, err)
	}
	return r, nil
}

// recordFile is the name of the file recording the process name: the name with every path
// separator made a "_" (a Deployment's process is named namespace/name), and ".json".
func recordFile(name string) string {
	return strings.ReplaceAll(name, string(filepath.Separator), "_") + ".json"
}

// writeRecord writes r to dir, replacing the file in one step so a reader never sees half of it.
func writeRecord(dir string, r Record) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+recordFile(r.Name)+"-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(raw); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, recordFile(r.Name)))
}

// forget removes the record of an exited process, unless a later process of the same name
// replaced it.
func (p *Processes) forget(r *Record) {
	if p == nil || r == nil {
		return
	}
	path := filepath.Join(p.dir, recordFile(r.Name))
	if cur, err := readRecord(path); err == nil && cur.PID == r.PID && cur.Started == r.Started {
		_ = os.Remove(path)
	}
}

// forgetExited removes the record of name when its process no longer runs.
func (p *Processes) forgetExited(name string) {
	if p == nil || p.dir == "" {
		return
	}
	path := filepath.Join(p.dir, recordFile(p.prefix+name))
	if r, err := readRecord(path); err == nil && !r.Running() {
		_ = os.Remove(path)
	}
}

// StopLeftovers stops the recorded processes that still run (what a run killed before it could
// stop them left running) and removes every record: SIGTERM to each, to the process group it leads
// when it leads one (the servers run in their own), then SIGKILL to those that still run after
// leftoverGrace. A record whose PID now belongs to another process, or to none, is removed and
// nothing is signalled. It returns the records of the processes it stopped, or fails, naming
// those that still run after SIGKILL.
func (p *Processes) StopLeftovers(ctx context.Context) ([]Record, error) {
	if p == nil || p.dir == "" {
		return nil, nil
	}
	files, err := filepath.Glob(filepath.Join(p.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var left []Record
	for _, f := range files {
		if r, err := readRecord(f); err == nil && r.Running() {
			left = append(left, r)
			continue
		}
		// Gone, a reused PID, or no record: nothing to stop.
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	if len(left) == 0 {
		return nil, nil
	}
	for _, r := range left {
		signalRecorded(r, syscall.SIGTERM)
	}
	err = waitGone(ctx, left, leftoverGrace)
	if err != nil && ctx.Err() == nil {
		for _, r := range left {
			signalRecorded(r, syscall.SIGKILL)
		}
		err = waitGone(ctx, left, leftoverGrace)
	}
	if err != nil {
		return nil, err
	}
	for _, r := range left {
		if err := os.Remove(filepath.Join(p.dir, recordFile(r.Name))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return left, nil
}

// signalRecorded sends sig to the process r records, while it is that process: to the process
// group it leads when it leads one, else to it alone.
func signalRecorded(r Record, sig syscall.Signal) {
	// On Linux a pidfd: the signal below reaches the process checked after this, or none.
	proc, err := os.FindProcess(r.PID)
	if err != nil {
		return
	}
	defer func() { _ = proc.Release() }()
	if !r.Running() {
		return
	}
	if pgid, err := syscall.Getpgid(r.PID); err == nil && pgid == r.PID {
		_ = syscall.Kill(-r.PID, sig)
		return
	}
	_ = proc.Signal(sig)
}

// waitGone waits until none of the processes of recs runs, at most timeout; it fails naming
// those that still run.
func waitGone(ctx context.Context, recs []Record, timeout time.Duration) error {
	var running []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		running = running[:0]
		for _, r := range recs {
			if r.Running() {
				running = append(running, r.String())
			}
		}
		return len(running) == 0, nil
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("processes a previous run left still run %s after the signal: %s", timeout, strings.Join(running, "; "))
	}
	return nil
}

// Claim is a TCP port or a directory that an environment needs for itself.
type Claim struct {
	// Port is a TCP port, on any address; 0 when Dir is set.
	Port int
	// Dir is a directory in which no other process may have files open (a server's data).
	Dir string
	// What says what needs it, e.g. "kcp (KCP_PORT)".
	What string
}

// CheckClaims returns an error naming each claim another process holds, with that process's PID
// and command line, or nil when no claim is held: a process that listens on the port, or has a
// file open in the directory. Call it after StopLeftovers: a holder then is none of the
// environment's own processes, and stopping it is for whoever started it.
func CheckClaims(claims []Claim) error {
	var lines []string
	var pids []string
	seen := map[int]bool{}
	for _, c := range claims {
		var holders []int
		var held bool
		var what string
		if c.Dir != "" {
			what = c.Dir
			holders = dirHolders(c.Dir)
			held = len(holders) > 0
		} else {
			what = fmt.Sprintf("port %d", c.Port)
			held, holders = portHolders(c.Port)
		}
		if c.What != "" {
			what += " (" + c.What + ")"
		}
		if !held {
			continue
		}
		if len(holders) == 0 {
			lines = append(lines, "  "+what+": held by a process this user cannot see")
			continue
		}
		for _, pid := range holders {
			lines = append(lines, fmt.Sprintf("  %s: held by %s", what, describe(pid, processCommand(pid))))
			if !seen[pid] {
				seen[pid] = true
				pids = append(pids, fmt.Sprint(pid))
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	hint := "stop them and start again"
	if len(pids) > 0 {
		hint = "stop them (kill " + strings.Join(pids, " ") + ") and start again"
	}
	return fmt.Errorf("processes this environment did not start hold what it needs:\n%s\n%s", strings.Join(lines, "\n"), hint)
}

// describe is a process for people: PID and command line, long command lines cut.
func describe(pid int, command []string) string {
	cmd := strings.Join(command, " ")
	if len(cmd) > 200 {
		cmd = cmd[:200] + " ..."
	}
	if cmd == "" {
		return fmt.Sprintf("PID %d", pid)
	}
	return fmt.Sprintf("PID %d: %s", pid, cmd)
}

// scriptPath returns where tiedBinary writes the script of name, and how to remove it: bin under
// the records' directory, else a new temporary directory named after this process
// (devenv-tied-<pid>-*), which a later process removes should this one end without removing it.
func (p *Processes) scriptPath(name string) (path string, remove func(), err error) {
	if p != nil && p.dir != "" {
		dir := filepath.Join(p.dir, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		path := filepath.Join(dir, p.prefix+name)
		return path, func() { _ = os.Remove(path) }, nil
	}
	sweepScripts()
	dir, err := os.MkdirTemp("", fmt.Sprintf("devenv-tied-%d-", os.Getpid()))
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, name), func() { _ = os.RemoveAll(dir) }, nil
}

// sweepScripts removes, once per process, the temporary script directories of processes that no
// longer run (killed before they could remove them).
var sweepScripts = sync.OnceFunc(func() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "devenv-tied-*-*"))
	for _, dir := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), "devenv-tied-"), "-")
		if n, err := strconv.Atoi(pid); err == nil && n != os.Getpid() {
			if _, err := processStarted(n); err != nil {
				_ = os.RemoveAll(dir)
			}
		}
	}
})

// canListen tells whether this process could listen on 127.0.0.1:port.
func canListen(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
