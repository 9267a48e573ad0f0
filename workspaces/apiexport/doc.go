// Package apiexport serves every kcp workspace bound to one APIExport at a cost that does not grow
// per workspace beyond a map entry and the workspace's own objects in a shared cache.
//
// It replaces multicluster-provider's apiexport provider, which builds per engaged workspace a
// scoped cluster (client, HTTP client, REST mapper, event broadcasters) and, through
// multicluster-runtime's builder, one event handler per workspace on the shared informer (each
// event offered to every workspace's handler, a goroutine per engagement kept until the
// controller stops). Here, per endpoint URL of the export's APIExportEndpointSlice (kcp lists one
// per shard) there is one wildcard cache (multicluster-provider's), one writer client that routes
// each request to /clusters/<workspace> from its context, and one handler per informer that
// routes each event by its logical cluster to the owning controller's queue. Engaging a workspace
// adds it to a map; events of a workspace not engaged yet wait for it. Events are written by one
// sink for every workspace.
package apiexport
