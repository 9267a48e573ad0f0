package machinecapabilities_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/machinecapabilities"
	imanager "github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
)

func flavor(name, flavorName string, cpu int32, mem string, gpu *string) *platformv1alpha1.ProviderMachineFlavor {
	return &platformv1alpha1.ProviderMachineFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: platformv1alpha1.ProviderMachineFlavorSpec{
			Available: true, ProviderRef: platformv1alpha1.ProviderRef{Type: "OTC"}, Flavor: flavorName,
			Capabilities:   platformv1alpha1.Capabilities{VCPUCount: cpu, MemorySize: resource.MustParse(mem), GPUModelName: gpu},
			AvailableZones: []string{"eu-de-01"},
		},
	}
}

// TestMatchingFlavorsFollowTheCatalog: a MachineCapabilities' status lists the catalog's
// satisfying flavors, best first, says what is missing when none does, and follows the catalog.
func TestMatchingFlavorsFollowTheCatalog(t *testing.T) {
	h := fleettest.StartExport(t, imanager.PlatformProvider, "platform.edgeconnect.eu", "acme")
	ctx := t.Context()
	admin := h.PlatformAdmin(t)
	h.PublishCatalog(t,
		flavor("otc-s3-xlarge-2", "s3.xlarge.2", 4, "8Gi", nil),
		flavor("otc-s3-2xlarge-2", "s3.2xlarge.2", 8, "16Gi", nil),
		flavor("otc-s3-large-2", "s3.large.2", 2, "4Gi", nil))
	if err := (&machinecapabilities.Reconciler{Workspaces: h.Fleet}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)

	c := h.WS["acme"]
	for _, mc := range []*platformv1alpha1.MachineCapabilities{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "my-capabilities"}, Spec: platformv1alpha1.Capabilities{VCPUCount: 4, MemorySize: resource.MustParse("8Gi")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu"}, Spec: platformv1alpha1.Capabilities{VCPUCount: 4, MemorySize: resource.MustParse("8Gi"), GPUModelName: ptr.To("V100")}},
	} {
		if err := c.Create(ctx, mc); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *platformv1alpha1.MachineCapabilities {
		mc := &platformv1alpha1.MachineCapabilities{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, mc); err != nil {
			t.Fatal(err)
		}
		return mc
	}
	framework.Eventually(t, time.Minute, "matching flavors listed best first", func() (bool, string) {
		mc := get("my-capabilities")
		return strings.Join(mc.Status.MatchingFlavors, ",") == "otc-s3-xlarge-2,otc-s3-2xlarge-2" && reconcile.IsTrue(mc, platformv1alpha1.FlavorMatchedCondition),
			fmt.Sprint(mc.Status.MatchingFlavors, mc.Status.Conditions)
	})
	framework.Eventually(t, time.Minute, "no GPU flavor: the condition says so", func() (bool, string) {
		mc := get("gpu")
		cond := reconcile.GetCondition(mc, platformv1alpha1.FlavorMatchedCondition)
		return cond != nil && cond.Reason == platformv1alpha1.NoMatchingFlavorReason && strings.Contains(cond.Message, "V100"), fmt.Sprint(mc.Status.Conditions)
	})

	// The catalog gains a GPU flavor: the GPU request matches it without being touched.
	if err := admin.Create(ctx, flavor("otc-p2s-2xlarge-8", "p2s.2xlarge.8", 8, "64Gi", ptr.To("V100"))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the GPU request matches the new flavor", func() (bool, string) {
		mc := get("gpu")
		return strings.Join(mc.Status.MatchingFlavors, ",") == "otc-p2s-2xlarge-8", fmt.Sprint(mc.Status.MatchingFlavors, mc.Status.Conditions)
	})
}

// TestMatchingFlavorsOnEveryShard: on a kcp of two shards behind its front proxy, the manager
// serves workspaces on both (it follows each shard's virtual workspace URL in the export's
// endpoint slice): the catalog is copied into a workspace on each shard, and each one's
// MachineCapabilities is matched against its own copy, a change on one shard reconciling nothing
// of the other's.
func TestMatchingFlavorsOnEveryShard(t *testing.T) {
	h := fleettest.StartShardedExport(t, imanager.PlatformProvider, "platform.edgeconnect.eu", 2, "acme", "globex")
	if h.Shard["acme"] == h.Shard["globex"] {
		t.Fatalf("both workspaces on shard %q", h.Shard["acme"])
	}
	ctx := t.Context()
	h.PublishCatalog(t,
		flavor("otc-s3-xlarge-2", "s3.xlarge.2", 4, "8Gi", nil),
		flavor("otc-s3-2xlarge-2", "s3.2xlarge.2", 8, "16Gi", nil))
	if err := (&machinecapabilities.Reconciler{Workspaces: h.Fleet}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)

	caps := map[string]platformv1alpha1.Capabilities{
		"acme":   {VCPUCount: 4, MemorySize: resource.MustParse("8Gi")},
		"globex": {VCPUCount: 8, MemorySize: resource.MustParse("16Gi")},
	}
	want := map[string]string{"acme": "otc-s3-xlarge-2,otc-s3-2xlarge-2", "globex": "otc-s3-2xlarge-2"}
	for ws, c := range caps {
		if err := h.WS[ws].Create(ctx, &platformv1alpha1.MachineCapabilities{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "caps"}, Spec: c}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(ws string) *platformv1alpha1.MachineCapabilities {
		mc := &platformv1alpha1.MachineCapabilities{}
		if err := h.WS[ws].Get(ctx, client.ObjectKey{Namespace: "default", Name: "caps"}, mc); err != nil {
			t.Fatal(err)
		}
		return mc
	}
	for ws := range caps {
		framework.Eventually(t, 2*time.Minute, ws+"'s flavors matched on shard "+h.Shard[ws], func() (bool, string) {
			mc := get(ws)
			return strings.Join(mc.Status.MatchingFlavors, ",") == want[ws], fmt.Sprint(mc.Status.MatchingFlavors, mc.Status.Conditions)
		})
	}

	// A change in acme (shard of its own) is matched there; globex's status is not written again.
	before := get("globex").ResourceVersion
	mc := get("acme")
	mc.Spec = caps["globex"]
	if err := h.WS["acme"].Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "acme's new request matched", func() (bool, string) {
		mc := get("acme")
		return strings.Join(mc.Status.MatchingFlavors, ",") == "otc-s3-2xlarge-2" && mc.Status.ObservedGeneration == mc.Generation, fmt.Sprint(mc.Status.MatchingFlavors)
	})
	if after := get("globex").ResourceVersion; after != before {
		t.Errorf("globex's MachineCapabilities was written (resourceVersion %s -> %s) by a change in acme", before, after)
	}
}
