// Package framework starts the real servers the tests run against: kube-apiservers with etcd (the
// envtest binaries built by hack/build-tools.sh) playing the backend and target clusters, and a kcp
// server. It never fakes Kubernetes; it fails a test whose binaries are missing with the command
// that builds them.
package framework
