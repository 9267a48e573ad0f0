package flux_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/test/framework"
)

// render renders the project's chart (charts/flux2, without the CRDs build-tools adds) as a
// release flux2 in flux-system with values, and returns its objects by "Kind/name".
func render(t *testing.T, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	ch, err := loader.Load(filepath.Join(framework.RepoRoot(), "charts", "flux2"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, common.ReleaseOptions{Name: "flux2", Namespace: "flux-system", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("chart does not render: %v", err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for name, content := range files {
		if strings.HasSuffix(name, ".tpl") || strings.TrimSpace(content) == "" {
			continue
		}
		decoded, err := manifests.Decode([]byte(content))
		if err != nil {
			t.Fatalf("%s is not YAML: %v\n%s", name, err, content)
		}
		for _, o := range decoded {
			objs[o.GetKind()+"/"+o.GetName()] = o
		}
	}
	return objs
}

func keys(m map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// containerArgs returns the args of a Deployment's manager container.
func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s has %d containers, want 1", d.GetName(), len(cs))
	}
	c := cs[0].(map[string]any)
	if c["name"] != "manager" {
		t.Errorf("%s container is %v, want manager", d.GetName(), c["name"])
	}
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	return args
}

// TestLocalChartShape: the local chart renders the community chart's objects for the controllers
// it installs, with its names, labels and values keys; helm-controller is on by default (it is
// built here: hack/tools/helm-controller), notification-controller off, and their .create keys
// work.
func TestLocalChartShape(t *testing.T) {
	objs := render(t, nil)
	want := []string{
		"ClusterRole/crd-controller", "ClusterRoleBinding/cluster-reconciler", "ClusterRoleBinding/crd-controller",
		"Deployment/helm-controller", "Deployment/kustomize-controller", "Deployment/source-controller",
		"Service/source-controller", "ServiceAccount/helm-controller", "ServiceAccount/kustomize-controller", "ServiceAccount/source-controller",
	}
	if got := keys(objs); !slices.Equal(got, want) {
		t.Fatalf("objects = %v, want %v", got, want)
	}
	for _, name := range []string{"source-controller", "kustomize-controller", "helm-controller"} {
		d := objs["Deployment/"+name]
		labels := d.GetLabels()
		for k, v := range map[string]string{
			"app.kubernetes.io/component": name, "app.kubernetes.io/instance": "flux-system",
			"app.kubernetes.io/part-of": "flux", "app.kubernetes.io/managed-by": "Helm",
			"app.kubernetes.io/version": "1.9.6", "control-plane": "controller", "helm.sh/chart": "flux2-0.1.0",
		} {
			if labels[k] != v {
				t.Errorf("%s label %s = %q, want %q", name, k, labels[k], v)
			}
		}
		sel, _, _ := unstructured.NestedString(d.Object, "spec", "selector", "matchLabels", "app")
		podApp, _, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "labels", "app")
		if sel != name || podApp != name {
			t.Errorf("%s selects app=%q, pod label app=%q; want %q", name, sel, podApp, name)
		}
		sa, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "serviceAccountName")
		if sa != name {
			t.Errorf("%s runs as ServiceAccount %q", name, sa)
		}
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		tag := map[string]string{"helm-controller": "v1.4.3"}[name] // the versions hack/tools builds
		if tag == "" {
			tag = "v1.9.6"
		}
		if img := cs[0].(map[string]any)["image"]; img != "ghcr.io/fluxcd/"+name+":"+tag {
			t.Errorf("%s image = %v", name, img)
		}
		args := containerArgs(t, d)
		for _, a := range []string{"--watch-all-namespaces=true", "--log-level=info", "--log-encoding=json", "--enable-leader-election"} {
			if !slices.Contains(args, a) {
				t.Errorf("%s args %v lack %s", name, args, a)
			}
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--events-addr") }) {
			t.Errorf("%s sends events without notification-controller: %v", name, args)
		}
	}
	if args := containerArgs(t, objs["Deployment/source-controller"]); !slices.Contains(args, "--storage-adv-addr=source-controller.$(RUNTIME_NAMESPACE).svc.cluster.local.") ||
		!slices.Contains(args, "--storage-path=/data") {
		t.Errorf("source-controller args = %v", args)
	}
	svc := objs["Service/source-controller"]
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if p := ports[0].(map[string]any); len(ports) != 1 || fmt.Sprint(p["port"]) != "80" || p["targetPort"] != "http" {
		t.Errorf("Service source-controller ports = %v, want 80 -> http", ports)
	}
	subjects, _, _ := unstructured.NestedSlice(objs["ClusterRoleBinding/cluster-reconciler"].Object, "subjects")
	if len(subjects) != 2 || subjects[0].(map[string]any)["name"] != "kustomize-controller" || subjects[0].(map[string]any)["namespace"] != "flux-system" {
		t.Errorf("cluster-reconciler subjects = %v", subjects)
	}

	if objs := render(t, map[string]any{"helmController": map[string]any{"create": false}}); objs["Deployment/helm-controller"] != nil || objs["ServiceAccount/helm-controller"] != nil {
		t.Errorf("helm-controller rendered with helmController.create=false")
	}

	// The other controllers' keys.
	objs = render(t, map[string]any{
		"helmController":         map[string]any{"create": true},
		"notificationController": map[string]any{"create": true},
		"kustomizeController":    map[string]any{"create": false},
		"multitenancy":           map[string]any{"enabled": true, "privileged": false},
	})
	for _, k := range []string{"Deployment/helm-controller", "Deployment/notification-controller", "ServiceAccount/helm-controller",
		"Service/notification-controller", "Service/webhook-receiver"} {
		if objs[k] == nil {
			t.Errorf("with helmController and notificationController created, %s is missing (have %v)", k, keys(objs))
		}
	}
	for _, k := range []string{"Deployment/kustomize-controller", "ClusterRoleBinding/cluster-reconciler"} {
		if objs[k] != nil {
			t.Errorf("%s rendered with kustomizeController.create=false and unprivileged multitenancy", k)
		}
	}
	if args := containerArgs(t, objs["Deployment/source-controller"]); !slices.Contains(args, "--events-addr=http://notification-controller.$(RUNTIME_NAMESPACE).svc.cluster.local.") {
		t.Errorf("source-controller does not send events to notification-controller: %v", args)
	}
	if args := containerArgs(t, objs["Deployment/notification-controller"]); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--events-addr") }) {
		t.Errorf("notification-controller sends events to itself: %v", args)
	}
	if args := containerArgs(t, objs["Deployment/helm-controller"]); !slices.Contains(args, "--no-cross-namespace-refs=true") {
		t.Errorf("helm-controller ignores multitenancy: %v", args)
	}
}
