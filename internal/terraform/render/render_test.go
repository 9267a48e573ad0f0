package render

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func ptr[T any](v T) *T { return &v }

func baseRequest() api.CreateRequest {
	return api.CreateRequest{
		ClusterID:            "demo-cluster-1",
		Region:               "eu-north-1",
		Topology:             api.TopologyVanillaKubeadm,
		NodeCount:            2,
		InstanceType:         "t3.medium",
		KubernetesVersion:    "v1.31.4",
		TerraformEnvironment: "development",
		CredentialSecretRef:  api.SecretRef{Namespace: "kcp-d37f1981a6be", Name: "aws-credentials"},
		Workspace:            "1bg4baqdjkcw9lz4",
		WorkspaceFingerprint: "d37f1981a6be",
		OwnerUID:             "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f",
	}
}

// goldenCases are the requests whose rendered modules are kept in testdata/<name>/.
func goldenCases() map[string]api.CreateRequest {
	vanilla3 := baseRequest()
	vanilla3.ClusterID = "ha-cluster"
	vanilla3.ControlPlaneCount = ptr(int32(3))
	vanilla3.NodeCount = 3
	vanilla3.InstanceType = "m6g.large"
	vanilla3.KubernetesVersion = "1.32"

	eks := baseRequest()
	eks.ClusterID = "eks-cluster"
	eks.Topology = api.TopologyEKS
	eks.Region = "us-east-1"
	eks.TerraformEnvironment = "production"

	return map[string]api.CreateRequest{
		"vanilla-1": baseRequest(),
		"vanilla-3": vanilla3,
		"eks":       eks,
	}
}

func renderGolden(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for name, req := range goldenCases() {
		files, err := Module(req)
		if err != nil {
			t.Fatalf("%s: Module: %v", name, err)
		}
		out[name] = files
	}
	return out
}

func TestModuleGolden(t *testing.T) {
	for name, files := range renderGolden(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for file, content := range files {
					if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := map[string]string{}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatalf("no golden files (run go test ./internal/terraform/render -update): %v", err)
			}
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				want[e.Name()] = string(b)
			}
			if diff := cmp.Diff(want, files); diff != "" {
				t.Errorf("rendered module differs from %s (-golden +rendered; rerun with -update if intended):\n%s", dir, diff)
			}
		})
	}
}

func TestModuleFiles(t *testing.T) {
	for name, files := range renderGolden(t) {
		var got []string
		for f := range files {
			got = append(got, f)
		}
		sort.Strings(got)
		want := []string{FileBackend, FileMain, FileOutputs, FileVersions}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: files (-want +got):\n%s", name, diff)
		}
	}
}

