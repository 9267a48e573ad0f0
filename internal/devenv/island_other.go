//go:build !linux

package devenv

import (
	"errors"
	"os/exec"
)

// Island is a network namespace of its own (see island_linux.go); only Linux has them.
type Island struct{}

// NewIsland fails: network namespaces are Linux's.
func NewIsland() (*Island, error) {
	return nil, errors.New("network islands need Linux network namespaces")
}

// Forward is never reached (NewIsland fails).
func (*Island) Forward(int, string) error { return errors.New("no island") }

// Start is never reached (NewIsland fails).
func (*Island) Start(*Processes, string, *exec.Cmd) (*Child, error) {
	return nil, errors.New("no island")
}

// Close does nothing.
func (*Island) Close() {}

// Reachable is never reached (NewIsland fails).
func (*Island) Reachable(string) bool { return false }
