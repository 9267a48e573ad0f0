package flavors

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
)

const otcSample = "../../config/samples/otc-flavors.yaml"

// loadSample reads every ProviderMachineFlavor of a multi-document YAML file, strictly: an unknown
// or duplicated field fails the test, and so does a field spelt in another case (vCpuCount), which
// encoding/json, under sigs.k8s.io/yaml, would accept silently.
func loadSample(t *testing.T, path string) []platformv1alpha1.ProviderMachineFlavor {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatalf("Failed to open %s: %v", path, err)
	}
	defer file.Close()

	var catalog []platformv1alpha1.ProviderMachineFlavor
	reader := utilyaml.NewYAMLReader(bufio.NewReader(file))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Failed to read document %d of %s: %v", doc, path, err)
		}
		if asJSON, err := yaml.YAMLToJSON(raw); err != nil {
			t.Fatalf("Document %d of %s is not YAML: %v", doc, path, err)
		} else if string(asJSON) == "null" {
			continue // comments only
		}
		var f platformv1alpha1.ProviderMachineFlavor
		if err := yaml.UnmarshalStrict(raw, &f); err != nil {
			t.Fatalf("Document %d of %s is not a ProviderMachineFlavor: %v", doc, path, err)
		}
		if field := droppedField(t, raw, &f); field != "" {
			t.Fatalf("Document %d of %s: field %s is not the API's spelling", doc, path, field)
		}
		catalog = append(catalog, f)
	}
	return catalog
}

// droppedField returns the path of the first field of raw that does not survive a round trip
// through the typed object under the same spelling, or "". A null field may vanish (omitempty).
func droppedField(t *testing.T, raw []byte, obj any) string {
	t.Helper()
	var in, out any
	asJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("Failed to convert YAML to JSON: %v", err)
	}
	typed, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("Failed to marshal %T: %v", obj, err)
	}
	if err := json.Unmarshal(asJSON, &in); err != nil {
		t.Fatalf("Failed to read JSON: %v", err)
	}
	if err := json.Unmarshal(typed, &out); err != nil {
		t.Fatalf("Failed to read JSON: %v", err)
	}
	return firstMissingKey(in, out, "")
}

func firstMissingKey(in, out any, path string) string {
	switch in := in.(type) {
	case map[string]any:
		outMap, _ := out.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(in)) {
			v := in[k]
			w, ok := outMap[k]
			if !ok && v != nil {
				return path + "." + k
			}
			if missing := firstMissingKey(v, w, path+"."+k); missing != "" {
				return missing
			}
		}
	case []any:
		outList, _ := out.([]any)
		for i, v := range in {
			if i >= len(outList) {
				return path
			}
			if missing := firstMissingKey(v, outList[i], path); missing != "" {
				return missing
			}
		}
	}
	return ""
}

func TestOTCSample(t *testing.T) {
	catalog := loadSample(t, otcSample)
	if n := len(catalog); n < 15 || n > 25 {
		t.Errorf("%s holds %d flavors, want 15 to 25", otcSample, n)
	}
	otcZones := map[string]bool{"eu-de-01": true, "eu-de-02": true, "eu-de-03": true, "eu-nl-01": true, "eu-nl-02": true, "eu-nl-03": true}
	seen := map[string]bool{}
	for _, f := range catalog {
		if f.APIVersion != platformv1alpha1.GroupVersion.String() || f.Kind != "ProviderMachineFlavor" {
			t.Errorf("%s: apiVersion/kind = %s/%s, want %s/ProviderMachineFlavor", f.Name, f.APIVersion, f.Kind, platformv1alpha1.GroupVersion)
		}
		for _, msg := range validation.IsDNS1123Subdomain(f.Name) {
			t.Errorf("%q is not a DNS-1123 name: %s", f.Name, msg)
		}
		if f.Namespace != "" {
			t.Errorf("%s: namespace %q set on a cluster-scoped kind", f.Name, f.Namespace)
		}
		if seen[f.Name] {
			t.Errorf("%s appears twice", f.Name)
		}
		seen[f.Name] = true
		if want := "otc-" + strings.ReplaceAll(f.Spec.Flavor, ".", "-"); f.Name != want {
			t.Errorf("%s: name does not follow spec.flavor %s, want %s", f.Name, f.Spec.Flavor, want)
		}
		if f.Spec.ProviderRef.Type != "OTC" || !f.Spec.Available {
			t.Errorf("%s: providerRef.type %q, available %t; want OTC and true", f.Name, f.Spec.ProviderRef.Type, f.Spec.Available)
		}
		if f.Spec.Capabilities.VCPUCount < 1 || f.Spec.Capabilities.MemorySize.Sign() <= 0 {
			t.Errorf("%s: capabilities %+v, want vCPUs and memory", f.Name, f.Spec.Capabilities)
		}
		for _, z := range f.Spec.AvailableZones {
			if !otcZones[z] {
				t.Errorf("%s: zone %q is not an OTC eu-de or eu-nl AZ", f.Name, z)
			}
		}
	}
}

