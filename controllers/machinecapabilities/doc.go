// Package machinecapabilities lists, in a MachineCapabilities' status, the flavors of the
// platform's catalog (the copies in its workspace, see controllers/flavorcatalog) that satisfy it, for
// every provider of the catalog, best first (internal/flavors' rule). It watches the
// MachineCapabilities and the workspace's catalog: a flavor added, changed or removed re-matches
// every MachineCapabilities of the workspace.
package machinecapabilities
