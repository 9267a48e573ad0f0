//go:build !linux

package devenv

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
)

// Only Linux has a parent-death signal: elsewhere the processes outlive a killed environment, and
// the next start stops them by their records (Processes).

func tie(*exec.Cmd) {}

// tiedBinary returns binary itself: there is nothing to tie it with.
func (p *Processes) tiedBinary(_, binary string) (string, func(), error) {
	return binary, func() {}, nil
}

// errNotRunning: no process runs with the PID asked about.
var errNotRunning = errors.New("no such process")

// processStarted returns what tells the process pid from a later one given the same PID: its
// start time as ps prints it. A zombie does not run.
func processStarted(pid int) (string, error) {
	out, err := exec.Command("ps", "-o", "stat=,lstart=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return "", errNotRunning
	}
	stat, started, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok || strings.HasPrefix(stat, "Z") {
		return "", errNotRunning
	}
	return strings.Join(strings.Fields(started), " "), nil
}

// processCommand returns the command line of process pid, nil when unknown.
func processCommand(pid int) []string {
	out, err := exec.Command("ps", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// portHolders tells whether port is taken; which process holds it is not found here.
func portHolders(port int) (bool, []int) { return !canListen(port), nil }

// dirHolders finds no holders here.
func dirHolders(string) []int { return nil }
