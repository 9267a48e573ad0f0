package flavors

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
)

// AnyZone is the zone value that lets the provider place machines wherever it has capacity
// (KubernetesCluster.spec.nodeAvailableZone: random). An empty zone means the same.
const AnyZone = "random"

// maxListed bounds the lists quoted in Result.Missing, which ends up in a condition message.
const maxListed = 8

// Errors wrapped by Override; test with errors.Is.
var (
	// ErrFlavorNotFound: no ProviderMachineFlavor of the provider has that spec.flavor.
	ErrFlavorNotFound = errors.New("flavor not in the catalog")
	// ErrFlavorUnavailable: the flavor is registered but spec.available is false.
	ErrFlavorUnavailable = errors.New("flavor not available")
	// ErrFlavorNotInZone: the flavor is available but not offered in the requested zone.
	ErrFlavorNotInZone = errors.New("flavor not offered in the zone")
)

// Request is what a KubernetesCluster asks of the catalog.
type Request struct {
	// Provider is the KubernetesCluster's spec.providerRef.type, e.g. OTC.
	Provider string
	// Zone is the workers' zone, e.g. eu-de-01; "" or "random" accepts any zone.
	Zone string
	// Capabilities is the referenced MachineCapabilities' spec.
	Capabilities platformv1alpha1.Capabilities
}

// Result is the catalog's answer to a Request.
type Result struct {
	// Best is a copy of the smallest satisfying flavor; nil when none satisfies the request.
	Best *platformv1alpha1.ProviderMachineFlavor
	// Matching holds the metadata.name of every satisfying flavor, best first, each name once
	// (status.matchingFlavors is a set); the caller bounds it to the API's 256 items.
	Matching []string
	// Missing says what could not be met when Best is nil; empty otherwise.
	Missing string
}

// Match applies the package's rule (see the package documentation) to the catalog. It does not
// modify the catalog; Result.Best is a deep copy.
func Match(catalog []platformv1alpha1.ProviderMachineFlavor, req Request) Result {
	var satisfying []*platformv1alpha1.ProviderMachineFlavor
	for i := range catalog {
		f := &catalog[i]
		if f.Spec.Available && ofProvider(f, req.Provider) && inZone(f, req.Zone) &&
			hasCapacity(f, req.Capabilities) && gpuFits(f, req.Capabilities) {
			satisfying = append(satisfying, f)
		}
	}
	if len(satisfying) == 0 {
		return Result{Missing: missing(catalog, req)}
	}
	slices.SortStableFunc(satisfying, smallestFirst)
	names := make([]string, 0, len(satisfying))
	for _, f := range satisfying {
		if !slices.Contains(names, f.Name) {
			names = append(names, f.Name)
		}
	}
	return Result{Best: satisfying[0].DeepCopy(), Matching: names}
}

// Override resolves KubernetesCluster.spec.nodeFlavor: the ProviderMachineFlavor of the provider
// whose spec.flavor is flavorName, available and placeable in zone ("" or "random": any zone).
// Capabilities are not compared. When several registrations carry the same spec.flavor the first
// fit by metadata.name wins. The error names the first clause no registration passed and wraps
// ErrFlavorNotFound, ErrFlavorUnavailable or ErrFlavorNotInZone.
func Override(catalog []platformv1alpha1.ProviderMachineFlavor, provider, flavorName, zone string) (*platformv1alpha1.ProviderMachineFlavor, error) {
	var registered []*platformv1alpha1.ProviderMachineFlavor
	for i := range catalog {
		f := &catalog[i]
		if ofProvider(f, provider) && f.Spec.Flavor == flavorName {
			registered = append(registered, f)
		}
	}
	if len(registered) == 0 {
		return nil, fmt.Errorf("nodeFlavor %q: no %s ProviderMachineFlavor has spec.flavor %q: %w",
			flavorName, provider, flavorName, ErrFlavorNotFound)
	}
	slices.SortStableFunc(registered, func(a, b *platformv1alpha1.ProviderMachineFlavor) int {
		return cmp.Compare(a.Name, b.Name)
	})

	var available []*platformv1alpha1.ProviderMachineFlavor
	for _, f := range registered {
		if f.Spec.Available {
			available = append(available, f)
		}
	}
	if len(available) == 0 {
		return nil, fmt.Errorf("nodeFlavor %q: %s flavor %s is marked unavailable: %w",
			flavorName, provider, names(registered), ErrFlavorUnavailable)
	}
	for _, f := range available {
		if inZone(f, zone) {
			return f.DeepCopy(), nil
		}
	}
	return nil, fmt.Errorf("nodeFlavor %q: %s flavor %s is not offered in zone %s (offered in %s): %w",
		flavorName, provider, names(available), zone, zoneList(available), ErrFlavorNotInZone)
}

