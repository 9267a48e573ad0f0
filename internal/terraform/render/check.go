package render

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// ParseAndCheck parses every file of a rendered root module (name -> content) and checks its
// structure: only .tf files; only the top-level blocks, resource types, nested blocks and
// attributes the renderer emits, with their required attributes; module sources under
// ./modules/; no address declared twice; every reference (module.X, aws_x.y, var.x, local.x,
// data.x.y) naming something the module declares. It does not know the AWS provider's schemas
// beyond those resource types, nor the called modules' interfaces (see the package doc).
func ParseAndCheck(files map[string]string) error {
	if len(files) == 0 {
		return errors.New("no files")
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)

	var errs []error
	parser := hclparse.NewParser()
	var bodies []*hclsyntax.Body
	for _, name := range names {
		if !strings.HasSuffix(name, ".tf") || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("%s: not a .tf file of the root module", name))
			continue
		}
		f, diags := parser.ParseHCL([]byte(files[name]), name)
		if diags.HasErrors() {
			errs = append(errs, fmt.Errorf("failed to parse %s: %w", name, diags))
			continue
		}
		body := f.Body.(*hclsyntax.Body)
		bodies = append(bodies, body)
		errs = append(errs, checkBody(body, rootSchema, "")...)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	decl, declErrs := declarations(bodies)
	errs = append(errs, declErrs...)
	for _, body := range bodies {
		for _, block := range body.Blocks {
			if block.Type == "module" {
				errs = append(errs, checkModuleSource(block)...)
			}
		}
		for _, r := range references(body) {
			if err := decl.resolve(r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// blockSchema is what a block may contain.
type blockSchema struct {
	labels int
	// attrs: attribute name -> required.
	attrs map[string]bool
	// open: any attribute is allowed (a module call's inputs).
	open   bool
	blocks map[string]*blockSchema
	// byLabel picks the schema by the block's first label (resource and provider types).
	byLabel map[string]*blockSchema
}

var lifecycleSchema = &blockSchema{attrs: map[string]bool{
	"ignore_changes": false, "create_before_destroy": false, "prevent_destroy": false, "replace_triggered_by": false,
}}

// resourceSchema adds the meta-arguments to a resource type's attributes and blocks.
func resourceSchema(attrs map[string]bool, blocks map[string]*blockSchema) *blockSchema {
	for _, meta := range []string{"count", "for_each", "depends_on", "provider"} {
		attrs[meta] = false
	}
	if blocks == nil {
		blocks = map[string]*blockSchema{}
	}
	blocks["lifecycle"] = lifecycleSchema
	return &blockSchema{labels: 2, attrs: attrs, blocks: blocks}
}

// rootSchema describes what the renderer emits; the resource attributes are those of the
// hashicorp/aws provider (v5 and v6) that the renderer uses.
var rootSchema = &blockSchema{blocks: map[string]*blockSchema{
	"terraform": {
		attrs: map[string]bool{"required_version": false},
		blocks: map[string]*blockSchema{
			"required_providers": {open: true},
			"backend": {labels: 1, byLabel: map[string]*blockSchema{
				"s3": {attrs: map[string]bool{"bucket": true, "key": true, "region": true, "use_lockfile": false, "encrypt": false}},
			}},
		},
	},
	"provider": {labels: 1, byLabel: map[string]*blockSchema{
		"aws": {attrs: map[string]bool{"region": true}, blocks: map[string]*blockSchema{
			"default_tags": {attrs: map[string]bool{"tags": true}},
		}},
	}},
	"module": {labels: 1, open: true},
	"output": {labels: 1, attrs: map[string]bool{"value": true, "description": false, "sensitive": false, "depends_on": false}},
	"resource": {labels: 2, byLabel: map[string]*blockSchema{
		"aws_ssm_parameter": resourceSchema(map[string]bool{
			"name": true, "type": true, "value": true, "description": false, "tier": false, "tags": false,
		}, nil),
		"aws_lb": resourceSchema(map[string]bool{
			"name": false, "internal": false, "load_balancer_type": false, "subnets": false, "security_groups": false,
			"enable_cross_zone_load_balancing": false, "tags": false,
		}, nil),
		"aws_lb_target_group": resourceSchema(map[string]bool{
			"name": false, "port": false, "protocol": false, "target_type": false, "vpc_id": false,
			"preserve_client_ip": false, "tags": false,
		}, map[string]*blockSchema{
			"health_check": {attrs: map[string]bool{
				"protocol": false, "path": false, "port": false, "healthy_threshold": false,
				"unhealthy_threshold": false, "interval": false, "timeout": false, "matcher": false,
			}},
		}),
		"aws_lb_listener": resourceSchema(map[string]bool{
			"load_balancer_arn": true, "port": false, "protocol": false, "tags": false,
		}, map[string]*blockSchema{
			"default_action": {attrs: map[string]bool{"type": true, "target_group_arn": false}},
		}),
		"aws_lb_target_group_attachment": resourceSchema(map[string]bool{
			"target_group_arn": true, "target_id": true, "port": false,
		}, nil),
	}},
}}

func checkBody(body *hclsyntax.Body, schema *blockSchema, where string) []error {
	var errs []error
	if !schema.open {
		for _, name := range sortedKeys(body.Attributes) {
			if _, ok := schema.attrs[name]; !ok {
				errs = append(errs, fmt.Errorf("%s: unexpected attribute %q%s", body.Attributes[name].NameRange, name, where))
			}
		}
	}
	for _, name := range sortedKeys(schema.attrs) {
		if _, ok := body.Attributes[name]; schema.attrs[name] && !ok {
			errs = append(errs, fmt.Errorf("%s: missing required attribute %q%s", body.SrcRange.Ptr(), name, where))
		}
	}
	for _, block := range body.Blocks {
		sub, ok := schema.blocks[block.Type]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unexpected block %q%s", block.TypeRange, block.Type, where))
			continue
		}
		if len(block.Labels) != sub.labels {
			errs = append(errs, fmt.Errorf("%s: block %q takes %d labels, has %d", block.TypeRange, block.Type, sub.labels, len(block.Labels)))
			continue
		}
		in := fmt.Sprintf(" in %s", strings.Join(append([]string{block.Type}, block.Labels...), "."))
		if sub.byLabel != nil {
			s, ok := sub.byLabel[block.Labels[0]]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unexpected %s type %q", block.LabelRanges[0], block.Type, block.Labels[0]))
				continue
			}
			sub = s
		}
		errs = append(errs, checkBody(block.Body, sub, in)...)
	}
	return errs
}

func checkModuleSource(block *hclsyntax.Block) []error {
	attr, ok := block.Body.Attributes["source"]
	if !ok {
		return []error{fmt.Errorf("%s: module %q has no source", block.TypeRange, block.Labels[0])}
	}
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || !v.Type().Equals(cty.String) || v.IsNull() || !strings.HasPrefix(v.AsString(), "./"+ModulesDir+"/") {
		return []error{fmt.Errorf("%s: module %q: source must be a literal ./%s/<name>", attr.NameRange, block.Labels[0], ModulesDir)}
	}
	return nil
}

// declared is what a module declares, by address.
type declared struct {
	resources map[string]bool // type.name
	data      map[string]bool // type.name
	modules   map[string]bool
	variables map[string]bool
	locals    map[string]bool
}

func declarations(bodies []*hclsyntax.Body) (*declared, []error) {
	d := &declared{
		resources: map[string]bool{}, data: map[string]bool{}, modules: map[string]bool{},
		variables: map[string]bool{}, locals: map[string]bool{},
	}
	outputs := map[string]bool{}
	var errs []error
	add := func(set map[string]bool, key string, block *hclsyntax.Block) {
		if set[key] {
			errs = append(errs, fmt.Errorf("%s: %s %q declared twice", block.TypeRange, block.Type, key))
		}
		set[key] = true
	}
	for _, body := range bodies {
		for _, block := range body.Blocks {
			switch block.Type {
			case "resource":
				add(d.resources, block.Labels[0]+"."+block.Labels[1], block)
			case "data":
				add(d.data, block.Labels[0]+"."+block.Labels[1], block)
			case "module":
				add(d.modules, block.Labels[0], block)
			case "variable":
				add(d.variables, block.Labels[0], block)
			case "output":
				add(outputs, block.Labels[0], block)
			case "locals":
				for name := range block.Body.Attributes {
					add(d.locals, name, block)
				}
			}
		}
	}
	return d, errs
}

// references are the traversals in every expression of body, but those naming attributes rather
// than objects (lifecycle's ignore_changes), a variable's type constraint, and a dynamic block's
// iterator (tag.key inside dynamic "tag").
func references(body *hclsyntax.Body) []hcl.Traversal {
	refs := bodyReferences(body, "")
	sort.SliceStable(refs, func(i, j int) bool {
		ri, rj := refs[i].SourceRange(), refs[j].SourceRange()
		if ri.Filename != rj.Filename {
			return ri.Filename < rj.Filename
		}
		return ri.Start.Byte < rj.Start.Byte
	})
	return refs
}

func bodyReferences(b *hclsyntax.Body, blockType string) []hcl.Traversal {
	var refs []hcl.Traversal
	for name, attr := range b.Attributes {
		if (blockType == "lifecycle" && name == "ignore_changes") || (blockType == "dynamic" && name == "iterator") ||
			(blockType == "variable" && name == "type") {
			continue
		}
		refs = append(refs, attr.Expr.Variables()...)
	}
	for _, block := range b.Blocks {
		inner := bodyReferences(block.Body, block.Type)
		if block.Type == "dynamic" && len(block.Labels) == 1 {
			iterator := block.Labels[0]
			if it, ok := block.Body.Attributes["iterator"]; ok {
				iterator = hcl.ExprAsKeyword(it.Expr)
			}
			kept := inner[:0]
			for _, r := range inner {
				if r.RootName() != iterator {
					kept = append(kept, r)
				}
			}
			inner = kept
		}
		refs = append(refs, inner...)
	}
	return refs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (d *declared) resolve(t hcl.Traversal) error {
	root := t.RootName()
	attr := func(i int) (string, bool) {
		if len(t) <= i {
			return "", false
		}
		a, ok := t[i].(hcl.TraverseAttr)
		return a.Name, ok
	}
	missing := func(what string) error {
		return fmt.Errorf("%s: reference to undeclared %s", t.SourceRange(), what)
	}
	switch root {
	case "count", "each", "path", "terraform", "self":
		return nil
	case "module":
		name, ok := attr(1)
		if !ok || !d.modules[name] {
			return missing("module " + name)
		}
	case "var":
		name, ok := attr(1)
		if !ok || !d.variables[name] {
			return missing("variable " + name)
		}
	case "local":
		name, ok := attr(1)
		if !ok || !d.locals[name] {
			return missing("local value " + name)
		}
	case "data":
		typ, ok1 := attr(1)
		name, ok2 := attr(2)
		if !ok1 || !ok2 || !d.data[typ+"."+name] {
			return missing("data source " + typ + "." + name)
		}
	default:
		name, ok := attr(1)
		if !ok || !d.resources[root+"."+name] {
			return missing("resource " + root + "." + name)
		}
	}
	return nil
}
