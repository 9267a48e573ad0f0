package tenant

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

func TestVClusterValues(t *testing.T) {
	tn := &kov1alpha1.Tenant{Spec: kov1alpha1.TenantSpec{
		TenantName:   "alice-default",
		CloudSpaceID: "7e9d3a1b",
		Quota:        kov1alpha1.TenantQuota{CPU: resource.MustParse("500m"), Memory: resource.MustParse("4Gi")},
	}}
	v := vclusterValues(tn, "vc-alice-default", "kcp-0123456789ab-vc-alice-default", "production", "")
	withIngress := vclusterValues(tn, "vc-alice-default", "kcp-0123456789ab-vc-alice-default", "production", "nginx")

	get := func(v map[string]any, path ...string) any {
		var cur any = v
		for _, p := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %q", path, p)
			}
			cur = m[p]
		}
		return cur
	}
	tests := map[string]struct {
		values map[string]any
		path   []string
		want   any
	}{
		"k3s distro":                               {v, []string{"controlPlane", "distro", "k3s", "enabled"}, true},
		"cpu request is the quota":                 {v, []string{"controlPlane", "statefulSet", "resources", "requests", "cpu"}, "500m"},
		"cpu limit is the quota":                   {v, []string{"controlPlane", "statefulSet", "resources", "limits", "cpu"}, "500m"},
		"memory limit is the quota":                {v, []string{"controlPlane", "statefulSet", "resources", "limits", "memory"}, "4Gi"},
		"ingresses not synced by default":          {v, []string{"sync", "toHost", "ingresses", "enabled"}, false},
		"ingresses synced when a class is allowed": {withIngress, []string{"sync", "toHost", "ingresses", "enabled"}, true},
		"no cluster-wide sync when allowed":        {withIngress, []string{"sync", "fromHost"}, nil},
		"service accounts synced":                  {v, []string{"sync", "toHost", "serviceAccounts", "enabled"}, true},
		"in-cluster server":                        {v, []string{"exportKubeConfig", "server"}, "https://vc-alice-default.kcp-0123456789ab-vc-alice-default:443"},
		"network policy on":                        {v, []string{"policies", "networkPolicy", "enabled"}, true},
		"resource quota on":                        {v, []string{"policies", "resourceQuota", "enabled"}, true},
		"limit range on":                           {v, []string{"policies", "limitRange", "enabled"}, true},
		"environment label":                        {v, []string{"controlPlane", "statefulSet", "labels", "kubeopera.io/environment"}, "production"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := get(tc.values, tc.path...); got != tc.want {
				t.Errorf("%v = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}
