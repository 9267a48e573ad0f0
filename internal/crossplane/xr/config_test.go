package xr

// Tests of config/crossplane (the ManagedCluster XRD and the Compositions): they fail when the
// files drift from the XR contract the controller writes against, or from each other.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// The XR contract, written out literally (not taken from xr.go) so that a change on either side
// shows up here.
const (
	configDir               = "../../../config/crossplane"
	configXRDName           = "managedclusters.infra.kubeopera.io"
	configXRGroup           = "infra.kubeopera.io"
	configXRVersion         = "v1alpha1"
	configXRKind            = "ManagedCluster"
	configXRPlural          = "managedclusters"
	configProviderLabel     = "infra.kubeopera.io/provider"
	configKubeconfigField   = "spec.kubeconfigSecretName"
	configPTInputAPIVersion = "pt.fn.crossplane.io/v1beta1"
)

// configSpecFields are the XR's spec fields and their types; configSpecRequired the required ones.
var (
	configSpecFields = map[string]string{
		"provider": "string", "region": "string", "kubernetesVersion": "string", "availableZone": "string",
		"nodeAvailableZone": "string", "nodeFlavor": "string", "nodeCount": "integer", "nodeDiskSizeGiB": "integer",
		"vpcID": "string", "subnetIDs": "array", "keyPair": "string", "credentialsSecretRef": "object",
		"kubeconfigSecretName": "string",
	}
	configSpecRequired   = []string{"provider", "kubernetesVersion", "nodeFlavor", "nodeCount", "credentialsSecretRef", "kubeconfigSecretName"}
	configStatusFields   = map[string]string{"clusterID": "string", "endpoint": "string"}
	configProviderValues = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// configObjects reads the objects of every file kustomization.yaml lists, in its order.
func configObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var k struct {
		Resources []string `json:"resources"`
	}
	raw, err := os.ReadFile(filepath.Join(configDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	var out []*unstructured.Unstructured
	for _, f := range k.Resources {
		data, err := os.ReadFile(filepath.Join(configDir, f))
		if err != nil {
			t.Fatalf("kustomization.yaml lists %s: %v", f, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			out = append(out, u)
		}
	}
	return out
}

// TestConfigKustomizationListsEveryFile: an object file left out of kustomization.yaml would be
// neither installed by an admin nor checked here.
func TestConfigKustomizationListsEveryFile(t *testing.T) {
	var k struct {
		Resources []string `json:"resources"`
	}
	raw, err := os.ReadFile(filepath.Join(configDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(configDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(k.Resources, base) {
			t.Errorf("%s is not listed in kustomization.yaml", base)
		}
	}
}

// configConvert converts a decoded YAML object into a typed one through JSON, so that custom
// JSON unmarshalers (JSONSchemaPropsOrBool, Unstructured) apply.
func configConvert(in map[string]any, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// configXRD returns the XRD and its one version's openAPIV3Schema.
func configXRD(t *testing.T, objs []*unstructured.Unstructured) (*unstructured.Unstructured, *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	var xrds []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "CompositeResourceDefinition" {
			xrds = append(xrds, u)
		}
	}
	if len(xrds) != 1 {
		t.Fatalf("want exactly one CompositeResourceDefinition in %s, found %d", configDir, len(xrds))
	}
	xrd := xrds[0]
	versions, _, _ := unstructured.NestedSlice(xrd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("XRD: want one version, found %d", len(versions))
	}
	v, _ := versions[0].(map[string]any)
	raw, found, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema")
	if !found {
		t.Fatal("XRD: no spec.versions[0].schema.openAPIV3Schema")
	}
	s := &apiextensionsv1.JSONSchemaProps{}
	if err := configConvert(raw, s); err != nil {
		t.Fatalf("XRD schema: %v", err)
	}
	return xrd, s
}

func TestConfigXRD(t *testing.T) {
	xrd, s := configXRD(t, configObjects(t))
	str := func(path ...string) string { v, _, _ := unstructured.NestedString(xrd.Object, path...); return v }
	for _, c := range []struct{ what, got, want string }{
		{"apiVersion", xrd.GetAPIVersion(), "apiextensions.crossplane.io/v2"},
		{"metadata.name", xrd.GetName(), configXRDName},
		{"spec.scope", str("spec", "scope"), "Namespaced"},
		{"spec.group", str("spec", "group"), configXRGroup},
		{"spec.names.kind", str("spec", "names", "kind"), configXRKind},
		{"spec.names.plural", str("spec", "names", "plural"), configXRPlural},
	} {
		if c.got != c.want {
			t.Errorf("XRD %s = %q, want %q", c.what, c.got, c.want)
		}
	}
	versions, _, _ := unstructured.NestedSlice(xrd.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	if v["name"] != configXRVersion || v["served"] != true || v["referenceable"] != true {
		t.Errorf("XRD version: name %v served %v referenceable %v, want %s served and referenceable", v["name"], v["served"], v["referenceable"], configXRVersion)
	}
	for _, forbidden := range []string{"claimNames", "connectionSecretKeys", "defaultCompositionRef", "enforcedCompositionRef"} {
		if _, found, _ := unstructured.NestedFieldNoCopy(xrd.Object, "spec", forbidden); found {
			t.Errorf("XRD has spec.%s: the controller selects the Composition by label, and v2 XRs have no claims or connection Secrets", forbidden)
		}
	}

	spec, status := s.Properties["spec"], s.Properties["status"]
	for name, typ := range configSpecFields {
		if got := spec.Properties[name].Type; got != typ {
			t.Errorf("XRD spec.%s has type %q, want %q", name, got, typ)
		}
	}
	for name := range spec.Properties {
		if _, ok := configSpecFields[name]; !ok {
			t.Errorf("XRD spec.%s is not in the XR contract", name)
		}
	}
	if got := slices.Sorted(slices.Values(spec.Required)); !slices.Equal(got, slices.Sorted(slices.Values(configSpecRequired))) {
		t.Errorf("XRD spec.required = %v, want %v", got, configSpecRequired)
	}
	ref := spec.Properties["credentialsSecretRef"]
	if !slices.Equal(slices.Sorted(slices.Values(ref.Required)), []string{"key", "name"}) ||
		ref.Properties["name"].Type != "string" || ref.Properties["key"].Type != "string" {
		t.Errorf("XRD spec.credentialsSecretRef: want {name, key} required strings, got %+v", ref)
	}
	nc := spec.Properties["nodeCount"]
	if nc.Minimum == nil || *nc.Minimum != 1 || nc.Maximum == nil || *nc.Maximum != 1000 {
		t.Errorf("XRD spec.nodeCount: want minimum 1 and maximum 1000, got %v..%v", nc.Minimum, nc.Maximum)
	}
	if d := spec.Properties["nodeDiskSizeGiB"]; d.Minimum == nil || *d.Minimum != 1 {
		t.Errorf("XRD spec.nodeDiskSizeGiB: want minimum 1")
	}
	for name, typ := range configStatusFields {
		if got := status.Properties[name].Type; got != typ {
			t.Errorf("XRD status.%s has type %q, want %q", name, got, typ)
		}
	}
	if s.Description == "" || spec.Description == "" {
		t.Error("XRD schema and spec need descriptions")
	}
	for name, p := range spec.Properties {
		if p.Description == "" {
			t.Errorf("XRD spec.%s has no description", name)
		}
	}
}

// TestConfigXRDSchemaIsStructural validates the schema as the apiserver will when Crossplane
// creates the XR's CRD from it: structural, and a valid CRD (CEL rules compile within the cost
// budget, defaults pruned, list types).
func TestConfigXRDSchemaIsStructural(t *testing.T) {
	_, s := configXRD(t, configObjects(t))
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		t.Fatal(err)
	}
	ss, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatalf("XRD schema is not structural: %v", err)
	}
	if errs := structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), ss); len(errs) > 0 {
		t.Fatalf("XRD schema is not structural: %v", errs.ToAggregate())
	}

	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: configXRDName},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: configXRGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: configXRKind, ListKind: configXRKind + "List", Plural: configXRPlural, Singular: strings.ToLower(configXRKind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: configXRVersion, Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s.DeepCopy()},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{configXRVersion}},
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	in := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, in, nil); err != nil {
		t.Fatal(err)
	}
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), in); len(errs) > 0 {
		t.Fatalf("a CRD with the XRD's schema is invalid: %v", errs.ToAggregate())
	}
}

