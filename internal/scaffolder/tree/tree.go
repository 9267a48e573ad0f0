// Package tree generates a host cluster's GitOps tree (docs/scaffolder.md#the-tree): the Flux
// objects of its infrastructure layer and of the platform's apps layer, from templates, with the
// cluster's values filled in.
//
// Templates are YAML files named <layer>.<name>.yaml, layer infrastructure or apps; the defaults
// are built in (templates/), and an admin's own replace them all (Load with a directory, e.g. a
// mounted ConfigMap whose keys are such names). A template's string values may hold the
// variables ${slug}, ${domain}, ${region} and ${clusterID}. They are filled in after the YAML is
// decoded, in decoded strings only, and the document is encoded again by the YAML encoder: a
// value can never change a document's structure (no string pasting), and a variable the package
// does not know is an error, not an empty string.
//
// The tree of a cluster at path P:
//
//	P/kustomization.yaml              kustomize: infrastructure.yaml, and apps.yaml once sealed
//	P/infrastructure.yaml             Flux Kustomization "infrastructure" (path P/infrastructure)
//	P/infrastructure/kustomization.yaml, <name>.yaml per infrastructure template
//	P/apps.yaml                       Flux Kustomization "apps", dependsOn infrastructure
//	P/apps/kustomization.yaml, <name>.yaml per apps template, sealed/<secret>.yaml per sealed secret
//
// The first pass writes the infrastructure layer only (nothing is sealed yet: the sealed-secrets
// controller comes with that layer); the second adds the apps layer with its SealedSecrets.
package tree

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Layers.
const (
	Infrastructure = "infrastructure"
	Apps           = "apps"
)

// Names the HostCluster controller and the runner rely on.
const (
	// FluxNamespace holds the tree's Flux Kustomizations and HelmReleases.
	FluxNamespace = "flux-system"
	// SourceName is the GitRepository the tree's Kustomizations read from: the name `flux
	// bootstrap` gives it, and the one the HostCluster controller creates.
	SourceName = "flux-system"
	// AppsKustomization is the Flux Kustomization of the apps layer; the HostCluster controller
	// waits for it to be Ready.
	AppsKustomization = "apps"
	// InfrastructureKustomization is the Flux Kustomization of the infrastructure layer.
	InfrastructureKustomization = "infrastructure"
	// SealedDir is the apps layer's directory of SealedSecrets.
	SealedDir = "sealed"
)

//go:embed templates/*.yaml
var builtin embed.FS

// maxTemplateBytes bounds one template file, maxTemplates their number.
const (
	maxTemplateBytes = 256 << 10
	maxTemplates     = 64
)

// Template is one template file.
type Template struct {
	// Layer is infrastructure or apps, Name the file's name in its layer (without .yaml).
	Layer, Name string
	// Docs are its YAML documents, decoded.
	Docs []map[string]any
}

// Templates is a set of templates, in name order.
type Templates []Template

var templateNameRe = regexp.MustCompile(`^(infrastructure|apps)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.yaml$`)