func TestRenderedModulesParseAndCheck(t *testing.T) {
	for name, files := range renderGolden(t) {
		if err := ParseAndCheck(files); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseAndCheckRefuses(t *testing.T) {
	valid, err := Module(baseRequest())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		file, content, want string
	}{
		"syntax error":            {FileMain, "resource \"aws_lb\" \"x\" {", "failed to parse"},
		"unknown resource type":   {"extra.tf", "resource \"null_resource\" \"x\" {}\n", `unexpected resource type "null_resource"`},
		"unknown attribute":       {"extra.tf", "resource \"aws_lb\" \"x\" {\n  nmae = \"a\"\n}\n", `unexpected attribute "nmae"`},
		"missing required":        {"extra.tf", "resource \"aws_ssm_parameter\" \"x\" {\n  name = \"a\"\n  type = \"String\"\n}\n", `missing required attribute "value"`},
		"unknown top-level block": {"extra.tf", "provisioner \"x\" {}\n", `unexpected block "provisioner"`},
		"undeclared module":       {"extra.tf", "output \"x\" {\n  value = module.nope.id\n}\n", "undeclared module nope"},
		"undeclared resource":     {"extra.tf", "output \"x\" {\n  value = aws_lb.nope.arn\n}\n", "undeclared resource aws_lb.nope"},
		"duplicate output":        {"extra.tf", "output \"vpc_id\" {\n  value = 1\n}\n", `output "vpc_id" declared twice`},
		"module source elsewhere": {"extra.tf", "module \"x\" {\n  source = \"git::https://example.com/x\"\n}\n", "source must be a literal ./modules/<name>"},
		"not a .tf file":          {"terraform.tfvars", "a = 1\n", "not a .tf file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range valid {
				files[k] = v
			}
			files[tc.file] = tc.content
			err := ParseAndCheck(files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseAndCheck() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestModuleRefusesInvalidRequests(t *testing.T) {
	eksWithControlPlane := baseRequest()
	eksWithControlPlane.Topology = api.TopologyEKS
	eksWithControlPlane.ControlPlaneCount = ptr(int32(3))
	tooMany := baseRequest()
	tooMany.ControlPlaneCount = ptr(int32(9))
	reserved := baseRequest()
	reserved.TerraformEnvironment = "dev-s3alias"
	cases := map[string]struct {
		req   api.CreateRequest
		field string
	}{
		"eks with controlPlaneCount":   {eksWithControlPlane, "controlPlaneCount"},
		"too many control-plane nodes": {tooMany, "controlPlaneCount"},
		"reserved bucket suffix":       {reserved, "terraformEnvironment"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Module(tc.req)
			var fe *api.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("Module() = %v, want a *api.FieldError for %s", err, tc.field)
			}
		})
	}
}

// hostile strings: each would end the string, open an interpolation or a directive, or start a
// new line (and with it a new block) if written into HCL unescaped.
var hostile = []string{
	`a"b`,
	`x" } resource "null_resource" "pwn" { x = "`,
	"${file(\"/etc/passwd\")}",
	"a${var.x}b",
	"%{ if true }x%{ endif }",
	"line1\nresource \"null_resource\" \"pwn\" {}\n",
	`back\slash`,
}

func TestInjectionRefusedByValidate(t *testing.T) {
	fields := map[string]func(*api.CreateRequest, string){
		"clusterID":                     func(r *api.CreateRequest, v string) { r.ClusterID = v },
		"region":                        func(r *api.CreateRequest, v string) { r.Region = v },
		"topology":                      func(r *api.CreateRequest, v string) { r.Topology = v },
		"instanceType":                  func(r *api.CreateRequest, v string) { r.InstanceType = v },
		"kubernetesVersion":             func(r *api.CreateRequest, v string) { r.KubernetesVersion = v },
		"terraformEnvironment":          func(r *api.CreateRequest, v string) { r.TerraformEnvironment = v },
		"credentialSecretRef.namespace": func(r *api.CreateRequest, v string) { r.CredentialSecretRef.Namespace = v },
		"credentialSecretRef.name":      func(r *api.CreateRequest, v string) { r.CredentialSecretRef.Name = v },
		"operation":                     func(r *api.CreateRequest, v string) { r.Operation = api.Operation(v) },
		"workspace":                     func(r *api.CreateRequest, v string) { r.Workspace = v },
		"workspaceFingerprint":          func(r *api.CreateRequest, v string) { r.WorkspaceFingerprint = v },
		"ownerUID":                      func(r *api.CreateRequest, v string) { r.OwnerUID = v },
	}
	for field, set := range fields {
		for _, v := range hostile {
			req := baseRequest()
			set(&req, v)
			// Also behind a valid prefix, so an unanchored pattern would be caught too.
			req2 := baseRequest()
			set(&req2, "eu-north-1"+v)
			for _, r := range []api.CreateRequest{req, req2} {
				files, err := Module(r)
				var fe *api.FieldError
				if !errors.As(err, &fe) || fe.Field != field {
					t.Errorf("%s = %q: Module() = %v (files: %d), want a *api.FieldError for %s", field, v, err, len(files), field)
				}
			}
		}
	}
}

// TestInjectionWrittenAsLiterals bypasses Validate and gives the hclwrite layer hostile values in
// every string it writes: each comes back as exactly that string from a literal expression (no
// variables, no functions, no template directives), and the module's structure is untouched.
func TestInjectionWrittenAsLiterals(t *testing.T) {
	for _, topology := range []string{api.TopologyVanillaKubeadm, api.TopologyEKS} {
		for _, v := range hostile {
			s := spec{
				clusterID: v, fingerprint: v, region: v, topology: topology, instanceType: v, kubernetesVersion: v,
				controlPlaneNodes: 3, nodeCount: 2,
				names: api.Names{StateBucket: v, StateKey: v, SSMPrefix: v, ClusterName: v, SecurityGroupPrefix: v, IAMPrefix: v, LoadBalancer: v},
			}
			files, err := render(s)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if err := ParseAndCheck(files); err != nil {
				t.Errorf("%s, %q: structure changed: %v", topology, v, err)
			}
			want := map[string]string{
				"backend.tf:terraform.backend.bucket":    v,
				"backend.tf:terraform.backend.key":       v,
				"backend.tf:terraform.backend.region":    v,
				"main.tf:provider.aws.region":            v,
				"main.tf:module.vpc.name":                v,
				"main.tf:module.vpc.cluster_name":        v,
				"main.tf:module.vpc.tags":                v,
				"main.tf:provider.aws.default_tags.tags": v,
			}
			if topology == api.TopologyVanillaKubeadm {
				want["main.tf:module.compute.kubernetes_version"] = v
				want["main.tf:module.compute.instance_type"] = v
				want["main.tf:module.compute.region"] = v
				want["main.tf:module.compute.ssm_parameter_prefix"] = v
				want["main.tf:module.compute.iam_name_prefix"] = v
				want["main.tf:module.security.name"] = v
				want["main.tf:resource.aws_ssm_parameter.join_token.name"] = v + "/join_token"
				want["main.tf:resource.aws_lb.k8s_api.name"] = v
				want["main.tf:resource.aws_lb.k8s_api.tags"] = v
			} else {
				want["main.tf:module.eks.cluster_name"] = v
				want["main.tf:module.eks.iam_name_prefix"] = v
				want["main.tf:module.eks.kubernetes_version"] = v
				want["main.tf:module.eks.instance_type"] = v
			}
			got := literalStrings(t, files)
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s, %q: %s = %q, want the literal %q", topology, v, k, got[k], w)
				}
			}
			if strings.Contains(v, "${") && !strings.Contains(files[FileMain], "$${") {
				t.Errorf("%q: ${ not escaped as $${ in main.tf", v)
			}
		}
	}
}