// ofProvider: clause 2, the provider type case-insensitively; an empty provider matches nothing.
func ofProvider(f *platformv1alpha1.ProviderMachineFlavor, provider string) bool {
	return provider != "" && strings.EqualFold(f.Spec.ProviderRef.Type, provider)
}

// anyZone reports whether zone leaves the placement to the provider.
func anyZone(zone string) bool {
	return zone == "" || strings.EqualFold(zone, AnyZone)
}

// inZone: clause 3. A flavor without a zone list is offered everywhere.
func inZone(f *platformv1alpha1.ProviderMachineFlavor, zone string) bool {
	if anyZone(zone) || len(f.Spec.AvailableZones) == 0 {
		return true
	}
	return slices.ContainsFunc(f.Spec.AvailableZones, func(z string) bool { return strings.EqualFold(z, zone) })
}

// hasCapacity: clauses 4 and 5.
func hasCapacity(f *platformv1alpha1.ProviderMachineFlavor, want platformv1alpha1.Capabilities) bool {
	have := f.Spec.Capabilities
	return have.VCPUCount >= want.VCPUCount && have.MemorySize.Cmp(want.MemorySize) >= 0
}

// gpuFits: clause 6. No GPU requested means no GPU offered.
func gpuFits(f *platformv1alpha1.ProviderMachineFlavor, want platformv1alpha1.Capabilities) bool {
	return strings.EqualFold(gpuModel(f.Spec.Capabilities), gpuModel(want))
}

// gpuModel is the GPU model, "" for none (nil and empty alike).
func gpuModel(c platformv1alpha1.Capabilities) string {
	if c.GPUModelName == nil {
		return ""
	}
	return strings.TrimSpace(*c.GPUModelName)
}

// smallestFirst orders by vCPUs, memory, metadata.name and spec.flavor, ascending.
func smallestFirst(a, b *platformv1alpha1.ProviderMachineFlavor) int {
	ac, bc := a.Spec.Capabilities, b.Spec.Capabilities
	return cmp.Or(
		cmp.Compare(ac.VCPUCount, bc.VCPUCount),
		ac.MemorySize.Cmp(bc.MemorySize),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Spec.Flavor, b.Spec.Flavor),
	)
}

// missing explains why nothing satisfied req: what was asked, then the closest offer.
func missing(catalog []platformv1alpha1.ProviderMachineFlavor, req Request) string {
	if req.Provider == "" {
		return "no flavor can be chosen: the request names no provider"
	}
	where := "in any zone"
	if !anyZone(req.Zone) {
		where = "in zone " + req.Zone
	}
	want := req.Capabilities
	needs := fmt.Sprintf("at least %d vCPUs, %s memory and no GPU", want.VCPUCount, want.MemorySize.String())
	if model := gpuModel(want); model != "" {
		needs = fmt.Sprintf("at least %d vCPUs, %s memory and GPU %s", want.VCPUCount, want.MemorySize.String(), model)
	}
	return fmt.Sprintf("no available %s flavor %s has %s (%s)", req.Provider, where, needs, closest(catalog, req))
}

