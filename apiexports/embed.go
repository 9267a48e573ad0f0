// Package apiexports holds what the platform workspace root:kubeopera is made of: the generated
// APIResourceSchemas and APIExports (resources/, produced by `make apiexports`) and the hand-written
// WorkspaceType, endpoint slices and RBAC (bootstrap/), and the CRD of the platform's
// machine-flavor catalog (catalog/, a copy of config/crd/bases made by `make apiexports`: platform
// admins keep ProviderMachineFlavors in the platform workspace), and the CRDs of the platform's
// own, never exported API (platform/, copies of config/crd/platform: RegisteredCluster, the record
// of the backend cluster written by `manager register-host`). bootstrap.Bootstrap applies them.
package apiexports

import "embed"

// FS holds resources/*.yaml, bootstrap/*.yaml, catalog/*.yaml and platform/*.yaml.
//
//go:embed resources/*.yaml bootstrap/*.yaml catalog/*.yaml platform/*.yaml
var FS embed.FS