// literalStrings evaluates every string attribute of every block (file:blocktype.labels.attr)
// without an evaluation context: anything but a literal fails.
func literalStrings(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	p := hclparse.NewParser()
	for name, content := range files {
		f, diags := p.ParseHCL([]byte(content), name)
		if diags.HasErrors() {
			t.Fatalf("parse %s: %v", name, diags)
		}
		var walk func(b *hclsyntax.Body, path string)
		walk = func(b *hclsyntax.Body, path string) {
			for attrName, attr := range b.Attributes {
				if obj, ok := attr.Expr.(*hclsyntax.ObjectConsExpr); ok && attrName == "tags" {
					v, diags := obj.Value(&hcl.EvalContext{})
					if diags.HasErrors() {
						t.Errorf("%s: %s.tags is not a literal: %v", attr.SrcRange, path, diags)
						continue
					}
					out[name+":"+path+".tags"] = v.GetAttr(TagClusterID).AsString()
					continue
				}
				if _, isTemplate := attr.Expr.(*hclsyntax.TemplateExpr); !isTemplate {
					continue
				}
				tmpl := attr.Expr.(*hclsyntax.TemplateExpr)
				for _, part := range tmpl.Parts {
					if _, ok := part.(*hclsyntax.LiteralValueExpr); !ok {
						t.Errorf("%s: %s.%s is a template with a %T part, want literal parts only", attr.SrcRange, path, attrName, part)
					}
				}
				v, diags := attr.Expr.Value(&hcl.EvalContext{})
				if diags.HasErrors() {
					t.Errorf("%s: %s.%s is not a literal: %v", attr.SrcRange, path, attrName, diags)
					continue
				}
				out[name+":"+path+"."+attrName] = v.AsString()
			}
			for _, blk := range b.Blocks {
				p := strings.Join(append([]string{blk.Type}, blk.Labels...), ".")
				if path != "" {
					p = path + "." + blk.Type
				}
				walk(blk.Body, p)
			}
		}
		walk(f.Body.(*hclsyntax.Body), "")
	}
	return out
}

