//go:build tools

// Package tools pins Flux's source-controller and kustomize-controller, built from the Go module
// proxy and run as processes in tests and in `make run` (standing in for the Pods a kubelet would
// run). See hack/build-tools.sh.
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
