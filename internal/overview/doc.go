// Package overview serves the platform admins' fleet overview: every HostCluster of every bound
// workspace and the self-registered cluster the platform runs on, as a server-rendered page
// (summary cards, a sortable and filterable table, a treemap, a per-cluster health breakdown), a
// JSON endpoint with the same data and Prometheus gauges of the fleet (NewCollector). It reads
// through a Source; the manager's Source reads the fleet's shared caches and the platform
// workspace.
//
// # Routes
//
//	GET /                                          the page (cards, table, treemap)
//	GET /fragments/fleet                           the cards and the table alone, for the page's updates
//	GET /clusters/{workspace}/{namespace}/{name}   a cluster's facts and health breakdown
//	GET /v1/fleet                              the fleet as JSON
//	GET /v1/fleet/clusters/{workspace}/{namespace}/{name}   one cluster as JSON
//	GET /assets/...                                app.js, style.css, vendor/echarts.min.js
//	GET, POST /login; POST /logout                 Secure only: the browser's token cookie
//
// A cluster without a namespace (a self-registered one) has namespace "_" in paths. The page,
// the fragment and the JSON take the same query: q (a case-insensitive substring of workspace,
// namespace, name, clusterID, phase, provider, region or version), band (green, amber, red or
// unknown), sort (workspace, name, phase, health, nodes, cpu, memory, cost, version, provider, region;
// default: workspace, then name) and dir (asc or desc). Unknown values sort last either way.
//
// # JSON
//
// GET /v1/fleet answers (the summary is the whole fleet's whatever the filter; clusters are
// the ones the query keeps, in its order; fields without a value are left out or null):
//
//	{
//	  "generatedAt": "2025-06-01T12:00:00Z",
//	  "summary": {
//	    "clusters": 3, "healthy": 1, "unreachable": 1, "nodesReady": 7, "nodesTotal": 8,
//	    "avgCPUPercent": 41.5, "avgMemoryPercent": null,
//	    "bands": {"green": 1, "amber": 1, "red": 0, "unknown": 1},
//	    "hostRegistered": true,
//	    "monthlyCost": [{"currency": "USD", "monthly": "231.26", "clusters": 1, "partial": true}]
//	  },
//	  "clusters": [{
//	    "workspace": "root:orgs:acme", "namespace": "infra", "name": "prod-eu",
//	    "clusterID": "prod-eu-1", "source": "connect_existing", "isHost": false,
//	    "phase": "Ready", "message": "...", "ready": true,
//	    "health": {"score": 92, "band": "green",
//	               "penalties": [{"reason": "PodsCrashLooping", "detail": "...", "points": "2.5"}]},
//	    "nodesReady": 3, "nodesTotal": 3, "cpuPercent": 41, "memoryPercent": 63,
//	    "usageSource": "MetricsAPI",
//	    "cost": {"monthly": "231.26", "currency": "USD", "pricedNodes": 3, "unpricedNodes": 0, "partial": false},
//	    "kubernetesVersion": "v1.33.1", "provider": "aws", "region": "eu-central-1",
//	    "observedAt": "2025-06-01T11:59:30Z", "note": "..."
//	  }, {
//	    "name": "edge", "phase": "Ready", "ready": false,
//	    "unreachable": true, "unreachableSince": "2025-06-01T11:49:30Z", ...
//	  }]
//	}
//
// healthy counts the clusters whose Ready condition is True (a registered host: read) and whose
// health band is green; an unreachable cluster (a HostCluster's status.inventory.unreachableSince
// set) has no health and counts in unreachable, never in healthy. The bands are the seed's: green
// 80 and above, amber 60-79, red below 60, unknown without a health score (not read yet, or
// unreachable). monthlyCost sums the clusters' cost estimates per currency (docs/fleet.md#cost).
// GET /v1/fleet/clusters/{workspace}/{namespace}/{name} answers one element of clusters, or
// 404 with {"error": "..."}.
//
// # Exposure
//
// Without Options.Secure the server speaks plain HTTP without authentication and New refuses
// any bind address but loopback: admins reach it with kubectl port-forward. With Secure it
// serves HTTPS and every request but /login, /logout and /assets/ passes controller-runtime's
// authentication and authorization filter (TokenReview and SubjectAccessReview on the backend
// cluster, verb get on the request's path: ClusterRole kubeopera-fleet-viewer in
// config/rbac/fleet-viewer.yaml). No path is under /api, /apis, /openapi, /version or the
// health checks: Kubernetes' default discovery roles let every authenticated identity get those.
// API clients send "Authorization: Bearer <token>"; a browser pastes a ServiceAccount token at
// /login, kept in an HttpOnly, Secure, SameSite=Strict cookie.
package overview
