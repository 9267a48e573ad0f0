//go:build tools

// Package tools pins function-patch-and-transform, the composition function the Compositions in
// config/crossplane run, built from the Go module proxy and run as a process in tests and in
// `make run` (standing in for the Function package's Pod). See hack/build-tools.sh.
package tools

import (
	_ "github.com/crossplane-contrib/function-patch-and-transform"
)
