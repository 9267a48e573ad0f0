package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
)

// forbiddenByAdmin is a loopback alias the suite's manager denies as an admin's range
// (--target-deny-cidrs); 127.0.0.1/32 is its one exception (--target-allow-cidrs).
const forbiddenByAdmin = "127.0.0.3"

// TestHostClusterForbiddenAddresses plays tenants whose kubeconfigs point the platform at
// addresses it must never dial on their behalf, against the manager binary as the suite runs it
// (--target-allow-cidrs 127.0.0.1/32, --target-deny-cidrs 127.0.0.3/32): the suite's real target
// cluster behind forwarders on the loopback aliases 127.0.0.2 (loopback, denied by default) and
// 127.0.0.3 (the admin's range), and kcp's and the backend's own API servers (read by the
// manager from its kcp kubeconfig, the endpoint slices and the backend). Each HostCluster fails
// at once with ForbiddenAddress naming the class, and nothing connects to the forwarders; the
// same HostCluster pointed at the allowed 127.0.0.1 and retried is reached.
func TestHostClusterForbiddenAddresses(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	target := e.hostTarget(t)
	to := target.Cluster.Config.Host
	alias := framework.Forward(t, "127.0.0.2", to)
	admin := framework.Forward(t, forbiddenByAdmin, to)
	c, _, _ := e.tenantWorkspace(t, "hc-forbidden")

	cases := []struct{ name, server, class string }{
		{"alias", "https://" + alias.Addr, "(loopback)"},
		{"admin-denied", "https://" + admin.Addr, "(a range denied by the platform admin)"},
		{"kcp", e.kcp.Config.Host, "(a kcp shard)"},
		{"backend", e.backend.Config.Host, "(the backend's API server)"},
	}
	for _, tc := range cases {
		e.connect(t, c, e.seedHostCluster(t, tc.name, tc.name+"1", clusterPath, false), framework.KubeconfigWithServer(t, target.Kubeconfig, tc.server, "127.0.0.1"))
	}
	for _, tc := range cases {
		hc := waitHostClusterPhase(t, c, tc.name, kov1alpha1.HostClusterPhaseFailed, 2*time.Minute)
		cond := reconcile.GetCondition(hc, kov1alpha1.AccessValidatedCondition)
		if cond == nil || cond.Reason != kov1alpha1.ForbiddenAddressReason || !strings.Contains(cond.Message, "is at a forbidden address "+tc.class) || !strings.Contains(cond.Message, tc.server) {
			t.Errorf("%s: AccessValidated = %+v, want ForbiddenAddress naming %s and %s", tc.name, cond, tc.server, tc.class)
		}
		if v := hc.Annotations[kov1alpha1.ValidationStartedAnnotation]; v != "" {
			t.Errorf("%s: retried as an unreachable target (%s=%s)", tc.name, kov1alpha1.ValidationStartedAnnotation, v)
		}
	}
	if n := alias.Seen(t); n != 0 {
		t.Errorf("the target behind 127.0.0.2 accepted %d connections, want none", n)
	}
	if n := admin.Seen(t); n != 0 {
		t.Errorf("the target behind %s accepted %d connections, want none", forbiddenByAdmin, n)
	}

	// The tenant points the same HostCluster at the allowed address and retries: reached.
	allowed := framework.Forward(t, "127.0.0.1", to)
	sec := &corev1.Secret{}
	key := client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-alias1-input-kubeconfig"}
	if err := c.Get(ctx, key, sec); err != nil {
		t.Fatal(err)
	}
	sec.Data["kubeconfig"] = framework.KubeconfigWithServer(t, target.Kubeconfig, "https://"+allowed.Addr, "127.0.0.1")
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	hc := getHostCluster(t, c, "alias")
	hc.Annotations = map[string]string{kov1alpha1.RetryAnnotation: "reached"}
	if err := c.Update(ctx, hc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "HostCluster alias validated through 127.0.0.1", func() (bool, string) {
		hc := getHostCluster(t, c, "alias")
		return reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition), describeHC(hc)
	})
	if n := allowed.Seen(t); n == 0 {
		t.Error("the target behind 127.0.0.1 accepted no connection")
	}
	if n := alias.Seen(t); n != 0 {
		t.Errorf("the target behind 127.0.0.2 accepted %d connections, want none", n)
	}
}
