package render

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// modulesDir is the repository's terraform/modules, which the runner ships as modules/.
var modulesDir = filepath.Join("..", "..", "..", "terraform", "modules")

var moduleNames = []string{"vpc", "security", "compute", "eks"}

// tfModule is what a module declares.
type tfModule struct {
	dir       string
	bodies    []*hclsyntax.Body
	variables map[string]tfVariable
	outputs   map[string]bool
}

type tfVariable struct {
	required bool
	typ      cty.Type
}

func loadModule(t *testing.T, dir string) *tfModule {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no .tf files in %s (%v)", dir, err)
	}
	m := &tfModule{dir: dir, variables: map[string]tfVariable{}, outputs: map[string]bool{}}
	p := hclparse.NewParser()
	for _, path := range paths {
		f, diags := p.ParseHCLFile(path)
		if diags.HasErrors() {
			t.Fatalf("parse %s: %v", path, diags)
		}
		body := f.Body.(*hclsyntax.Body)
		m.bodies = append(m.bodies, body)
		for _, block := range body.Blocks {
			switch block.Type {
			case "variable":
				v := tfVariable{typ: cty.DynamicPseudoType}
				_, hasDefault := block.Body.Attributes["default"]
				v.required = !hasDefault
				if attr, ok := block.Body.Attributes["type"]; ok {
					typ, diags := typeexpr.TypeConstraint(attr.Expr)
					if diags.HasErrors() {
						t.Errorf("%s: variable %s: bad type: %v", attr.SrcRange, block.Labels[0], diags)
					}
					v.typ = typ
				}
				m.variables[block.Labels[0]] = v
			case "output":
				m.outputs[block.Labels[0]] = true
			}
		}
	}
	return m
}

func TestModulesLayout(t *testing.T) {
	for _, name := range moduleNames {
		for _, file := range []string{"main.tf", "variables.tf", "outputs.tf", "versions.tf"} {
			if _, err := os.Stat(filepath.Join(modulesDir, name, file)); err != nil {
				t.Errorf("module %s: %v", name, err)
			}
		}
	}
}

// TestModulesParse parses every .tf file under terraform/modules.
func TestModulesParse(t *testing.T) {
	n := 0
	err := filepath.WalkDir(modulesDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".tf") {
			return err
		}
		n++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, diags := hclparse.NewParser().ParseHCL(src, path); diags.HasErrors() {
			t.Errorf("%v", diags)
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("walk %s: %d files, %v", modulesDir, n, err)
	}
}

// TestModulesReferences: inside each module every var., local., data. and resource reference is
// declared, and every variable has a description and a type.
func TestModulesReferences(t *testing.T) {
	for _, name := range moduleNames {
		m := loadModule(t, filepath.Join(modulesDir, name))
		decl, errs := declarations(m.bodies)
		for _, err := range errs {
			t.Errorf("module %s: %v", name, err)
		}
		for _, body := range m.bodies {
			for _, r := range references(body) {
				if err := decl.resolve(r); err != nil {
					t.Errorf("module %s: %v", name, err)
				}
			}
			for _, block := range body.Blocks {
				if block.Type != "variable" && block.Type != "output" {
					continue
				}
				if _, ok := block.Body.Attributes["description"]; !ok {
					t.Errorf("%s: %s %s has no description", block.TypeRange, block.Type, block.Labels[0])
				}
				if _, ok := block.Body.Attributes["type"]; !ok && block.Type == "variable" {
					t.Errorf("%s: variable %s has no type", block.TypeRange, block.Labels[0])
				}
			}
		}
	}
}