// TestConfigXRDRules evaluates the XRD's CEL rules as the apiserver does, on XRs the controller
// could write.
func TestConfigXRDRules(t *testing.T) {
	_, s := configXRD(t, configObjects(t))
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		t.Fatal(err)
	}
	ss, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	validator := cel.NewValidator(ss, true, celconfig.PerCallLimit)
	if validator == nil {
		t.Fatal("the XRD schema has no CEL rules")
	}
	base := func(provider string, extra map[string]any) map[string]any {
		spec := map[string]any{
			"provider": provider, "kubernetesVersion": "1.31", "nodeFlavor": "m5.large", "nodeCount": int64(2),
			"credentialsSecretRef": map[string]any{"name": "creds", "key": "credentials"}, "kubeconfigSecretName": "kc",
		}
		for k, v := range extra {
			spec[k] = v
		}
		return map[string]any{"apiVersion": configXRGroup + "/" + configXRVersion, "kind": configXRKind, "spec": spec}
	}
	cases := map[string]struct {
		obj     map[string]any
		wantErr string
	}{
		"AWS with region and two subnets": {
			obj: base("AWS", map[string]any{"region": "eu-central-1", "subnetIDs": []any{"subnet-0a1b2c3d", "subnet-4e5f6a7b"}}),
		},
		"AWS without region": {
			obj:     base("AWS", map[string]any{"subnetIDs": []any{"subnet-a", "subnet-b"}}),
			wantErr: "spec.region is required",
		},
		"AWS without subnets": {
			obj:     base("AWS", map[string]any{"region": "eu-central-1"}),
			wantErr: "spec.subnetIDs must list at least two existing subnets",
		},
		"AWS with one subnet": {
			obj:     base("AWS", map[string]any{"region": "eu-central-1", "subnetIDs": []any{"subnet-a"}}),
			wantErr: "spec.subnetIDs must list at least two existing subnets",
		},
		"lower-case aws is AWS too": {
			obj:     base("aws", map[string]any{"region": "eu-central-1"}),
			wantErr: "spec.subnetIDs must list",
		},
		"another provider needs neither": {
			obj: base("EquinixMetal", nil),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs, _ := validator.Validate(context.Background(), field.NewPath(""), ss, tc.obj, nil, celconfig.RuntimeCELCostBudget)
			got := errs.ToAggregate()
			switch {
			case tc.wantErr == "" && got != nil:
				t.Errorf("want valid, got %v", got)
			case tc.wantErr != "" && (got == nil || !strings.Contains(got.Error(), tc.wantErr)):
				t.Errorf("want an error containing %q, got %v", tc.wantErr, got)
			}
		})
	}
}