// Load reads the templates of dir, or the built-in ones when dir is "". Files that are not
// named <layer>.<name>.yaml are ignored (a mounted ConfigMap's ..data links among them).
func Load(dir string) (Templates, error) {
	var fsys fs.FS = builtin
	root := "templates"
	if dir != "" {
		fsys, root = os.DirFS(dir), "."
	}
	entries, err := fs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("failed to read the templates: %w", err)
	}
	var out Templates
	for _, e := range entries {
		m := templateNameRe.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			continue
		}
		if len(out) == maxTemplates {
			return nil, fmt.Errorf("more than %d templates", maxTemplates)
		}
		raw, err := fs.ReadFile(fsys, path.Join(root, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("failed to read template %s: %w", e.Name(), err)
		}
		if len(raw) > maxTemplateBytes {
			return nil, fmt.Errorf("template %s is larger than %d bytes", e.Name(), maxTemplateBytes)
		}
		docs, err := decode(raw)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", e.Name(), err)
		}
		out = append(out, Template{Layer: m[1], Name: m[2], Docs: docs})
	}
	if !out.has(Infrastructure) || !out.has(Apps) {
		return nil, errors.New("the templates need at least one infrastructure.<name>.yaml and one apps.<name>.yaml")
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Layer != out[j].Layer {
			return out[i].Layer < out[j].Layer
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func (t Templates) has(layer string) bool {
	for _, tpl := range t {
		if tpl.Layer == layer {
			return true
		}
	}
	return false
}

// decode reads the YAML documents of raw; each must be a Kubernetes object (apiVersion, kind,
// metadata.name).
func decode(raw []byte) ([]map[string]any, error) {
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs []map[string]any
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, err
		}
		if obj == nil {
			continue // comments only
		}
		if err := checkObject(obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		docs = append(docs, obj)
	}
	if len(docs) == 0 {
		return nil, errors.New("no YAML documents")
	}
	return docs, nil
}

func checkObject(obj map[string]any) error {
	api, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if api == "" || kind == "" || name == "" {
		return errors.New("not a Kubernetes object: apiVersion, kind and metadata.name are required")
	}
	return nil
}

// Params are one cluster's values.
type Params struct {
	// Path is where the tree goes in the repository (spec.gitOpsPath, without leading or
	// trailing slashes).
	Path string
	// Slug, Domain, Region and ClusterID fill the templates' variables.
	Slug, Domain, Region, ClusterID string
	// ChartMirror, when set, becomes every HelmRepository's spec.url.
	ChartMirror string
}

func (p Params) vars() map[string]string {
	return map[string]string{"slug": p.Slug, "domain": p.Domain, "region": p.Region, "clusterID": p.ClusterID}
}

// Files is a generated tree: repository-relative file name -> content.
type Files map[string][]byte

// Sealed is one SealedSecret of the apps layer, already encoded.
type Sealed struct {
	// Name is the Secret's name (the file is sealed/<Name>.yaml).
	Name string
	// YAML is the SealedSecret.
	YAML []byte
}

var varRe = regexp.MustCompile(`\$\{([^}]*)\}`)

// Render generates the tree: the infrastructure layer always; the apps layer, with the sealed
// secrets, when sealed is not nil (the second pass).
func (t Templates) Render(p Params, sealed []Sealed) (Files, error) {
	if p.Path == "" || strings.HasPrefix(p.Path, "/") || strings.HasSuffix(p.Path, "/") {
		return nil, fmt.Errorf("the tree's path %q must be relative, without a trailing slash", p.Path)
	}
	out := Files{}
	layers := []string{Infrastructure}
	if sealed != nil {
		layers = append(layers, Apps)
	}
	root := []string{}
	for _, layer := range layers {
		var resources []string
		for _, tpl := range t {
			if tpl.Layer != layer {
				continue
			}
			raw, err := tpl.render(p)
			if err != nil {
				return nil, fmt.Errorf("template %s.%s.yaml: %w", tpl.Layer, tpl.Name, err)
			}
			out[path.Join(p.Path, layer, tpl.Name+".yaml")] = raw
			resources = append(resources, tpl.Name+".yaml")
		}
		if layer == Apps {
			for _, s := range sealed {
				if msgs := validation.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
					return nil, fmt.Errorf("sealed secret %q: %s", s.Name, strings.Join(msgs, "; "))
				}
				f := path.Join(SealedDir, s.Name+".yaml")
				out[path.Join(p.Path, layer, f)] = s.YAML
				resources = append(resources, f)
			}
		}
		kz, err := kustomization(resources)
		if err != nil {
			return nil, err
		}
		out[path.Join(p.Path, layer, "kustomization.yaml")] = kz
		fk, err := fluxKustomization(layer, p.Path)
		if err != nil {
			return nil, err
		}
		out[path.Join(p.Path, layer+".yaml")] = fk
		root = append(root, layer+".yaml")
	}
	kz, err := kustomization(root)
	if err != nil {
		return nil, err
	}
	out[path.Join(p.Path, "kustomization.yaml")] = kz
	return out, nil
}

// render fills in the template's variables and the chart mirror, and encodes its documents.
func (tpl Template) render(p Params) ([]byte, error) {
	vars := p.vars()
	var buf bytes.Buffer
	for i, doc := range tpl.Docs {
		filled, err := fill(doc, vars)
		if err != nil {
			return nil, err
		}
		obj := filled.(map[string]any)
		if p.ChartMirror != "" && obj["kind"] == "HelmRepository" {
			spec, _ := obj["spec"].(map[string]any)
			if spec == nil {
				spec = map[string]any{}
				obj["spec"] = spec
			}
			spec["url"] = p.ChartMirror
		}
		raw, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(raw)
	}
	return buf.Bytes(), nil
}

// fill returns a copy of v with the variables of every string value replaced; map keys are
// left alone.
func fill(v any, vars map[string]string) (any, error) {
	switch x := v.(type) {
	case string:
		var unknown string
		s := varRe.ReplaceAllStringFunc(x, func(m string) string {
			name := m[2 : len(m)-1]
			val, ok := vars[name]
			if !ok && unknown == "" {
				unknown = name
			}
			return val
		})
		if unknown != "" {
			return nil, fmt.Errorf("unknown variable ${%s} (known: ${slug}, ${domain}, ${region}, ${clusterID})", unknown)
		}
		return s, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			f, err := fill(e, vars)
			if err != nil {
				return nil, err
			}
			out[k] = f
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			f, err := fill(e, vars)
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	}
	return v, nil
}

// kustomization is a kustomize Kustomization listing resources.
func kustomization(resources []string) ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  resources,
	})
}

// fluxKustomization is the Flux Kustomization of a layer: it applies <path>/<layer> from the
// flux-system source, prunes what the tree no longer has and waits for what it applied to be
// ready; apps waits for infrastructure first.
func fluxKustomization(layer, treePath string) ([]byte, error) {
	spec := map[string]any{
		"interval":      "10m",
		"retryInterval": "1m",
		"path":          "./" + path.Join(treePath, layer),
		"prune":         true,
		"wait":          true,
		"timeout":       "10m",
		"sourceRef":     map[string]any{"kind": "GitRepository", "name": SourceName},
	}
	if layer == Apps {
		spec["dependsOn"] = []any{map[string]any{"name": InfrastructureKustomization}}
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
		"kind":       "Kustomization",
		"metadata":   map[string]any{"name": layer, "namespace": FluxNamespace},
		"spec":       spec,
	})
}
