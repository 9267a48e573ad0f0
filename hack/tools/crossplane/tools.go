//go:build tools

// Package tools pins Crossplane core (the XR and composition engine), built from the Go module
// proxy and run as a process in tests and in `make run` (standing in for the Pod of Crossplane's
// Helm chart). Its CRDs ship in the module (cluster/crds). See hack/build-tools.sh.
package tools

import (
	_ "github.com/crossplane/crossplane/v2/cmd/crossplane"
)