// configPatch is a function-patch-and-transform patch (input/v1beta1 resources_patches.go), the
// fields the tests read.
type configPatch struct {
	Type          string `json:"type"`
	FromFieldPath string `json:"fromFieldPath"`
	ToFieldPath   string `json:"toFieldPath"`
	PatchSetName  string `json:"patchSetName"`
	Combine       *struct {
		Variables []struct {
			FromFieldPath string `json:"fromFieldPath"`
		} `json:"variables"`
	} `json:"combine"`
}

// configResources is a function-patch-and-transform Resources input (input/v1beta1
// resources.go).
type configResources struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	PatchSets  []struct {
		Name    string        `json:"name"`
		Patches []configPatch `json:"patches"`
	} `json:"patchSets"`
	Resources []struct {
		Name            string                     `json:"name"`
		Base            *unstructured.Unstructured `json:"base"`
		Patches         []configPatch              `json:"patches"`
		ReadinessChecks []map[string]any           `json:"readinessChecks"`
	} `json:"resources"`
}

// configSchemaHas says whether the dotted field path (with [n] indexes) exists in s.
func configSchemaHas(s *apiextensionsv1.JSONSchemaProps, path string) bool {
	cur := s
	for part := range strings.SplitSeq(path, ".") {
		name, index, indexed := strings.Cut(part, "[")
		next, ok := cur.Properties[name]
		if !ok {
			if cur.AdditionalProperties == nil || cur.AdditionalProperties.Schema == nil {
				return false
			}
			next = *cur.AdditionalProperties.Schema
		}
		cur = &next
		if indexed {
			if _, err := strconv.Atoi(strings.TrimSuffix(index, "]")); err != nil || cur.Items == nil || cur.Items.Schema == nil {
				return false
			}
			cur = cur.Items.Schema
		}
	}
	return true
}

