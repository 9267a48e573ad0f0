package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/test/framework"
)

// TestCloudSpaceIDBelongsToTheFirstWorkspace: a tenant who knows another customer's cloudSpaceID
// cannot make the manager tell kubeopera-api that CloudSpace is active with their own vCluster.
// The first workspace's Tenant claims the ID; a Tenant of another workspace with the same ID fails
// with NameConflict, nothing is installed for it and no callback is made; once the first Tenant is
// gone, a retry claims the freed ID.
func TestCloudSpaceIDBelongsToTheFirstWorkspace(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	const id = "7e9d3a1b-claimed"
	owner, ownerLC, _ := e.tenantWorkspace(t, "claim-owner")
	e.readyTenant(t, owner, ownerLC, seedTenant(t, "default", "alice-default", id))
	callsBefore := len(e.api.CallsFor(id))

	thief, thiefLC, _ := e.tenantWorkspace(t, "claim-thief")
	if err := thief.Create(ctx, seedTenant(t, "default", "mallory", id)); err != nil {
		t.Fatal(err)
	}
	failed := waitPhase(t, thief, "default", "alice-default", kov1alpha1.TenantPhaseFailed)
	c := meta.FindStatusCondition(failed.Status.Conditions, kov1alpha1.AdmittedCondition)
	if c == nil || c.Reason != kov1alpha1.NameConflictReason {
		t.Fatalf("want Admitted reason NameConflict, got %+v", failed.Status.Conditions)
	}
	if strings.Contains(failed.Status.Message, ownerLC) {
		t.Errorf("the message names the other customer's workspace: %q", failed.Status.Message)
	}
	if revs := helmRevisions(t, e.backendC, thiefLC, "vc-mallory"); len(revs) != 0 {
		t.Errorf("a release was installed for the conflicting Tenant: %v", revs)
	}
	framework.Consistently(t, 3*time.Second, "no callback for the conflicting Tenant", func() (bool, string) {
		n := len(e.api.CallsFor(id))
		return n == callsBefore, fmt.Sprintf("%d callbacks, want %d", n, callsBefore)
	})

	// The first Tenant goes; the ID is free and the other workspace's retry claims it.
	tn, err := getTenant(ctx, owner, "default", "alice-default")
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Delete(ctx, tn); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the first Tenant gone", func() (bool, string) {
		_, err := getTenant(ctx, owner, "default", "alice-default")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"kubeopera.io/retry":"claim-freed"}}}`))
	if err := thief.Patch(ctx, failed, patch); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, thief, "default", "alice-default", kov1alpha1.TenantPhaseProvisioning)
}