// TestModuleCallsTypeCheck is the offline stand-in for terraform validate's module checks: every
// module call of every golden case passes exactly the variables the module declares (the
// required ones, nothing unknown), literal arguments convert to the variable's type, and every
// module.X.Y names an output X declares.
func TestModuleCallsTypeCheck(t *testing.T) {
	modules := map[string]*tfModule{}
	for _, name := range moduleNames {
		modules[name] = loadModule(t, filepath.Join(modulesDir, name))
	}
	meta := map[string]bool{"source": true, "version": true, "count": true, "for_each": true, "depends_on": true, "providers": true}
	for caseName, files := range renderGolden(t) {
		p := hclparse.NewParser()
		for fileName, content := range files {
			f, diags := p.ParseHCL([]byte(content), caseName+"/"+fileName)
			if diags.HasErrors() {
				t.Fatalf("%v", diags)
			}
			body := f.Body.(*hclsyntax.Body)
			for _, block := range body.Blocks {
				if block.Type != "module" {
					continue
				}
				src, _ := block.Body.Attributes["source"].Expr.Value(nil)
				mod := modules[strings.TrimPrefix(src.AsString(), "./"+ModulesDir+"/")]
				if mod == nil {
					t.Errorf("%s: module %s: source %s is not one of %v", block.TypeRange, block.Labels[0], src.AsString(), moduleNames)
					continue
				}
				for _, name := range sortedKeys(block.Body.Attributes) {
					attr := block.Body.Attributes[name]
					if meta[name] {
						continue
					}
					v, ok := mod.variables[name]
					if !ok {
						t.Errorf("%s: module %s has no variable %q", attr.NameRange, block.Labels[0], name)
						continue
					}
					if val, diags := attr.Expr.Value(nil); !diags.HasErrors() {
						if _, err := convert.Convert(val, v.typ); err != nil {
							t.Errorf("%s: %s = %s does not convert to %s: %v", attr.NameRange, name, val.GoString(), v.typ.FriendlyName(), err)
						}
					}
				}
				for _, name := range sortedKeys(mod.variables) {
					if _, ok := block.Body.Attributes[name]; mod.variables[name].required && !ok {
						t.Errorf("%s: module %s: required variable %q not passed", block.TypeRange, block.Labels[0], name)
					}
				}
			}
			for _, r := range references(body) {
				if r.RootName() != "module" || len(r) < 3 {
					continue
				}
				modName := r[1].(hcl.TraverseAttr).Name
				out, ok := r[2].(hcl.TraverseAttr)
				if !ok {
					t.Errorf("%s: module.%s used without naming an output", r.SourceRange(), modName)
					continue
				}
				// The call's source names the module directory; the golden cases call each
				// module under its own name.
				if mod := modules[modName]; mod == nil || !mod.outputs[out.Name] {
					t.Errorf("%s: module %s declares no output %q", r.SourceRange(), modName, out.Name)
				}
			}
		}
	}
}

// TestModuleCallsTypeCheckCatches makes sure the check above is not vacuous.
func TestModuleCallsTypeCheckCatches(t *testing.T) {
	compute := loadModule(t, filepath.Join(modulesDir, "compute"))
	if _, ok := compute.variables["control_plane_endpoint_override"]; !ok {
		t.Fatal("compute declares no control_plane_endpoint_override")
	}
	if v := compute.variables["ssm_parameter_prefix"]; !v.required || !v.typ.Equals(cty.String) {
		t.Errorf("compute's ssm_parameter_prefix = %+v, want a required string", v)
	}
	if _, err := convert.Convert(cty.StringVal("three"), compute.variables["control_plane_count"].typ); err == nil {
		t.Error(`"three" converts to control_plane_count's type`)
	}
	if !loadModule(t, filepath.Join(modulesDir, "eks")).outputs["cluster_ca_certificate"] {
		t.Error("eks declares no cluster_ca_certificate output")
	}
}

// templateCall is a templatefile() call in a module: the template files its path can name and
// the variables it passes.
type templateCall struct {
	rng   hcl.Range
	paths []string
	vars  map[string]bool
}

func templateCalls(t *testing.T, m *tfModule) []templateCall {
	t.Helper()
	var calls []templateCall
	for _, body := range m.bodies {
		hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			call, ok := n.(*hclsyntax.FunctionCallExpr)
			if !ok || call.Name != "templatefile" {
				return nil
			}
			if len(call.Args) != 2 {
				t.Errorf("%s: templatefile takes 2 arguments", call.Range())
				return nil
			}
			paths, err := m.candidates(call.Args[0])
			if err != nil {
				t.Errorf("%s: templatefile path: %v", call.Range(), err)
				return nil
			}
			for _, path := range paths {
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: templatefile path names no file: %v", call.Range(), err)
				}
			}
			obj, ok := call.Args[1].(*hclsyntax.ObjectConsExpr)
			if !ok {
				t.Errorf("%s: templatefile variables are not an object constructor", call.Range())
				return nil
			}
			vars := map[string]bool{}
			for _, item := range obj.Items {
				vars[hcl.ExprAsKeyword(item.KeyExpr)] = true
			}
			calls = append(calls, templateCall{rng: call.Range(), paths: paths, vars: vars})
			return nil
		})
	}
	return calls
}

// TestModuleTemplates: every templatefile() call passes every variable its template(s) use, and
// every .tftpl file is used.
func TestModuleTemplates(t *testing.T) {
	for _, name := range moduleNames {
		m := loadModule(t, filepath.Join(modulesDir, name))
		used := map[string]bool{}
		for _, call := range templateCalls(t, m) {
			for _, path := range call.paths {
				used[path] = true
				tmpl := parseTemplate(t, path)
				for _, v := range tmpl.Variables() {
					if !call.vars[v.RootName()] {
						t.Errorf("%s: %s uses %q, which the templatefile call at %s does not pass", v.SourceRange(), path, v.RootName(), call.rng)
					}
				}
			}
		}
		all, _ := filepath.Glob(filepath.Join(m.dir, "templates", "*.tftpl"))
		for _, path := range all {
			if !used[path] {
				t.Errorf("%s: no templatefile call uses it", path)
			}
		}
	}
}