// TestRenderedNamesAreTheWorkspaces parses the rendered module of two workspaces that chose the
// same clusterID and terraformEnvironment: every cloud-side name in it is api.NamesOf's, derived
// from the workspace fingerprint, and no name is shared.
func TestRenderedNamesAreTheWorkspaces(t *testing.T) {
	rendered := map[string]map[string]string{}
	for _, fp := range []string{"d37f1981a6be", "0c5e2a9f4b17"} {
		req := baseRequest()
		req.ClusterID, req.TerraformEnvironment, req.ControlPlaneCount = "c-7e9d3a1b", "c-7e9d3a1b", ptr(int32(3))
		req.WorkspaceFingerprint = fp
		files, err := Module(req)
		if err != nil {
			t.Fatal(err)
		}
		got := literalStrings(t, files)
		n := api.NamesOf(&req)
		want := map[string]string{
			"backend.tf:terraform.backend.bucket":                         "kubeopera-terraform-state-c-7e9d3a1b-" + fp,
			"backend.tf:terraform.backend.key":                            fp + "/c-7e9d3a1b/terraform.tfstate",
			"main.tf:module.vpc.name":                                     "c-7e9d3a1b-" + fp,
			"main.tf:module.vpc.cluster_name":                             "c-7e9d3a1b-" + fp,
			"main.tf:module.security.name":                                "c-7e9d3a1b-" + fp,
			"main.tf:module.security.cluster_name":                        "c-7e9d3a1b-" + fp,
			"main.tf:module.compute.name":                                 "c-7e9d3a1b-" + fp,
			"main.tf:module.compute.cluster_name":                         "c-7e9d3a1b-" + fp,
			"main.tf:module.compute.iam_name_prefix":                      "c-7e9d3a1b-" + fp,
			"main.tf:module.compute.ssm_parameter_prefix":                 "/kubeopera/" + fp + "/c-7e9d3a1b",
			"main.tf:resource.aws_ssm_parameter.admin_kubeconfig.name":    "/kubeopera/" + fp + "/c-7e9d3a1b/admin_kubeconfig",
			"main.tf:resource.aws_lb.k8s_api.name":                        n.LoadBalancer,
			"main.tf:resource.aws_lb_target_group.k8s_api.name":           n.LoadBalancer,
			"main.tf:resource.aws_ssm_parameter.join_token.name":          "/kubeopera/" + fp + "/c-7e9d3a1b/join_token",
			"main.tf:resource.aws_ssm_parameter.ca_cert_hash.name":        "/kubeopera/" + fp + "/c-7e9d3a1b/ca_cert_hash",
			"main.tf:resource.aws_ssm_parameter.k8s_certificate_key.name": "/kubeopera/" + fp + "/c-7e9d3a1b/k8s_certificate_key",
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %s = %q, want %q", fp, k, got[k], w)
			}
		}
		if !strings.Contains(files[FileMain], `"`+TagWorkspaceFingerprint+`" = "`+fp+`"`) {
			t.Errorf("%s: resources are not tagged %s", fp, TagWorkspaceFingerprint)
		}
		rendered[fp] = got
	}
	a, b := rendered["d37f1981a6be"], rendered["0c5e2a9f4b17"]
	for k, v := range a {
		if strings.HasSuffix(k, ".name") || strings.HasSuffix(k, ".bucket") || strings.HasSuffix(k, ".key") || strings.HasSuffix(k, "_prefix") || strings.HasSuffix(k, "cluster_name") {
			if b[k] == v {
				t.Errorf("%s is %q in both workspaces", k, v)
			}
		}
	}

	eks := baseRequest()
	eks.Topology, eks.ClusterID = api.TopologyEKS, "c-7e9d3a1b"
	files, err := Module(eks)
	if err != nil {
		t.Fatal(err)
	}
	got := literalStrings(t, files)
	for k, w := range map[string]string{
		"main.tf:module.eks.cluster_name":    "c-7e9d3a1b-d37f1981a6be",
		"main.tf:module.eks.iam_name_prefix": "c-7e9d3a1b-d37f1981a6be",
		"main.tf:module.vpc.cluster_name":    "c-7e9d3a1b-d37f1981a6be",
	} {
		if got[k] != w {
			t.Errorf("eks: %s = %q, want %q", k, got[k], w)
		}
	}
}