// closest names the first clause that emptied the candidate list and what was left before it.
func closest(catalog []platformv1alpha1.ProviderMachineFlavor, req Request) string {
	var ofProv, available, placed []*platformv1alpha1.ProviderMachineFlavor
	for i := range catalog {
		f := &catalog[i]
		if !ofProvider(f, req.Provider) {
			continue
		}
		ofProv = append(ofProv, f)
		if !f.Spec.Available {
			continue
		}
		available = append(available, f)
		if inZone(f, req.Zone) {
			placed = append(placed, f)
		}
	}
	switch {
	case len(ofProv) == 0:
		return fmt.Sprintf("the catalog has no %s flavors", req.Provider)
	case len(available) == 0:
		return fmt.Sprintf("all %d %s flavors are marked unavailable", len(ofProv), req.Provider)
	case len(placed) == 0:
		return "available flavors are offered in " + zoneList(available)
	}

	var sameGPU []*platformv1alpha1.ProviderMachineFlavor
	for _, f := range placed {
		if gpuFits(f, req.Capabilities) {
			sameGPU = append(sameGPU, f)
		}
	}
	model := gpuModel(req.Capabilities)
	kind := "GPU-less"
	if model != "" {
		kind = "with GPU " + model
	}
	if len(sameGPU) == 0 {
		// Only reachable when a GPU was asked for: a GPU-less request is fitted by GPU-less flavors.
		var models []string
		for _, f := range placed {
			if m := gpuModel(f.Spec.Capabilities); m != "" && !slices.Contains(models, m) {
				models = append(models, m)
			}
		}
		if len(models) == 0 {
			return "none has a GPU"
		}
		slices.Sort(models)
		return "GPU models offered: " + bounded(models)
	}

	mostCPU := slices.MaxFunc(sameGPU, func(a, b *platformv1alpha1.ProviderMachineFlavor) int {
		return cmp.Or(cmp.Compare(a.Spec.Capabilities.VCPUCount, b.Spec.Capabilities.VCPUCount),
			a.Spec.Capabilities.MemorySize.Cmp(b.Spec.Capabilities.MemorySize), cmp.Compare(b.Name, a.Name))
	})
	mostMemory := slices.MaxFunc(sameGPU, func(a, b *platformv1alpha1.ProviderMachineFlavor) int {
		return cmp.Or(a.Spec.Capabilities.MemorySize.Cmp(b.Spec.Capabilities.MemorySize),
			cmp.Compare(a.Spec.Capabilities.VCPUCount, b.Spec.Capabilities.VCPUCount), cmp.Compare(b.Name, a.Name))
	})
	out := fmt.Sprintf("largest %s: %s", kind, describe(mostCPU))
	if mostMemory != mostCPU {
		out += fmt.Sprintf("; most memory %s: %s", kind, describe(mostMemory))
	}
	return out
}

// describe renders a flavor for a message: name (provider flavor) with N vCPUs and M memory.
func describe(f *platformv1alpha1.ProviderMachineFlavor) string {
	return fmt.Sprintf("%s (%s) with %d vCPUs and %s memory", f.Name, f.Spec.Flavor,
		f.Spec.Capabilities.VCPUCount, f.Spec.Capabilities.MemorySize.String())
}

// names lists the flavors' metadata.name.
func names(fs []*platformv1alpha1.ProviderMachineFlavor) string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return bounded(out)
}

// zoneList is the sorted union of the flavors' zones; a flavor without a list offers every zone.
func zoneList(fs []*platformv1alpha1.ProviderMachineFlavor) string {
	var zones []string
	for _, f := range fs {
		if len(f.Spec.AvailableZones) == 0 {
			return "every zone"
		}
		for _, z := range f.Spec.AvailableZones {
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
	}
	slices.Sort(zones)
	return bounded(zones)
}

// bounded joins at most maxListed items and says how many more there were.
func bounded(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxListed], ", "), len(items)-maxListed)
}
