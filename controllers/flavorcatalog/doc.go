// Package flavorcatalog publishes the platform's machine-flavor catalog to every tenant workspace.
//
// ProviderMachineFlavors are the platform's: platform admins keep them in the platform workspace
// (root:kubeopera), where bootstrap installs their CRD. Tenant workspaces bound to the
// platform.edgeconnect.eu export see the same kind through the export; the exports' maximal
// permission policy lets tenants only get, list and watch it, so they can read the catalog but
// never create or change a flavor. This controller keeps, in every bound workspace, a copy of each
// catalog flavor (labelled CatalogLabel), writing through the export's virtual workspace with the
// manager's identity, which the policy does not restrict: a flavor added, changed or removed in the
// platform workspace is added, changed or removed everywhere, and a new workspace gets the whole
// catalog when it is bound.
//
// Watches: the catalog (one informer on the platform workspace) and the copies (the export's
// shared wildcard cache, through apiexport.NewController). A request is (workspace, flavor name).
package flavorcatalog
