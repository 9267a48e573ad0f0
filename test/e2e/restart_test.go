package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// The tests of this file stop and restart the suite's one manager, where the order is the point.
// They do not call t.Parallel: Go runs them, one at a time, before it releases the parallel
// tests, so no other test runs while the manager is down. Each leaves a manager running, also
// when it fails.

func TestManagerRestartMidProvisioningResumesWithoutASecondRelease(t *testing.T) {
	e := sharedEnv(t)
	t.Cleanup(func() { e.ensureManagerRunning(t) })
	ctx := context.Background()
	acme, acmeLC, _ := e.tenantWorkspace(t, "restart")
	globex, globexLC, _ := e.tenantWorkspace(t, "restart-other")
	acmeNS, globexNS := workspaces.VClusterNamespace(acmeLC, "alice-default"), workspaces.VClusterNamespace(globexLC, "alice-default")
	clients := map[string]client.Client{acmeNS: acme, globexNS: globex}
	lcs := map[string]string{acmeNS: acmeLC, globexNS: globexLC}
	if err := acme.Create(ctx, seedTenant(t, "default", "alice-default", "7e9d3a1b-restart")); err != nil {
		t.Fatal(err)
	}
	if err := globex.Create(ctx, seedTenant(t, "default", "alice-default", "7e9d3a1b-restart-other")); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{acmeNS, globexNS} {
		waitReleaseDeployed(t, clients[ns], "default", "alice-default")
		framework.Eventually(t, time.Minute, "Helm release vc-alice-default in "+ns, func() (bool, string) {
			revs := helmRevisions(t, e.backendC, lcs[ns], "vc-alice-default")
			return len(revs) == 1, fmt.Sprint(revs)
		})
	}

	e.stopManager()
	if err := e.startManager(); err != nil {
		t.Fatal(err)
	}
	// The new manager engages the workspaces and polls the Provisioning Tenants many times
	// meanwhile (the requeue interval is 1s): it must not install a second time.
	framework.Consistently(t, 8*time.Second, "one release revision in each host namespace after the restart", func() (bool, string) {
		for _, ns := range []string{acmeNS, globexNS} {
			if revs := helmRevisions(t, e.backendC, lcs[ns], "vc-alice-default"); len(revs) != 1 || revs[0] != "1" {
				return false, fmt.Sprintf("release revisions in %s after restart: %v, want [1]", ns, revs)
			}
		}
		return true, ""
	})
	// Now the vClusters come up, and the restarted manager finishes the Tenants.
	for _, ns := range []string{acmeNS, globexNS} {
		vclusterUp(t, e, ns, "vc-alice-default")
	}
	for _, ns := range []string{acmeNS, globexNS} {
		waitPhase(t, clients[ns], "default", "alice-default", kov1alpha1.TenantPhaseReady)
		if revs := helmRevisions(t, e.backendC, lcs[ns], "vc-alice-default"); len(revs) != 1 {
			t.Fatalf("release revisions in %s: %v, want one", ns, revs)
		}
	}
}

func TestWorkspaceDeletedWhileTheManagerIsDownIsCleanedWhenItComesBack(t *testing.T) {
	e := sharedEnv(t)
	t.Cleanup(func() { e.ensureManagerRunning(t) })
	ctx := context.Background()
	initech, initechLC, initechName := e.tenantWorkspace(t, "initech")
	hostNS := workspaces.VClusterNamespace(initechLC, "peter")
	e.readyTenant(t, initech, initechLC, seedTenant(t, "default", "peter", "1n17ech"))

	e.stopManager()
	if err := workspaces.DeleteWorkspace(ctx, e.kcp.Config, "root:orgs", initechName); err != nil {
		t.Fatal(err)
	}
	// Nothing may happen to the backend while nobody is there to run the finalizers.
	framework.Consistently(t, 3*time.Second, "the release untouched while the manager is down", func() (bool, string) {
		revs := helmRevisions(t, e.backendC, initechLC, "vc-peter")
		return len(revs) == 1, fmt.Sprintf("the release changed while the manager was down: %v", revs)
	})
	if err := e.startManager(); err != nil {
		t.Fatal(err)
	}
	orgs := e.workspaceClient(t, "root:orgs")
	framework.Eventually(t, 3*time.Minute, "workspace "+initechName+" gone", func() (bool, string) {
		ws := &tenancyWorkspace{}
		err := orgs.Get(ctx, client.ObjectKey{Name: initechName}, ws)
		return apierrors.IsNotFound(err), fmt.Sprintf("err=%v phase=%s", err, ws.Status.Phase)
	})
	list := &corev1.NamespaceList{}
	if err := e.backendC.List(ctx, list, client.MatchingLabels{workspaces.FingerprintLabel: workspaces.Fingerprint(initechLC)}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d backend namespaces of the deleted workspace remain", len(list.Items))
	}
	// The namespaces could also have gone without the finalizer; internal/helm's log of the
	// uninstall (the manager logs at debug level here) tells that the Tenant's finalizer ran.
	uninstalled := false
	for _, line := range strings.Split(e.managerLogs(), "\n") {
		uninstalled = uninstalled || (strings.Contains(line, `"msg":"Uninstalling release"`) && strings.Contains(line, `"release":"vc-peter"`) && strings.Contains(line, hostNS))
	}
	if !uninstalled {
		t.Error("the Tenant's finalizer did not run (no uninstall of vc-peter logged)")
	}
}
