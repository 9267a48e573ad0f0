package framework

import "testing"

// SkipWithoutServers skips t under `go test -short` (make test-unit): every test that starts a
// real server goes through StartCluster, StartBackend or StartKCP, which call it, so the short
// run is the pure-function tier only. `make test` runs everything.
func SkipWithoutServers(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs real servers (kube-apiserver, kcp); run `make test`")
	}
}
