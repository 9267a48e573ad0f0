// Package flavors matches a MachineCapabilities request to the platform's catalog of
// ProviderMachineFlavors. It is pure: no client, no clock, no logging; callers list the catalog
// and write whatever they conclude (status.matchingFlavors, the FlavorMatched condition, the
// KubernetesCluster's status.flavor).
//
// # The rule
//
// A ProviderMachineFlavor satisfies a Request when all of these hold:
//
//  1. spec.available is true;
//  2. spec.providerRef.type equals Request.Provider, compared case-insensitively (an empty
//     Request.Provider matches nothing);
//  3. it can be placed in Request.Zone: it lists that zone in spec.availableZones (compared
//     case-insensitively), or it lists no zones at all (meaning every zone). An empty
//     Request.Zone or "random" (any case) means the provider picks the zone, so every flavor
//     passes this clause;
//  4. spec.capabilities.vCPUCount >= the requested vCPUCount;
//  5. spec.capabilities.memorySize >= the requested memorySize (compared as quantities, so 8Gi and
//     8192Mi are equal);
//  6. GPUs are not wasted: when the request names a GPU model, the flavor's gpuModelName equals it
//     (case-insensitively); when the request names none, the flavor must have none either. A GPU
//     flavor is therefore chosen only for a request that asks for that GPU. A nil or empty
//     gpuModelName means "no GPU" on both sides.
//
// Among the satisfying flavors the best is the smallest: fewest vCPUs, then least memory, then
// metadata.name in lexical order (then spec.flavor, should names repeat), so the answer is
// deterministic whatever order the catalog was listed in. Result.Matching lists every satisfying
// flavor's metadata.name in that same order, best first, each name once.
//
// When nothing satisfies the request, Result.Missing says in a sentence which part of the
// request could not be met and what the closest offer was, for a tenant-facing condition message.
//
// # Overrides
//
// KubernetesCluster.spec.nodeFlavor names a provider flavor (spec.flavor, e.g. s3.xlarge.4)
// directly. Override resolves it against the same catalog: the flavor must be registered for the
// provider, available, and placeable in the zone (same zone clause as above); capabilities are
// not checked, that is the point of an override. Its errors wrap ErrFlavorNotFound,
// ErrFlavorUnavailable or ErrFlavorNotInZone so callers can tell them apart.
package flavors