// TestOTCSampleMatches pins what the sample catalog answers, the seed's demo request first.
func TestOTCSampleMatches(t *testing.T) {
	catalog := loadSample(t, otcSample)
	cases := map[string]struct {
		reason string
		req    Request
		want   string // best flavor's metadata.name
		first  []string
	}{
		"SeedDemo": {
			reason: "The seed's demo MachineCapabilities (4 vCPUs, 8Gi, no GPU) with nodeAvailableZone random: c4.xlarge.2 and " +
				"s3.xlarge.2 both fit exactly and the name breaks the tie; no GPU flavor is offered.",
			req:   request("random", 4, "8Gi"),
			want:  "otc-c4-xlarge-2",
			first: []string{"otc-c4-xlarge-2", "otc-s3-xlarge-2", "otc-c4-xlarge-4", "otc-s3-xlarge-4", "otc-m4-xlarge-8"},
		},
		"SeedDemoInZone": {
			reason: "The same request pinned to eu-de-01.",
			req:    request("eu-de-01", 4, "8Gi"),
			want:   "otc-c4-xlarge-2",
		},
		"SmallMachine": {
			reason: "2 vCPUs and 4Gi: the smallest general-purpose and compute flavors tie, the name decides.",
			req:    request("eu-nl-02", 2, "4Gi"),
			want:   "otc-c4-large-2",
		},
		"MemoryHeavy": {
			reason: "4 vCPUs and 32Gi: only memory-optimized m4.xlarge.8 has that memory at 4 vCPUs.",
			req:    request("", 4, "32Gi"),
			want:   "otc-m4-xlarge-8",
		},
		"InferenceGPU": {
			reason: "A T4 request gets the smallest Pi2 flavor.",
			req:    request("eu-de-02", 4, "8Gi", "t4"),
			want:   "otc-pi2-2xlarge-4",
		},
		"TrainingGPU": {
			reason: "A V100 request gets the smallest P2s flavor.",
			req:    request("", 4, "8Gi", "V100"),
			want:   "otc-p2s-2xlarge-8",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := Match(catalog, tc.req)
			if r.Best == nil {
				t.Fatalf("%s\nMatch(...) found nothing: %s", tc.reason, r.Missing)
			}
			if r.Best.Name != tc.want {
				t.Errorf("%s\nMatch(...).Best = %s, want %s (matching: %v)", tc.reason, r.Best.Name, tc.want, r.Matching)
			}
			if tc.first != nil {
				if diff := cmp.Diff(tc.first, r.Matching[:min(len(r.Matching), len(tc.first))]); diff != "" {
					t.Errorf("%s\nMatch(...).Matching starts: -want, +got:\n%s", tc.reason, diff)
				}
			}
			for _, n := range r.Matching {
				if tc.req.Capabilities.GPUModelName == nil && (strings.HasPrefix(n, "otc-p2s") || strings.HasPrefix(n, "otc-pi2")) {
					t.Errorf("%s\nMatch(...).Matching holds GPU flavor %s for a GPU-less request", tc.reason, n)
				}
			}
		})
	}

	t.Run("SeedGPUNotOffered", func(t *testing.T) {
		r := Match(catalog, request("eu-de-01", 4, "8Gi", "RTX3080"))
		want := "no available OTC flavor in zone eu-de-01 has at least 4 vCPUs, 8Gi memory and GPU RTX3080 (GPU models offered: T4, V100)"
		if r.Best != nil || r.Missing != want {
			t.Errorf("The seed's README request with an RTX3080: Match(...) = %v, %q; want nil, %q", r.Best, r.Missing, want)
		}
	})
}
