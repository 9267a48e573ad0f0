//go:build tools

// Package tools pins Flux's helm-controller, built from the Go module proxy and run as a process
// in tests and in `make run` where the flux2 chart's helm-controller Pod would run (a test actor
// plays only the kubelet). It has a tools module of its own: v1.4.3 is built on Kubernetes 0.34
// and controller-runtime 0.22, source-/kustomize-controller v1.9.6 (hack/tools/flux) on 0.36 and
// 0.24. See hack/build-tools.sh.
package tools

import (
	_ "github.com/fluxcd/helm-controller"
)
