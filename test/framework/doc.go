// Package framework starts the real servers the tests run against: kube-apiservers with etcd (the
// envtest binaries built by hack/build-tools.sh) playing the backend and target clusters, and a kcp
// server. It never fakes Kubernetes; it fails a test whose binaries are missing with the command
// that builds them.
package framework

import (
	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func init() {
	// The servers' own client libraries log through controller-runtime; tests read files instead.
	ctrllog.SetLogger(logr.Discard())
}
