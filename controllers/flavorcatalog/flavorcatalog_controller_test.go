package flavorcatalog_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	imanager "github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
	"github.com/kubeopera/kubeopera/workspaces"
)

func flavor(name, flavorName string, cpu int32, mem string, available bool) *platformv1alpha1.ProviderMachineFlavor {
	return &platformv1alpha1.ProviderMachineFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: platformv1alpha1.ProviderMachineFlavorSpec{
			Available:      available,
			ProviderRef:    platformv1alpha1.ProviderRef{Type: "OTC"},
			Flavor:         flavorName,
			Capabilities:   platformv1alpha1.Capabilities{VCPUCount: cpu, MemorySize: resource.MustParse(mem)},
			AvailableZones: []string{"eu-de-01", "eu-de-02"},
		},
	}
}

// TestCatalogIsPublishedReadOnly runs the catalog controller as the manager does, on a real kcp:
// the platform admin keeps the catalog in root:kubeopera; every bound workspace gets a copy,
// follows its changes, and nobody in a tenant workspace can create or change a flavor.
func TestCatalogIsPublishedReadOnly(t *testing.T) {
	h := fleettest.StartExport(t, imanager.PlatformProvider, "platform.edgeconnect.eu", "acme", "globex")
	ctx := t.Context()
	admin := h.PlatformAdmin(t)
	// The platform admin's catalog, in the platform workspace (the CRD is bootstrap's).
	h.PublishCatalog(t,
		flavor("otc-s3-xlarge-4", "s3.xlarge.4", 4, "16Gi", true),
		flavor("otc-c4-2xlarge-2", "c4.2xlarge.2", 8, "16Gi", true))
	h.Run(t)

	names := func(c client.Client) (string, error) {
		list := &platformv1alpha1.ProviderMachineFlavorList{}
		if err := c.List(ctx, list); err != nil {
			return "", err
		}
		var out []string
		for _, f := range list.Items {
			out = append(out, fmt.Sprintf("%s:%s:%v", f.Name, f.Spec.Flavor, f.Spec.Available))
		}
		return strings.Join(out, ","), nil
	}
	want := "otc-c4-2xlarge-2:c4.2xlarge.2:true,otc-s3-xlarge-4:s3.xlarge.4:true"
	for _, ws := range []string{"acme", "globex"} {
		framework.Eventually(t, time.Minute, "the catalog in "+ws, func() (bool, string) {
			got, err := names(h.WS[ws])
			return err == nil && got == want, fmt.Sprintf("%s %v", got, err)
		})
	}

	t.Run("changes and removals follow the catalog", func(t *testing.T) {
		f := &platformv1alpha1.ProviderMachineFlavor{}
		if err := admin.Get(ctx, client.ObjectKey{Name: "otc-s3-xlarge-4"}, f); err != nil {
			t.Fatal(err)
		}
		f.Spec.Available = false
		if err := admin.Update(ctx, f); err != nil {
			t.Fatal(err)
		}
		if err := admin.Delete(ctx, &platformv1alpha1.ProviderMachineFlavor{ObjectMeta: metav1.ObjectMeta{Name: "otc-c4-2xlarge-2"}}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "acme follows the catalog", func() (bool, string) {
			got, err := names(h.WS["acme"])
			return err == nil && got == "otc-s3-xlarge-4:s3.xlarge.4:false", fmt.Sprintf("%s %v", got, err)
		})
	})

	t.Run("nobody in a tenant workspace can create, change or delete a flavor", func(t *testing.T) {
		c := h.WS["globex"] // even the workspace's admin
		err := c.Create(ctx, flavor("mine", "s3.huge.1", 64, "512Gi", true))
		if !apierrors.IsForbidden(err) {
			t.Errorf("creating a flavor in a tenant workspace: %v, want Forbidden", err)
		}
		f := &platformv1alpha1.ProviderMachineFlavor{}
		if err := c.Get(ctx, client.ObjectKey{Name: "otc-s3-xlarge-4"}, f); err != nil {
			t.Fatal(err)
		}
		f.Spec.Capabilities.VCPUCount = 128
		if err := c.Update(ctx, f); !apierrors.IsForbidden(err) {
			t.Errorf("changing a flavor in a tenant workspace: %v, want Forbidden", err)
		}
		if err := c.Delete(ctx, f); !apierrors.IsForbidden(err) {
			t.Errorf("deleting a flavor in a tenant workspace: %v, want Forbidden", err)
		}
	})

	t.Run("a workspace bound later gets the whole catalog", func(t *testing.T) {
		name := fmt.Sprintf("initech-%d", time.Now().UnixNano()%100000)
		if _, err := workspaces.EnsureWorkspace(ctx, h.KCP.Config, "root:orgs", name, workspaces.TenantWorkspaceTypeIn(bootstrap.PlatformWorkspace)); err != nil {
			t.Fatal(err)
		}
		c, err := client.New(workspaces.ClusterConfig(h.KCP.Config, "root:orgs:"+name), client.Options{Scheme: imanager.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "the catalog in the new workspace", func() (bool, string) {
			got, err := names(c)
			return err == nil && got == "otc-s3-xlarge-4:s3.xlarge.4:false", fmt.Sprintf("%s %v", got, err)
		})
	})
}