// TestConfigCompositions checks every Composition against the XRD: its type, its provider
// label, every XR field it reads or writes, and that it writes the kubeconfig Secret the
// controller reads.
func TestConfigCompositions(t *testing.T) {
	objs := configObjects(t)
	_, xrdSchema := configXRD(t, objs)
	n := 0
	for _, c := range objs {
		if c.GetKind() != "Composition" {
			continue
		}
		n++
		t.Run(c.GetName(), func(t *testing.T) {
			if c.GetAPIVersion() != "apiextensions.crossplane.io/v1" {
				t.Errorf("apiVersion %s, want apiextensions.crossplane.io/v1", c.GetAPIVersion())
			}
			typeRef, _, _ := unstructured.NestedStringMap(c.Object, "spec", "compositeTypeRef")
			if typeRef["apiVersion"] != configXRGroup+"/"+configXRVersion || typeRef["kind"] != configXRKind {
				t.Errorf("spec.compositeTypeRef = %v, want %s/%s %s", typeRef, configXRGroup, configXRVersion, configXRKind)
			}
			label := c.GetLabels()[configProviderLabel]
			if !configProviderValues.MatchString(label) || label != strings.ToLower(label) {
				t.Errorf("label %s = %q, want a lower-case provider type", configProviderLabel, label)
			}
			if want := "managedcluster-" + label; c.GetName() != want {
				t.Errorf("name %s, want %s (one Composition per provider)", c.GetName(), want)
			}
			if mode, _, _ := unstructured.NestedString(c.Object, "spec", "mode"); mode != "Pipeline" {
				t.Errorf("spec.mode = %q, want Pipeline", mode)
			}
			steps, _, _ := unstructured.NestedSlice(c.Object, "spec", "pipeline")
			if len(steps) == 0 {
				t.Fatal("spec.pipeline is empty")
			}
			kubeconfigWriters := 0
			statusWritten := map[string]bool{}
			for i, st := range steps {
				step, _ := st.(map[string]any)
				inputRaw, _, _ := unstructured.NestedMap(step, "input")
				if inputRaw["apiVersion"] != configPTInputAPIVersion {
					continue // only function-patch-and-transform inputs are understood here
				}
				var in configResources
				if err := configConvert(inputRaw, &in); err != nil {
					t.Fatalf("pipeline[%d].input: %v", i, err)
				}
				if in.Kind != "Resources" {
					t.Errorf("pipeline[%d].input.kind = %q, want Resources", i, in.Kind)
				}
				sets := map[string][]configPatch{}
				for _, ps := range in.PatchSets {
					sets[ps.Name] = ps.Patches
				}
				names := map[string]bool{}
				for _, r := range in.Resources {
					if r.Name == "" || names[r.Name] {
						t.Errorf("resource name %q empty or repeated", r.Name)
					}
					names[r.Name] = true
					if r.Base == nil {
						t.Errorf("resource %s has no base", r.Name)
						continue
					}
					var patches []configPatch
					for _, p := range r.Patches {
						if p.Type != "PatchSet" {
							patches = append(patches, p)
							continue
						}
						set, ok := sets[p.PatchSetName]
						if !ok {
							t.Errorf("resource %s uses unknown patchSet %q", r.Name, p.PatchSetName)
						}
						patches = append(patches, set...)
					}
					for _, p := range patches {
						from := []string{p.FromFieldPath}
						if p.Combine != nil {
							for _, v := range p.Combine.Variables {
								from = append(from, v.FromFieldPath)
							}
						}
						switch p.Type {
						case "", "FromCompositeFieldPath", "CombineFromComposite":
							for _, f := range from {
								if (strings.HasPrefix(f, "spec.") || strings.HasPrefix(f, "status.")) && !configSchemaHas(xrdSchema, f) {
									t.Errorf("resource %s reads the XR's %s, which the XRD does not have", r.Name, f)
								}
							}
							if p.ToFieldPath == "spec.writeConnectionSecretToRef.name" && p.FromFieldPath == configKubeconfigField {
								kubeconfigWriters++
							}
						case "ToCompositeFieldPath", "CombineToComposite":
							if !strings.HasPrefix(p.ToFieldPath, "status.") || !configSchemaHas(xrdSchema, p.ToFieldPath) {
								t.Errorf("resource %s writes the XR's %s, which is not in the XRD's status", r.Name, p.ToFieldPath)
							}
							statusWritten[p.ToFieldPath] = true
						default:
							t.Errorf("resource %s: patch type %q is not one a Composition of this XR uses", r.Name, p.Type)
						}
					}
					// Namespaced managed resources only: they live in the XR's namespace and use
					// its ProviderConfig.
					if apiVersion := r.Base.GetAPIVersion(); strings.Contains(apiVersion, ".upbound.io/") || strings.Contains(apiVersion, ".crossplane.io/") {
						group, _, _ := strings.Cut(apiVersion, "/")
						if !strings.Contains(group, ".m.") && !strings.HasPrefix(group, "m.") {
							t.Errorf("resource %s is %s, not a namespaced (Crossplane v2 .m.) kind", r.Name, apiVersion)
						}
						if kind, found, _ := unstructured.NestedString(r.Base.Object, "spec", "providerConfigRef", "kind"); found && kind != "ProviderConfig" {
							t.Errorf("resource %s: providerConfigRef.kind %q, want the namespaced ProviderConfig", r.Name, kind)
						}
					}
				}
			}
			if kubeconfigWriters != 1 {
				t.Errorf("%d resources patch %s into spec.writeConnectionSecretToRef.name, want exactly one (the kubeconfig Secret)", kubeconfigWriters, configKubeconfigField)
			}
			for f := range configStatusFields {
				if !statusWritten["status."+f] {
					t.Errorf("no resource patches status.%s back to the XR", f)
				}
			}
		})
	}
	if n == 0 {
		t.Fatalf("no Composition in %s", configDir)
	}
}

