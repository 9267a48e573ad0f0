//go:build tools

// Package tools pins vCluster, whose `vcluster start` runs in tests and in `make run` where the
// chart's StatefulSet Pod would run (a test actor plays only the kubelet). See
// hack/build-tools.sh.
package tools

import (
	_ "github.com/loft-sh/vcluster/cmd/vcluster"
)
