package tree

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func params() Params {
	return Params{Path: "fluxcd/clusters/my-cluster", Slug: "my-cluster", Domain: "my-cluster.acme.com", Region: "eu-north-1", ClusterID: "7e9d3a1b"}
}

func names(f Files) []string {
	var out []string
	for n := range f {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestFirstPassIsTheInfrastructureLayerOnly(t *testing.T) {
	tpl, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	files, err := tpl.Render(params(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names(files) {
		if strings.Contains(n, "/apps") {
			t.Errorf("the first pass wrote %s", n)
		}
	}
	for _, want := range []string{"cert-manager", "ingress-nginx", "storage", "monitoring", "security", "sealed-secrets", "sources"} {
		if _, ok := files["fluxcd/clusters/my-cluster/infrastructure/"+want+".yaml"]; !ok {
			t.Errorf("no %s in %v", want, names(files))
		}
	}
	var root map[string]any
	if err := yaml.Unmarshal(files["fluxcd/clusters/my-cluster/kustomization.yaml"], &root); err != nil {
		t.Fatal(err)
	}
	if got := root["resources"]; len(got.([]any)) != 1 || got.([]any)[0] != "infrastructure.yaml" {
		t.Errorf("root resources = %v, want [infrastructure.yaml]", got)
	}
	var storage map[string]any
	if err := yaml.Unmarshal(files["fluxcd/clusters/my-cluster/infrastructure/storage.yaml"], &storage); err != nil {
		t.Fatal(err)
	}
	region := storage["spec"].(map[string]any)["values"].(map[string]any)["controller"].(map[string]any)["region"]
	if region != "eu-north-1" {
		t.Errorf("the storage driver's region = %v", region)
	}
}

func TestSecondPassAddsTheAppsLayerWithTheSealedSecrets(t *testing.T) {
	tpl, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	sealed := []Sealed{{Name: "postgres-credentials", YAML: []byte("kind: SealedSecret\n")}}
	files, err := tpl.Render(params(), sealed)
	if err != nil {
		t.Fatal(err)
	}
	if string(files["fluxcd/clusters/my-cluster/apps/sealed/postgres-credentials.yaml"]) != "kind: SealedSecret\n" {
		t.Errorf("the sealed secret is not written as given: %v", names(files))
	}
	var apps map[string]any
	if err := yaml.Unmarshal(files["fluxcd/clusters/my-cluster/apps.yaml"], &apps); err != nil {
		t.Fatal(err)
	}
	spec := apps["spec"].(map[string]any)
	if spec["path"] != "./fluxcd/clusters/my-cluster/apps" || spec["dependsOn"].([]any)[0].(map[string]any)["name"] != "infrastructure" {
		t.Errorf("apps Kustomization spec = %v", spec)
	}
	var kz map[string]any
	if err := yaml.Unmarshal(files["fluxcd/clusters/my-cluster/apps/kustomization.yaml"], &kz); err != nil {
		t.Fatal(err)
	}
	res := kz["resources"].([]any)
	if res[len(res)-1] != "sealed/postgres-credentials.yaml" {
		t.Errorf("apps resources = %v", res)
	}
}

// A value is filled into decoded strings and encoded again: whatever it holds, it stays one
// string scalar, and the document keeps its structure.
func TestValuesNeverChangeTheStructure(t *testing.T) {
	tpl, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	p := params()
	p.Region = "x\"\n  injected: true\n- a: 'b'\n---\nkind: Secret"
	files, err := tpl.Render(p, []Sealed{})
	if err != nil {
		t.Fatal(err)
	}
	var cm map[string]any
	if err := yaml.Unmarshal(files["fluxcd/clusters/my-cluster/apps/platform.yaml"], &cm); err != nil {
		t.Fatal(err)
	}
	data := cm["data"].(map[string]any)
	if data["region"] != p.Region || len(data) != 3 || cm["injected"] != nil {
		t.Errorf("data = %v", data)
	}
	if strings.Count(string(files["fluxcd/clusters/my-cluster/apps/platform.yaml"]), "\n---\n") != 0 {
		t.Error("a value started a new document")
	}
}

func TestChartMirrorReplacesEveryRepository(t *testing.T) {
	tpl, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	p := params()
	p.ChartMirror = "http://127.0.0.1:8099/charts"
	files, err := tpl.Render(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := string(files["fluxcd/clusters/my-cluster/infrastructure/sources.yaml"])
	if strings.Count(src, "url: http://127.0.0.1:8099/charts") != 6 || strings.Contains(src, "https://") {
		t.Errorf("sources = %s", src)
	}
}

func TestAdminTemplates(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("infrastructure.only.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: only\n  namespace: flux-system\ndata:\n  host: www.${domain}\n")
	write("apps.ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${slug}\n")
	write("README.md", "not a template")
	tpl, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := tpl.Render(params(), []Sealed{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(files["fluxcd/clusters/my-cluster/infrastructure/only.yaml"]), "host: www.my-cluster.acme.com") {
		t.Errorf("files = %v", names(files))
	}
	if !strings.Contains(string(files["fluxcd/clusters/my-cluster/apps/ns.yaml"]), "name: my-cluster") {
		t.Errorf("files = %v", names(files))
	}
	if _, ok := files["fluxcd/clusters/my-cluster/infrastructure/cert-manager.yaml"]; ok {
		t.Error("the built-in templates were used besides the admin's")
	}

	write("apps.typo.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: ${domian}\n")
	tpl, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Render(params(), []Sealed{}); err == nil || !strings.Contains(err.Error(), "${domian}") || !strings.Contains(err.Error(), "apps.typo.yaml") {
		t.Errorf("an unknown variable: err = %v", err)
	}
	write("apps.typo.yaml", "just: text\n")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "apps.typo.yaml") {
		t.Errorf("a template that is not an object: err = %v", err)
	}
	empty := t.TempDir()
	if _, err := Load(empty); err == nil {
		t.Error("no templates at all were accepted")
	}
}