// TestConfigAWSComposition pins what the AWS composition must keep doing for the controller.
func TestConfigAWSComposition(t *testing.T) {
	for _, c := range configObjects(t) {
		if c.GetKind() != "Composition" || c.GetLabels()[configProviderLabel] != "aws" {
			continue
		}
		steps, _, _ := unstructured.NestedSlice(c.Object, "spec", "pipeline")
		kinds := map[string]int{}
		for _, st := range steps {
			inputRaw, _, _ := unstructured.NestedMap(st.(map[string]any), "input")
			var in configResources
			if err := configConvert(inputRaw, &in); err != nil {
				t.Fatal(err)
			}
			for _, r := range in.Resources {
				kinds[r.Base.GetAPIVersion()+" "+r.Base.GetKind()]++
			}
		}
		want := map[string]int{
			"aws.m.upbound.io/v1beta1 ProviderConfig":           1,
			"iam.aws.m.upbound.io/v1beta1 Role":                 2,
			"iam.aws.m.upbound.io/v1beta1 RolePolicyAttachment": 4,
			"eks.aws.m.upbound.io/v1beta1 Cluster":              1,
			"eks.aws.m.upbound.io/v1beta1 NodeGroup":            1,
			"eks.aws.m.upbound.io/v1beta1 ClusterAuth":          1,
		}
		if fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Errorf("composed kinds = %v, want %v", kinds, want)
		}
		return
	}
	t.Fatal("no Composition labelled aws")
}
