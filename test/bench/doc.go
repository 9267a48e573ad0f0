// Package bench holds `make bench`: BenchmarkFanIn runs the manager binary (cmd/manager, with
// the product's kcp and backend identities) against a real kcp and a real backend and measures
// it as the number of bound tenant workspaces grows. It is never part of `make test`: the
// package's tests are pure functions, and the benchmark skips under -short.
//
// The scenario, once per run: a warm-up of BENCH_WARMUP workspaces (default 5), not counted;
// then for each N of BENCH_WORKSPACES (default 10,100,500; cumulative totals) it creates the
// missing workspaces of type kubeopera-tenant, each with one Tenant, the Tenants at BENCH_RATE
// per second (default 2; see settings.rate), plays each one's vCluster (test/sim)
// BENCH_VCLUSTER_DELAY (default 15 s) after its release is deployed, as a real vCluster writes
// its kubeconfig only once its Pod runs, waits until all are Ready and the manager's heap holds
// still, and records:
//
//   - heapBytesPerWorkspace, goroutinesPerWorkspace: the slope of the manager's heap after GC and
//     of its goroutines from the previous step's reading (the post-warm-up one for the first N);
//   - crToBackendNamespace, crToRelease: Tenant create request sent -> its host namespace, and
//     Helm's first release record, seen by the bench's backend watches (p50, p99, nearest rank,
//     over the Tenants created at that step);
//   - backendToStatus: the vCluster actor starts writing its kubeconfig Secret -> the Tenant seen
//     Ready=True by the bench's wildcard Tenant watch (the export's virtual workspace, as the
//     manager watches);
//   - floor: the create -> namespace time of a plain client (floorClient) running beside the
//     manager on the same Tenants, at the same time, as the manager's backend identity with its
//     rate limits: it watches Tenants as the manager does and creates one namespace of its own
//     for each (deleted again at the step's end); ratioP99 = crToBackendNamespace p99 / floor
//     p99;
//   - kcpRequestsPerTenant, backendRequestsPerTenant, passesPerTenant: the manager's requests
//     (client-go's rest_client_requests_total, by host) and Tenant reconciles from the step's
//     first create until all were Ready, divided by the Tenants; queueWaitP99Ms: the Tenant
//     workqueue's wait p99 over that window (bucket upper bound); activeWorkersPeak: the most
//     Tenant workers busy at once (controller_runtime_active_workers, sampled every 200 ms);
//   - kcpWatchConnections (the manager's kubeopera_kcp_open_watches) and idleWritesPerMinute
//     (its POST, PUT, PATCH and DELETE requests to kcp and the backend over 60 s without change);
//   - coldStartSeconds: the manager restarted with everything bound -> it has caught up: every
//     workspace engaged, every Tenant reconciled or, settled, its drift check scheduled on its
//     interval (coldStartDeferred counts those), nothing due in the queue (see coldStart);
//   - managerErrorLogLines: error-level lines the manager logged so far.
//
// It prints a table and writes bench/results/latest.json, latest.png and the manager's heap
// profile per step (heap-<N>.pb.gz, not committed). BENCH_RESULTS_DIR writes elsewhere,
// BENCH_MANAGER_BIN runs a prebuilt manager instead of building ./cmd/manager, and BENCH_KEEP=1
// keeps the servers' and the manager's logs. Try it small first: BENCH_WORKSPACES=3,6 make bench.
package bench
