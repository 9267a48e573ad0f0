package flavors

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
)

type option func(*platformv1alpha1.ProviderMachineFlavor)

func gpu(model string) option {
	return func(f *platformv1alpha1.ProviderMachineFlavor) { f.Spec.Capabilities.GPUModelName = ptr.To(model) }
}

func unavailable(f *platformv1alpha1.ProviderMachineFlavor) { f.Spec.Available = false }

func provider(p string) option {
	return func(f *platformv1alpha1.ProviderMachineFlavor) { f.Spec.ProviderRef.Type = p }
}

func zones(z ...string) option {
	return func(f *platformv1alpha1.ProviderMachineFlavor) { f.Spec.AvailableZones = z }
}

func providerFlavor(name string) option {
	return func(f *platformv1alpha1.ProviderMachineFlavor) { f.Spec.Flavor = name }
}

// flavor is an available OTC flavor named name (spec.flavor too) offered in every zone.
func flavor(name string, vcpu int32, memory string, opts ...option) platformv1alpha1.ProviderMachineFlavor {
	f := platformv1alpha1.ProviderMachineFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: platformv1alpha1.ProviderMachineFlavorSpec{
			Available:   true,
			ProviderRef: platformv1alpha1.ProviderRef{Type: "OTC"},
			Flavor:      name,
			Capabilities: platformv1alpha1.Capabilities{
				VCPUCount:  vcpu,
				MemorySize: resource.MustParse(memory),
			},
		},
	}
	for _, o := range opts {
		o(&f)
	}
	return f
}

func request(zone string, vcpu int32, memory string, gpuModel ...string) Request {
	r := Request{Provider: "OTC", Zone: zone, Capabilities: platformv1alpha1.Capabilities{
		VCPUCount: vcpu, MemorySize: resource.MustParse(memory),
	}}
	if len(gpuModel) > 0 {
		r.Capabilities.GPUModelName = ptr.To(gpuModel[0])
	}
	return r
}

// outcome is what a test compares: the best flavor's name and the other two Result fields.
type outcome struct {
	Best     string
	Matching []string
	Missing  string
}

func summarize(r Result) outcome {
	o := outcome{Matching: r.Matching, Missing: r.Missing}
	if r.Best != nil {
		o.Best = r.Best.Name
	}
	return o
}

