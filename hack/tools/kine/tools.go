//go:build tools

// Package tools pins kine, the store of vCluster's k8s distro. See hack/build-tools.sh.
package tools

import (
	_ "github.com/k3s-io/kine"
)
