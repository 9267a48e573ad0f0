package flux_test

import (
	"net/netip"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/netguard"
	"github.com/kubeopera/kubeopera/test/framework"
)

// TestEnsureDialsThroughTheTargetsGuard: Ensure (its client and Helm's, which builds its own
// transport from the config) connects only through the dialer of the config it is given, so the
// HostCluster controller's guard holds for Flux's install too. A real API server sits behind a
// forwarder on the loopback alias 127.0.0.2, which the guard denies: the install fails with the
// guard's refusal, recognisable through Helm's errors, and the forwarder accepts nothing; through
// the allowed 127.0.0.1 the same install reads the target.
func TestEnsureDialsThroughTheTargetsGuard(t *testing.T) {
	target := framework.StartBackend(t)
	to := target.Config.Host
	alias, allowed := framework.Forward(t, "127.0.0.2", to), framework.Forward(t, "127.0.0.1", to)
	guard := netguard.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, netguard.DefaultRules()...)
	via := func(addr string) *rest.Config {
		cfg := rest.CopyConfig(target.Config)
		cfg.Host = "https://" + addr
		cfg.TLSClientConfig.ServerName = "127.0.0.1"
		if err := guard.Apply(cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	i := newInstaller(t, nil)

	_, err := i.Ensure(t.Context(), via(alias.Addr))
	if f, ok := netguard.AsForbidden(err); !ok || f.Class != netguard.Loopback {
		t.Errorf("Ensure through 127.0.0.2: %v, want the guard's loopback refusal", err)
	}
	if n := alias.Seen(t); n != 0 {
		t.Errorf("the API server behind 127.0.0.2 accepted %d connections, want none", n)
	}

	if _, err := i.Ensure(t.Context(), via(allowed.Addr)); err != nil {
		t.Fatalf("Ensure through 127.0.0.1: %v", err)
	}
	if n := allowed.Seen(t); n == 0 {
		t.Error("the API server behind 127.0.0.1 accepted no connection")
	}
}
