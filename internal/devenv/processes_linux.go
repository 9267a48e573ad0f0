package devenv

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// tieEnv carries, to a process started through a script of tiedBinary, what execTied needs: a
// tieSpec as JSON.
const tieEnv = "KUBEOPERA_DEVENV_TIE"

// tieSpec is what a script of tiedBinary tells execTied.
type tieSpec struct {
	// Binary is the binary to run.
	Binary string `json:"binary"`
	// Parent is the PID of the process the binary must die with.
	Parent int `json:"parent"`
	// RecordDir and Name: where and as what to record the process; empty records nothing.
	RecordDir string `json:"recordDir,omitempty"`
	Name      string `json:"name,omitempty"`
}

func init() {
	// Runs before main (or a test binary's tests): the process is a script of tiedBinary's.
	if spec, ok := os.LookupEnv(tieEnv); ok {
		execTied(spec)
	}
}

// tie makes the kernel kill cmd's process when the thread that forks it ends (see Processes).
func tie(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// tiedBinary writes a script that runs binary, with the script's arguments, tied to this process
// and recorded as name (when p records), for a library that starts binary itself (envtest). The
// script execs this process's own executable (/proc/<pid>/exe: the very file this process runs,
// even if it was replaced since) with tieEnv set, whose init runs execTied. The script's parent
// must be this process. remove removes the script.
func (p *Processes) tiedBinary(name, binary string) (path string, remove func(), err error) {
	spec := tieSpec{Binary: binary, Parent: os.Getpid()}
	if p != nil && p.dir != "" {
		spec.RecordDir, spec.Name = p.dir, p.prefix+name
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", nil, err
	}
	path, remove, err = p.scriptPath(name)
	if err != nil {
		return "", nil, err
	}
	script := fmt.Sprintf(`#!/bin/sh
# Runs %s tied to the process that wrote this script (PID %d): the kernel kills it when that
# process dies (internal/devenv, Processes).
%s=%s exec /proc/%d/exe "$@"
`, binary, spec.Parent, tieEnv, shellQuote(string(raw)), spec.Parent)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		remove()
		return "", nil, err
	}
	return path, remove, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// execTied is the process a script of tiedBinary started: it asks the kernel to kill it when its
// parent dies, records itself when asked to, and execs the binary with its own arguments in place
// (the same process, so the signal and the record stay true). It runs during init, on the main
// thread (the Go runtime keeps init there), whose setting the binary inherits. It does not return.
func execTied(raw string) {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "devenv: failed to run a tied process: %v\n", err)
		os.Exit(127)
	}
	var spec tieSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fail(fmt.Errorf("%s: %w", tieEnv, err))
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fail(fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", errno))
	}
	if os.Getppid() != spec.Parent {
		// The parent died before the signal was set: nobody waits for this process.
		os.Exit(1)
	}
	args := append([]string{spec.Binary}, os.Args[1:]...)
	if spec.RecordDir != "" {
		started, err := processStarted(os.Getpid())
		if err != nil {
			fail(err)
		}
		if err := writeRecord(spec.RecordDir, Record{Name: spec.Name, PID: os.Getpid(), Started: started, Command: args}); err != nil {
			fail(fmt.Errorf("failed to record %s: %w", spec.Name, err))
		}
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, tieEnv+"=") {
			env = append(env, kv)
		}
	}
	fail(syscall.Exec(spec.Binary, args, env))
}

// errNotRunning: no process runs with the PID asked about.
var errNotRunning = errors.New("no such process")

// processStarted returns what tells the process pid from a later one given the same PID: the
// boot's ID and its start time. A zombie does not run.
func processStarted(pid int) (string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", errNotRunning
	}
	state, start, err := parseStat(string(raw))
	if err != nil {
		return "", err
	}
	if state == 'Z' || state == 'X' {
		return "", errNotRunning
	}
	boot, err := bootID()
	if err != nil {
		return "", err
	}
	return boot + "/" + start, nil
}

// parseStat returns the state (field 3) and the start time (field 22, clock ticks after boot) of
// a /proc/<pid>/stat line. Field 2, the command, is in parentheses and may itself hold spaces and
// parentheses: the fields after it are counted from its last ")" (proc(5)).
func parseStat(stat string) (state byte, started string, err error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, "", fmt.Errorf("malformed /proc stat: %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, "", fmt.Errorf("malformed /proc stat: %q", stat)
	}
	if _, err := strconv.ParseUint(fields[19], 10, 64); err != nil {
		return 0, "", fmt.Errorf("malformed start time in /proc stat: %q", stat)
	}
	return fields[0][0], fields[19], nil
}

// bootID is the ID of this boot of the system: start times count from the boot.
var bootID = sync.OnceValues(func() (string, error) {
	raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("failed to read the boot ID: %w", err)
	}
	return strings.TrimSpace(string(raw)), nil
})

// processCommand returns the command line of process pid, nil when unknown.
func processCommand(pid int) []string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(raw) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
}

// portHolders tells whether a TCP socket listens on port (on any address, or 127.0.0.1 cannot be
// bound) and returns the processes of this user that have such a socket open.
func portHolders(port int) (held bool, pids []int) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for inode := range listeningInodes(table, port) {
			inodes[inode] = true
		}
	}
	if len(inodes) == 0 {
		return !canListen(port), nil
	}
	return true, openers(func(target string) bool {
		inode, ok := strings.CutPrefix(target, "socket:[")
		return ok && inodes[strings.TrimSuffix(inode, "]")]
	})
}

// listeningInodes returns the inodes of the sockets of a /proc/net/tcp table (proc(5)) in state
// LISTEN on port.
func listeningInodes(table string, port int) map[string]bool {
	out := map[string]bool{}
	f, err := os.Open(table)
	if err != nil {
		return out
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(fields[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
			out[fields[9]] = true
		}
	}
	return out
}

// dirHolders returns the processes of this user that have a file under dir open.
func dirHolders(dir string) []int {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	} else if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return openers(func(target string) bool {
		return target == dir || strings.HasPrefix(target, dir+"/")
	})
}

// openers returns the processes (but this one) with an open file descriptor whose target
// (readlink /proc/<pid>/fd/<n>) matches; the processes of other users cannot be read and are not
// returned.
func openers(match func(target string) bool) []int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fdDir := filepath.Join("/proc", e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && match(target) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
