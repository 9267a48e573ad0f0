package vcluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/test/framework"
)

func TestVClusterValues(t *testing.T) {
	tn := &kov1alpha1.Tenant{Spec: kov1alpha1.TenantSpec{
		TenantName:   "alice-default",
		CloudSpaceID: "7e9d3a1b",
		Quota:        kov1alpha1.TenantQuota{CPU: resource.MustParse("500m"), Memory: resource.MustParse("4Gi")},
	}}
	v := Values(tn, "vc-alice-default", "kcp-0123456789ab-vc-alice-default", "", Options{Environment: "production"})
	withIngress := Values(tn, "vc-alice-default", "kcp-0123456789ab-vc-alice-default", "", Options{Environment: "production", IngressClass: "nginx"})
	withCIDR := Values(tn, "vc-alice-default", "kcp-0123456789ab-vc-alice-default", "", Options{ServiceCIDR: "10.0.0.0/24"})

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
		"egress to every address but exceptions":   {v, []string{"policies", "networkPolicy", "outgoingConnections", "ipBlock", "cidr"}, "0.0.0.0/0"},
		"no egress to vCluster Platform pods":      {v, []string{"policies", "networkPolicy", "outgoingConnections", "platform"}, false},
		"syncer checks Pods against baseline":      {v, []string{"policies", "podSecurityStandard"}, "baseline"},
		"resource quota on":                        {v, []string{"policies", "resourceQuota", "enabled"}, true},
		"limit range on":                           {v, []string{"policies", "limitRange", "enabled"}, true},
		"environment label":                        {v, []string{"controlPlane", "statefulSet", "labels", "kubeopera.io/environment"}, "production"},
		"no telemetry":                             {v, []string{"telemetry", "enabled"}, false},
		"service range left to vCluster":           {v, []string{"serviceCIDR"}, nil},
		"the backend's service range":              {withCIDR, []string{"serviceCIDR"}, "10.0.0.0/24"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := get(tc.values, tc.path...); got != tc.want {
				t.Errorf("%v = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}

// TestVClusterValuesInTheChart renders vCluster's own chart (0.21.0, _tools/charts/vcluster) with
// the manager's values, as
// `helm template` does (a client-only dry-run install, schema checked): the tenant workloads'
// NetworkPolicy excepts link-local addresses besides the chart's own exceptions, the egress to
// vCluster Platform pods is gone, and the syncer's config carries the pod security standard.
func TestVClusterValuesInTheChart(t *testing.T) {
	tn := &kov1alpha1.Tenant{Spec: kov1alpha1.TenantSpec{
		TenantName:   "alice",
		CloudSpaceID: "7e9d3a1b",
		Quota:        kov1alpha1.TenantQuota{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
	}}
	const release, namespace = "vc-alice", "kcp-0123456789ab-vc-alice"
	objs := renderChart(t, release, namespace, Values(tn, release, namespace, "", Options{}))

	work := &networkingv1.NetworkPolicy{}
	decodeRendered(t, objs, "NetworkPolicy", "vc-work-"+release, work)
	var except []string
	var cidr string
	for _, rule := range work.Spec.Egress {
		for _, peer := range rule.To {
			if peer.IPBlock != nil {
				cidr, except = peer.IPBlock.CIDR, peer.IPBlock.Except
			}
		}
	}
	if cidr != "0.0.0.0/0" {
		t.Errorf("vc-work egress ipBlock cidr = %q, want 0.0.0.0/0", cidr)
	}
	for _, want := range []string{"169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} {
		if !slices.Contains(except, want) {
			t.Errorf("vc-work egress except = %v, want it to hold %s", except, want)
		}
	}
	if got := work.Spec.PodSelector.MatchLabels["vcluster.loft.sh/managed-by"]; got != release {
		t.Errorf("vc-work selects managed-by=%q, want the synced workloads of %s", got, release)
	}

	cp := &networkingv1.NetworkPolicy{}
	decodeRendered(t, objs, "NetworkPolicy", "vc-cp-"+release, cp)
	for _, rule := range cp.Spec.Egress {
		for _, peer := range rule.To {
			if peer.PodSelector != nil && peer.PodSelector.MatchLabels["app"] == "loft" {
				t.Errorf("vc-cp lets the control plane reach vCluster Platform pods in any namespace: %+v", peer)
			}
		}
	}

	cfg := &corev1.Secret{}
	decodeRendered(t, objs, "Secret", "vc-config-"+release, cfg)
	var config struct {
		Policies struct {
			PodSecurityStandard string `json:"podSecurityStandard"`
		} `json:"policies"`
	}
	if err := yaml.Unmarshal(cfg.Data["config.yaml"], &config); err != nil {
		t.Fatal(err)
	}
	if config.Policies.PodSecurityStandard != "baseline" {
		t.Errorf("syncer config policies.podSecurityStandard = %q, want baseline", config.Policies.PodSecurityStandard)
	}
}

// renderChart renders vCluster's own chart with values as `helm template` does and returns the
// rendered objects.
func renderChart(t *testing.T, release, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, _ := framework.HelmTemplate(t, framework.VClusterChart(), release, namespace, values)
	return objs
}

// decodeRendered finds the rendered object of kind and name and converts it into out.
func decodeRendered(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("the chart rendered no %s %s", kind, name)
}

// TestExposureValues: each exposure sets the Service type, the control-plane Ingress, the
// certificate's extra SANs and the exported server the delivered kubeconfig names.
func TestExposureValues(t *testing.T) {
	tn := &kov1alpha1.Tenant{Spec: kov1alpha1.TenantSpec{
		TenantName: "alice", CloudSpaceID: "7e9d3a1b",
		Quota: kov1alpha1.TenantQuota{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
	}}
	const release, namespace = "vc-alice", "kcp-0123456789ab-vc-alice"
	ingress := Exposure{Mode: ExposeIngress, Domain: "vc.example.org", IngressClass: "nginx"}
	host := ingress.Host("alice", "0123456789ab")
	if host != "alice-0123456789ab.vc.example.org" {
		t.Fatalf("Host = %q", host)
	}
	none := Values(tn, release, namespace, "", Options{})
	lb := Values(tn, release, namespace, "", Options{Exposure: Exposure{Mode: ExposeLoadBalancer}})
	ing := Values(tn, release, namespace, host, Options{Exposure: ingress, Distro: DistroK8s})

	tests := map[string]struct {
		values map[string]any
		path   string
		want   any
	}{
		"none: in-cluster server":          {none, "exportKubeConfig.server", "https://vc-alice.kcp-0123456789ab-vc-alice:443"},
		"none: chart's Service type":       {none, "controlPlane.service", nil},
		"none: no ingress":                 {none, "controlPlane.ingress", nil},
		"lb: Service of type LoadBalancer": {lb, "controlPlane.service.spec.type", "LoadBalancer"},
		"lb: server written on delivery":   {lb, "exportKubeConfig.server", "https://vc-alice.kcp-0123456789ab-vc-alice:443"},
		"ingress: on":                      {ing, "controlPlane.ingress.enabled", true},
		"ingress: host":                    {ing, "controlPlane.ingress.host", host},
		"ingress: class":                   {ing, "controlPlane.ingress.spec.ingressClassName", "nginx"},
		"ingress: exported server":         {ing, "exportKubeConfig.server", "https://" + host + ":443"},
		"ingress: k8s distro":              {ing, "controlPlane.distro.k8s.enabled", true},
		"ingress: no k3s":                  {ing, "controlPlane.distro.k3s", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, _ := chartValues(tc.values).PathValue(tc.path)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
	sans, _ := chartValues(ing).PathValue("controlPlane.proxy.extraSANs")
	if fmt.Sprint(sans) != "["+host+"]" {
		t.Errorf("controlPlane.proxy.extraSANs = %v, want [%s]", sans, host)
	}
}

func TestExposureValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		e       Exposure
		wantErr string
	}{
		"none":                {Exposure{Mode: ExposeNone}, ""},
		"loadbalancer":        {Exposure{Mode: ExposeLoadBalancer}, ""},
		"ingress":             {Exposure{Mode: ExposeIngress, Domain: "vc.example.org", IngressClass: "nginx"}, ""},
		"unknown mode":        {Exposure{Mode: "nodeport"}, `--vcluster-exposure "nodeport" is not one of`},
		"ingress, no domain":  {Exposure{Mode: ExposeIngress, IngressClass: "nginx"}, "needs --vcluster-domain"},
		"ingress, bad domain": {Exposure{Mode: ExposeIngress, Domain: "Vc_Example", IngressClass: "nginx"}, "is not a DNS name"},
		"ingress, long domain": {Exposure{Mode: ExposeIngress, Domain: strings.Repeat("a.", 110) + "org", IngressClass: "nginx"},
			"is too long"},
		"ingress, no class": {Exposure{Mode: ExposeIngress, Domain: "vc.example.org"}, "is not an ingress class name"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.e.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want it to say %q", err, tc.wantErr)
			}
		})
	}
}

func TestLoadBalancerServer(t *testing.T) {
	svc := func(ing ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ing}}}
	}
	for name, tc := range map[string]struct {
		svc  *corev1.Service
		want string
	}{
		"no address yet": {svc(), ""},
		"ip":             {svc(corev1.LoadBalancerIngress{IP: "203.0.113.7"}), "https://203.0.113.7:443"},
		"ipv6":           {svc(corev1.LoadBalancerIngress{IP: "2001:db8::7"}), "https://[2001:db8::7]:443"},
		"hostname first": {svc(corev1.LoadBalancerIngress{IP: "203.0.113.7", Hostname: "lb.example.org"}), "https://lb.example.org:443"},
	} {
		if got := LoadBalancerServer(tc.svc); got != tc.want {
			t.Errorf("%s: LoadBalancerServer = %q, want %q", name, got, tc.want)
		}
	}
}

// chartValues are values as the chart sees them.
func chartValues(v map[string]any) chartcommon.Values { return chartcommon.Values(v) }

// TestExposureInTheChart renders vCluster's own chart with each exposure (its schema checks the
// values): the Service becomes a LoadBalancer; the ingress exposure renders the control-plane
// Ingress on the tenant's host, of the control planes' class, with ingress-nginx's TLS
// passthrough annotations, and vCluster's config carries the host as an extra SAN and exported
// server.
func TestExposureInTheChart(t *testing.T) {
	tn := &kov1alpha1.Tenant{Spec: kov1alpha1.TenantSpec{
		TenantName: "alice", CloudSpaceID: "7e9d3a1b",
		Quota: kov1alpha1.TenantQuota{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
	}}
	const release, namespace = "vc-alice", "kcp-0123456789ab-vc-alice"

	lb := renderChart(t, release, namespace, Values(tn, release, namespace, "", Options{Exposure: Exposure{Mode: ExposeLoadBalancer}}))
	svc := &corev1.Service{}
	decodeRendered(t, lb, "Service", release, svc)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 {
		t.Errorf("Service = %+v, want type LoadBalancer with port 443", svc.Spec)
	}

	ingress := Exposure{Mode: ExposeIngress, Domain: "vc.example.org", IngressClass: "nginx"}
	host := ingress.Host("alice", "0123456789ab")
	objs := renderChart(t, release, namespace, Values(tn, release, namespace, host, Options{Exposure: ingress, Distro: DistroK8s}))
	ing := &networkingv1.Ingress{}
	decodeRendered(t, objs, "Ingress", release, ing)
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
		t.Errorf("Ingress class = %v, want nginx", ing.Spec.IngressClassName)
	}
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != host || ing.Spec.Rules[0].HTTP == nil ||
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != release || ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name != "https" {
		t.Errorf("Ingress rules = %+v, want %s to the Service's https port", ing.Spec.Rules, host)
	}
	if ing.Annotations["nginx.ingress.kubernetes.io/ssl-passthrough"] != "true" {
		t.Errorf("Ingress annotations = %v, want TLS passthrough", ing.Annotations)
	}
	cfg := &corev1.Secret{}
	decodeRendered(t, objs, "Secret", "vc-config-"+release, cfg)
	var config struct {
		ControlPlane struct {
			Proxy struct {
				ExtraSANs []string `json:"extraSANs"`
			} `json:"proxy"`
			Distro struct {
				K8s struct {
					Enabled bool `json:"enabled"`
				} `json:"k8s"`
			} `json:"distro"`
		} `json:"controlPlane"`
		ExportKubeConfig struct {
			Server string `json:"server"`
		} `json:"exportKubeConfig"`
	}
	if err := yaml.Unmarshal(cfg.Data["config.yaml"], &config); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(config.ControlPlane.Proxy.ExtraSANs, []string{host}) || config.ExportKubeConfig.Server != "https://"+host+":443" || !config.ControlPlane.Distro.K8s.Enabled {
		t.Errorf("vCluster config: extraSANs %v, exported server %q, k8s %v", config.ControlPlane.Proxy.ExtraSANs, config.ExportKubeConfig.Server, config.ControlPlane.Distro.K8s.Enabled)
	}
}
