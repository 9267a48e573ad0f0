// Package bench holds `make bench`: BenchmarkFanIn runs the manager as a process against a real
// kcp and a real backend, grows the number of bound tenant workspaces (BENCH_WORKSPACES, default
// 10,100,500, cumulative) and records, per step, what the manager costs per workspace (heap,
// goroutines), how fast a Tenant reaches the backend and comes back Ready (timed by watches, not
// polling), the same latency of a plain client without the manager (the floor), the manager's
// open kcp watches, its writes while nothing changes and its cold start. It writes
// bench/results/latest.json and latest.png. It is never part of `make test`: the package has no
// test that needs a server.
package bench