func TestMatch(t *testing.T) {
	cases := map[string]struct {
		reason  string
		catalog []platformv1alpha1.ProviderMachineFlavor
		req     Request
		want    outcome
	}{
		"Unavailable": {
			reason:  "A flavor whose spec.available is false is never chosen, however well it fits.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{flavor("a", 4, "8Gi", unavailable), flavor("b", 8, "16Gi")},
			req:     request("", 4, "8Gi"),
			want:    outcome{Best: "b", Matching: []string{"b"}},
		},
		"ProviderCaseInsensitive": {
			reason: "The provider type is compared case-insensitively; other providers' flavors are ignored.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("aws", 2, "4Gi", provider("AWS")), flavor("otc", 4, "8Gi", provider("otc")),
			},
			req:  request("", 2, "4Gi"),
			want: outcome{Best: "otc", Matching: []string{"otc"}},
		},
		"EmptyProvider": {
			reason:  "A request without a provider matches nothing, even a flavor without a provider type.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{flavor("a", 4, "8Gi", provider(""))},
			req:     Request{Capabilities: request("", 4, "8Gi").Capabilities},
			want:    outcome{Missing: "no flavor can be chosen: the request names no provider"},
		},
		"ZoneListed": {
			reason: "A named zone keeps the flavors listing it (case-insensitively) and those listing no zone.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("a-elsewhere", 4, "8Gi", zones("eu-de-02")),
				flavor("b-listed", 4, "8Gi", zones("eu-de-01", "EU-DE-03")),
				flavor("c-everywhere", 4, "8Gi"),
				flavor("d-upper", 4, "8Gi", zones("EU-DE-01")),
			},
			req:  request("eu-de-01", 4, "8Gi"),
			want: outcome{Best: "b-listed", Matching: []string{"b-listed", "c-everywhere", "d-upper"}},
		},
		"ZoneEmptyIsAny": {
			reason:  "An empty zone lets the provider place the machine: every flavor passes the zone clause.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{flavor("a", 4, "8Gi", zones("eu-nl-01")), flavor("b", 4, "8Gi")},
			req:     request("", 4, "8Gi"),
			want:    outcome{Best: "a", Matching: []string{"a", "b"}},
		},
		"ZoneRandomIsAny": {
			reason:  `"random" (any case) is the same as an empty zone.`,
			catalog: []platformv1alpha1.ProviderMachineFlavor{flavor("a", 4, "8Gi", zones("eu-nl-01")), flavor("b", 4, "8Gi")},
			req:     request("Random", 4, "8Gi"),
			want:    outcome{Best: "a", Matching: []string{"a", "b"}},
		},
		"VCPUs": {
			reason:  "A flavor needs at least the requested vCPUs; exactly as many is enough.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{flavor("small", 2, "16Gi"), flavor("exact", 4, "16Gi")},
			req:     request("", 4, "8Gi"),
			want:    outcome{Best: "exact", Matching: []string{"exact"}},
		},
		"MemoryAsQuantity": {
			reason: "Memory compares as quantities: 8192Mi satisfies 8Gi, 7Gi does not.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("short", 4, "7Gi"), flavor("mebibytes", 4, "8192Mi"),
			},
			req:  request("", 4, "8Gi"),
			want: outcome{Best: "mebibytes", Matching: []string{"mebibytes"}},
		},
		"GPUModelCaseInsensitive": {
			reason: "A GPU request takes only flavors with that model (case-insensitively), not other models nor GPU-less ones.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("cpu", 8, "16Gi"), flavor("t4", 8, "32Gi", gpu("T4")), flavor("rtx", 8, "64Gi", gpu("rtx3080")),
			},
			req:  request("", 4, "8Gi", "RTX3080"),
			want: outcome{Best: "rtx", Matching: []string{"rtx"}},
		},
		"NoGPUWasted": {
			reason: "A request without a GPU never gets a GPU flavor, even a smaller one.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("a-gpu", 4, "8Gi", gpu("T4")), flavor("b-cpu", 8, "16Gi"),
			},
			req:  request("", 4, "8Gi"),
			want: outcome{Best: "b-cpu", Matching: []string{"b-cpu"}},
		},
		"EmptyGPUNameIsNoGPU": {
			reason: "An empty gpuModelName means no GPU, on the request and on the flavor.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("empty", 4, "8Gi", gpu("")), flavor("t4", 4, "8Gi", gpu("T4")),
			},
			req:  request("", 4, "8Gi", ""),
			want: outcome{Best: "empty", Matching: []string{"empty"}},
		},
		"FewestVCPUsFirst": {
			reason: "Fewer vCPUs wins over less memory.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("m-wide", 8, "8Gi"), flavor("z-deep", 4, "32Gi"),
			},
			req:  request("", 4, "8Gi"),
			want: outcome{Best: "z-deep", Matching: []string{"z-deep", "m-wide"}},
		},
		"LeastMemoryThen": {
			reason: "Among equal vCPUs the least memory wins, comparing quantities (16Gi < 17179869185).",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("a-bytes", 4, "17179869185"), flavor("b-big", 4, "32Gi"), flavor("c-small", 4, "16Gi"),
			},
			req:  request("", 4, "8Gi"),
			want: outcome{Best: "c-small", Matching: []string{"c-small", "a-bytes", "b-big"}},
		},
		"NameBreaksTies": {
			reason: "Equal vCPUs and memory (8Gi = 8192Mi) are ordered by metadata.name.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("otc-s3-xlarge-2", 4, "8Gi"), flavor("otc-c4-xlarge-2", 4, "8192Mi"),
			},
			req:  request("", 4, "8Gi"),
			want: outcome{Best: "otc-c4-xlarge-2", Matching: []string{"otc-c4-xlarge-2", "otc-s3-xlarge-2"}},
		},
		"ProviderFlavorBreaksNameTies": {
			reason: "Repeated names (catalogs merged from several sources) fall back to spec.flavor; Matching lists a name once.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("same", 4, "8Gi", providerFlavor("y.large")), flavor("same", 4, "8Gi", providerFlavor("x.large")),
				flavor("other", 8, "8Gi"),
			},
			req:  request("", 4, "8Gi"),
			want: outcome{Best: "same", Matching: []string{"same", "other"}},
		},
		"MissingNoProviderFlavors": {
			reason:  "The message says when the catalog has nothing for the provider.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{flavor("a", 4, "8Gi", provider("AWS"))},
			req:     request("eu-de-01", 4, "8Gi"),
			want:    outcome{Missing: "no available OTC flavor in zone eu-de-01 has at least 4 vCPUs, 8Gi memory and no GPU (the catalog has no OTC flavors)"},
		},
		"MissingAllUnavailable": {
			reason:  "The message says when every flavor of the provider is marked unavailable.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{flavor("a", 4, "8Gi", unavailable), flavor("b", 8, "8Gi", unavailable)},
			req:     request("", 4, "8Gi"),
			want:    outcome{Missing: "no available OTC flavor in any zone has at least 4 vCPUs, 8Gi memory and no GPU (all 2 OTC flavors are marked unavailable)"},
		},
		"MissingZone": {
			reason: "The message lists the zones the available flavors are offered in.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("a", 4, "8Gi", zones("eu-nl-02", "eu-nl-01")), flavor("b", 8, "8Gi", zones("eu-nl-01", "eu-nl-03")),
				flavor("c", 8, "8Gi", unavailable, zones("eu-de-01")),
			},
			req:  request("eu-de-01", 4, "8Gi"),
			want: outcome{Missing: "no available OTC flavor in zone eu-de-01 has at least 4 vCPUs, 8Gi memory and no GPU (available flavors are offered in eu-nl-01, eu-nl-02, eu-nl-03)"},
		},
		"MissingGPUModel": {
			reason: "The seed's RTX3080 on a catalog of other GPUs: the message lists the models on offer.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("p", 8, "64Gi", gpu("V100")), flavor("t", 8, "32Gi", gpu("T4")), flavor("t2", 16, "64Gi", gpu("T4")),
				flavor("cpu", 64, "512Gi"),
			},
			req:  request("eu-de-01", 4, "8Gi", "RTX3080"),
			want: outcome{Missing: "no available OTC flavor in zone eu-de-01 has at least 4 vCPUs, 8Gi memory and GPU RTX3080 (GPU models offered: T4, V100)"},
		},
		"MissingAnyGPU": {
			reason:  "The message says when no flavor in reach has a GPU at all.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{flavor("cpu", 64, "512Gi"), flavor("t", 8, "32Gi", gpu("T4"), zones("eu-nl-01"))},
			req:     request("eu-de-01", 4, "8Gi", "RTX3080"),
			want:    outcome{Missing: "no available OTC flavor in zone eu-de-01 has at least 4 vCPUs, 8Gi memory and GPU RTX3080 (none has a GPU)"},
		},
		"MissingCapacityGPULess": {
			reason: "Too big a request: the message names the largest GPU-less flavor, ignoring GPU flavors.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("otc-s3-4xlarge-2", 16, "32Gi", providerFlavor("s3.4xlarge.2")), flavor("small", 2, "4Gi"),
				flavor("gpu", 64, "512Gi", gpu("V100")),
			},
			req:  request("", 32, "64Gi"),
			want: outcome{Missing: "no available OTC flavor in any zone has at least 32 vCPUs, 64Gi memory and no GPU (largest GPU-less: otc-s3-4xlarge-2 (s3.4xlarge.2) with 16 vCPUs and 32Gi memory)"},
		},
		"MissingCapacitySplit": {
			reason: "When the flavor with most vCPUs is not the one with most memory, the message names both.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("wide", 64, "128Gi", gpu("T4")), flavor("deep", 8, "256Gi", gpu("t4")), flavor("cpu", 96, "1Ti"),
			},
			req:  request("", 16, "512Gi", "T4"),
			want: outcome{Missing: "no available OTC flavor in any zone has at least 16 vCPUs, 512Gi memory and GPU T4 (largest with GPU T4: wide (wide) with 64 vCPUs and 128Gi memory; most memory with GPU T4: deep (deep) with 8 vCPUs and 256Gi memory)"},
		},
		"MissingBoundedLists": {
			reason: "Lists in the message are bounded so it fits a condition message.",
			catalog: func() []platformv1alpha1.ProviderMachineFlavor {
				var c []platformv1alpha1.ProviderMachineFlavor
				for _, z := range []string{"z01", "z02", "z03", "z04", "z05", "z06", "z07", "z08", "z09", "z10"} {
					c = append(c, flavor("f-"+z, 4, "8Gi", zones(z)))
				}
				return c
			}(),
			req:  request("eu-de-01", 4, "8Gi"),
			want: outcome{Missing: "no available OTC flavor in zone eu-de-01 has at least 4 vCPUs, 8Gi memory and no GPU (available flavors are offered in z01, z02, z03, z04, z05, z06, z07, z08 and 2 more)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := summarize(Match(tc.catalog, tc.req))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nMatch(...): -want, +got:\n%s", tc.reason, diff)
			}
			reversed := slices.Clone(tc.catalog)
			slices.Reverse(reversed)
			if diff := cmp.Diff(got, summarize(Match(reversed, tc.req))); diff != "" {
				t.Errorf("%s\nMatch(...) depends on the catalog's order: -forward, +reversed:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestMatchProviderFlavorBreaksNameTies(t *testing.T) {
	catalog := []platformv1alpha1.ProviderMachineFlavor{
		flavor("same", 4, "8Gi", providerFlavor("y.large")), flavor("same", 4, "8Gi", providerFlavor("x.large")),
	}
	r := Match(catalog, request("", 4, "8Gi"))
	if r.Best == nil || r.Best.Spec.Flavor != "x.large" {
		t.Errorf("Match(...).Best = %+v, want the registration of x.large (same name, spec.flavor first)", r.Best)
	}
}

func TestMatchReturnsACopy(t *testing.T) {
	catalog := []platformv1alpha1.ProviderMachineFlavor{flavor("a", 4, "8Gi", zones("eu-de-01"))}
	r := Match(catalog, request("eu-de-01", 4, "8Gi"))
	if r.Best == nil {
		t.Fatalf("Match(...).Best = nil, want a; Missing = %q", r.Missing)
	}
	r.Best.Spec.AvailableZones[0] = "changed"
	r.Best.Name = "changed"
	if catalog[0].Name != "a" || catalog[0].Spec.AvailableZones[0] != "eu-de-01" {
		t.Errorf("changing Match(...).Best changed the catalog: %+v", catalog[0])
	}
}

func TestOverride(t *testing.T) {
	cases := map[string]struct {
		reason   string
		catalog  []platformv1alpha1.ProviderMachineFlavor
		provider string
		flavor   string
		zone     string
		want     string // metadata.name of the returned flavor, when no error
		wantErr  error
		wantMsg  string
	}{
		"Found": {
			reason:   "An available flavor of the provider in the zone is returned, capabilities unchecked.",
			catalog:  []platformv1alpha1.ProviderMachineFlavor{flavor("otc-s3-xlarge-4", 4, "16Gi", providerFlavor("s3.xlarge.4"), zones("eu-de-01"))},
			provider: "otc", flavor: "s3.xlarge.4", zone: "eu-de-01",
			want: "otc-s3-xlarge-4",
		},
		"LooksUpSpecFlavorNotName": {
			reason:   "nodeFlavor is the provider's flavor name (spec.flavor), not the object's name.",
			catalog:  []platformv1alpha1.ProviderMachineFlavor{flavor("otc-s3-xlarge-4", 4, "16Gi", providerFlavor("s3.xlarge.4"))},
			provider: "OTC", flavor: "otc-s3-xlarge-4", zone: "random",
			wantErr: ErrFlavorNotFound,
			wantMsg: `nodeFlavor "otc-s3-xlarge-4": no OTC ProviderMachineFlavor has spec.flavor "otc-s3-xlarge-4": flavor not in the catalog`,
		},
		"OtherProvider": {
			reason:   "A flavor registered for another provider is not found.",
			catalog:  []platformv1alpha1.ProviderMachineFlavor{flavor("aws", 4, "16Gi", providerFlavor("m5.xlarge"), provider("AWS"))},
			provider: "OTC", flavor: "m5.xlarge",
			wantErr: ErrFlavorNotFound,
			wantMsg: `nodeFlavor "m5.xlarge": no OTC ProviderMachineFlavor has spec.flavor "m5.xlarge": flavor not in the catalog`,
		},
		"Unavailable": {
			reason:   "A registered flavor marked unavailable is refused.",
			catalog:  []platformv1alpha1.ProviderMachineFlavor{flavor("otc-p2s", 8, "64Gi", providerFlavor("p2s.2xlarge.8"), unavailable)},
			provider: "OTC", flavor: "p2s.2xlarge.8", zone: "eu-de-01",
			wantErr: ErrFlavorUnavailable,
			wantMsg: `nodeFlavor "p2s.2xlarge.8": OTC flavor otc-p2s is marked unavailable: flavor not available`,
		},
		"NotInZone": {
			reason: "An available flavor not offered in the zone is refused; the error lists where it is offered.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("otc-c4", 4, "8Gi", providerFlavor("c4.xlarge.2"), zones("eu-nl-02", "eu-nl-01")),
				flavor("otc-c4-old", 4, "8Gi", providerFlavor("c4.xlarge.2"), zones("eu-de-01"), unavailable),
			},
			provider: "OTC", flavor: "c4.xlarge.2", zone: "eu-de-01",
			wantErr: ErrFlavorNotInZone,
			wantMsg: `nodeFlavor "c4.xlarge.2": OTC flavor otc-c4 is not offered in zone eu-de-01 (offered in eu-nl-01, eu-nl-02): flavor not offered in the zone`,
		},
		"AnyZone": {
			reason:   "An empty zone accepts a flavor whatever zones it lists.",
			catalog:  []platformv1alpha1.ProviderMachineFlavor{flavor("otc-c4", 4, "8Gi", providerFlavor("c4.xlarge.2"), zones("eu-nl-01"))},
			provider: "OTC", flavor: "c4.xlarge.2",
			want: "otc-c4",
		},
		"FirstFitByName": {
			reason: "Of several registrations of one flavor the first available one in the zone, by name, wins.",
			catalog: []platformv1alpha1.ProviderMachineFlavor{
				flavor("c", 4, "8Gi", providerFlavor("s3.xlarge.2")),
				flavor("a", 4, "8Gi", providerFlavor("s3.xlarge.2"), unavailable),
				flavor("b", 4, "8Gi", providerFlavor("s3.xlarge.2"), zones("eu-de-01")),
			},
			provider: "OTC", flavor: "s3.xlarge.2", zone: "eu-de-01",
			want: "b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Override(tc.catalog, tc.provider, tc.flavor, tc.zone)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("%s\nOverride(...) error = %v, want one wrapping %v", tc.reason, err, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantMsg, err.Error()); diff != "" {
					t.Errorf("%s\nOverride(...) error: -want, +got:\n%s", tc.reason, diff)
				}
				if got != nil {
					t.Errorf("%s\nOverride(...) = %s with an error, want nil", tc.reason, got.Name)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nOverride(...) error = %v, want none", tc.reason, err)
			}
			if got.Name != tc.want {
				t.Errorf("%s\nOverride(...) = %s, want %s", tc.reason, got.Name, tc.want)
			}
		})
	}
}