// candidates are the strings expr can evaluate to, for path expressions made of literals,
// path.module, and locals that are literals or conditionals between literals.
func (m *tfModule) candidates(expr hclsyntax.Expression) ([]string, error) {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
		if e.Val.Type() == cty.String {
			return []string{e.Val.AsString()}, nil
		}
	case *hclsyntax.TemplateWrapExpr:
		return m.candidates(e.Wrapped)
	case *hclsyntax.ConditionalExpr:
		a, err := m.candidates(e.TrueResult)
		if err != nil {
			return nil, err
		}
		b, err := m.candidates(e.FalseResult)
		return append(a, b...), err
	case *hclsyntax.TemplateExpr:
		out := []string{""}
		for _, part := range e.Parts {
			alts, err := m.candidates(part)
			if err != nil {
				return nil, err
			}
			var next []string
			for _, prefix := range out {
				for _, alt := range alts {
					next = append(next, prefix+alt)
				}
			}
			out = next
		}
		return out, nil
	case *hclsyntax.ScopeTraversalExpr:
		switch e.Traversal.RootName() {
		case "path":
			return []string{m.dir}, nil
		case "local":
			name := e.Traversal[1].(hcl.TraverseAttr).Name
			for _, body := range m.bodies {
				for _, block := range body.Blocks {
					if attr, ok := block.Body.Attributes[name]; ok && block.Type == "locals" {
						return m.candidates(attr.Expr)
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("%s: cannot tell which strings this names", expr.Range())
}

func parseTemplate(t *testing.T, path string) hclsyntax.Expression {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, diags := hclsyntax.ParseTemplate(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%v", diags)
	}
	return tmpl
}

func renderTemplate(t *testing.T, path string, vars map[string]cty.Value) string {
	t.Helper()
	v, diags := parseTemplate(t, path).Value(&hcl.EvalContext{Variables: vars})
	if diags.HasErrors() {
		t.Fatalf("render %s: %v", path, diags)
	}
	return v.AsString()
}

// renderedScripts renders compute's user_data templates the way the module does, with the
// values a three-node cluster behind a load balancer and a single public node get.
func renderedScripts(t *testing.T) map[string]string {
	dir := filepath.Join(modulesDir, "compute", "templates")
	nodeSetup := renderTemplate(t, filepath.Join(dir, "node_setup.sh.tftpl"), map[string]cty.Value{
		"region":             cty.StringVal("eu-north-1"),
		"ssm_prefix":         cty.StringVal(api.SSMPrefix("d37f1981a6be", "demo-cluster-1")),
		"kubernetes_minor":   cty.StringVal("1.31"),
		"kubernetes_release": cty.StringVal("1.31.4"),
	})
	controlPlane := func(index int64, override string, public bool) map[string]cty.Value {
		return map[string]cty.Value{
			"cluster_name":      cty.StringVal("demo-cluster-1"),
			"node_index":        cty.NumberIntVal(index),
			"node_setup":        cty.StringVal(nodeSetup),
			"endpoint_override": cty.StringVal(override),
			"public_endpoint":   cty.BoolVal(public),
			"pod_cidr":          cty.StringVal("192.168.0.0/16"),
			"calico_version":    cty.StringVal("v3.29.3"),
			"ccm_version":       cty.StringVal("v1.31.9"),
			"worker_count":      cty.NumberIntVal(2),
		}
	}
	nlb := "ko-demo-cluster-1-0123abcd-api-0123456789abcdef.elb.eu-north-1.amazonaws.com"
	bootstrap := filepath.Join(dir, "control_plane_bootstrap.sh.tftpl")
	return map[string]string{
		"control-plane 0 (single, public)": renderTemplate(t, bootstrap, controlPlane(0, "", true)),
		"control-plane 0 (behind NLB)":     renderTemplate(t, bootstrap, controlPlane(0, nlb, false)),
		"control-plane 2 (behind NLB)":     renderTemplate(t, bootstrap, controlPlane(2, nlb, false)),
		"control-plane placeholder":        renderTemplate(t, filepath.Join(dir, "control_plane_placeholder.sh.tftpl"), controlPlane(0, "", false)),
		"worker": renderTemplate(t, filepath.Join(dir, "worker_bootstrap.sh.tftpl"), map[string]cty.Value{
			"node_setup": cty.StringVal(nodeSetup),
		}),
	}
}

// TestBootstrapScripts: the rendered user_data scripts are bash (bash -n) and fit EC2's 16 KB
// user-data limit.
func TestBootstrapScripts(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not on PATH: the scripts' syntax is not checked")
	}
	for name, script := range renderedScripts(t) {
		if len(script) > 16*1024 {
			t.Errorf("%s: %d bytes of user_data, EC2 takes 16384", name, len(script))
		}
		cmd := exec.Command(bash, "-n")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: bash -n: %v\n%s", name, err, out)
		}
	}
}

// TestBootstrapParametersMatch: the scripts write and read exactly the SSM parameters the
// rendered module and the compute module create.
func TestBootstrapParametersMatch(t *testing.T) {
	scripts := renderedScripts(t)
	all := scripts["control-plane 0 (behind NLB)"] + scripts["control-plane 2 (behind NLB)"] + scripts["worker"]
	written := map[string]bool{}
	for _, m := range regexp.MustCompile(`ssm_put "?([a-z0-9_]+)`).FindAllStringSubmatch(all, -1) {
		written[m[1]] = true
	}
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`wait_for "?([a-z0-9_]+)`).FindAllStringSubmatch(all, -1) {
		read[m[1]] = true
	}
	created := map[string]bool{ParameterAPIEndpoint: true, ParameterControlPlaneJoined: true}
	for _, p := range bootstrapParameters {
		created[p.name] = true
		if !written[p.name] {
			t.Errorf("the rendered module creates %s, but no script writes it", p.name)
		}
	}
	for name := range written {
		if !created[name] {
			t.Errorf("a script writes %s, which nothing creates", name)
		}
	}
	for name := range read {
		if !created[name] {
			t.Errorf("a script waits for %s, which nothing creates", name)
		}
	}
	for _, want := range []string{ParameterJoinToken, ParameterCACertHash, ParameterCertificateKey, ParameterAPIEndpoint, ParameterControlPlaneJoined} {
		if !read[want] {
			t.Errorf("no script waits for %s", want)
		}
	}
	// The compute module creates the parameters it owns under the same names.
	main, err := os.ReadFile(filepath.Join(modulesDir, "compute", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`/` + ParameterAPIEndpoint + `"`, `/` + ParameterControlPlaneJoined + `/${count.index}"`} {
		if !bytes.Contains(main, []byte(want)) {
			t.Errorf("compute/main.tf creates no parameter named ...%s", want)
		}
	}
}

// TestTerraformBinary runs the real terraform: fmt -check over the modules and the rendered
// modules, and init + validate when init works (it needs the hashicorp/aws provider from a
// registry or a mirror, so offline it is skipped with the reason).
func TestTerraformBinary(t *testing.T) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not on PATH: fmt and validate are not checked with the real binary")
	}
	run := func(t *testing.T, timeout time.Duration, dir string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, tf, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_INPUT=0")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	rendered := t.TempDir()
	for name, files := range renderGolden(t) {
		dir := filepath.Join(rendered, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, content := range files {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.CopyFS(filepath.Join(dir, ModulesDir), os.DirFS(modulesDir)); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("fmt", func(t *testing.T) {
		abs, err := filepath.Abs(modulesDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{abs, rendered} {
			if out, err := run(t, time.Minute, dir, "fmt", "-check", "-recursive", "-diff", "-no-color"); err != nil {
				t.Errorf("terraform fmt -check -recursive %s: %v\n%s", dir, err, out)
			}
		}
	})

	t.Run("validate", func(t *testing.T) {
		// terraform init installs providers from the registry, which is off this machine and
		// which tests never reach: validate runs only against a local filesystem mirror that
		// holds hashicorp/aws (`terraform providers mirror <dir>` on a machine that has one),
		// given as TERRAFORM_PROVIDER_MIRROR, and terraform is configured to use that alone.
		mirror := os.Getenv("TERRAFORM_PROVIDER_MIRROR")
		if mirror == "" {
			t.Skip("validate needs the hashicorp/aws provider, which comes only from a registry (never reached from tests) or a mirror: set TERRAFORM_PROVIDER_MIRROR to a filesystem mirror (terraform providers mirror)")
		}
		cliConfig := filepath.Join(t.TempDir(), "terraform.rc")
		if err := os.WriteFile(cliConfig, []byte(fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", mirror)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("TF_CLI_CONFIG_FILE", cliConfig)
		names := make([]string, 0)
		for name := range goldenCases() {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			dir := filepath.Join(rendered, name)
			if out, err := run(t, 3*time.Minute, dir, "init", "-backend=false", "-input=false", "-no-color"); err != nil {
				t.Fatalf("%s: terraform init -backend=false from the mirror %s: %v\n%s", name, mirror, err, lastLines(out, 6))
			}
			if out, err := run(t, 3*time.Minute, dir, "validate", "-no-color"); err != nil {
				t.Errorf("%s: terraform validate: %v\n%s", name, err, out)
			}
		}
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprint(strings.Join(lines, "\n"))
}
