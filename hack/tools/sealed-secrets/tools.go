//go:build tools

// Package tools pins the sealed-secrets controller (Bitnami Labs), built from the Go module proxy
// and run as a process in tests where its chart's Deployment Pod would run (a test actor plays
// only the kubelet). The same module's helm/sealed-secrets is the real chart the tests install.
// See hack/build-tools.sh.
package tools

import (
	_ "github.com/bitnami-labs/sealed-secrets/cmd/controller"
)
