// Package hostregistration records the backend cluster, the cluster the platform runs on, as the
// host (docs/fleet.md#self-registration): Inspect reads the facts from the
// cluster with the caller's own identity (no kubeconfig to type in), Register writes them as
// RegisteredCluster "host" in the platform workspace, idempotently. `manager register-host` is
// its command.
//
// It creates nothing else: no HostCluster (there is nothing to connect or bootstrap, the cluster
// already runs the platform), no backend namespace, no Secret.
package hostregistration
