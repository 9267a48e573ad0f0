// Package apiexports holds what the platform workspace root:kubeopera is made of: the generated
// APIResourceSchemas and APIExports (resources/, produced by `make apiexports`) and the hand-written
// WorkspaceType, endpoint slices and RBAC (bootstrap/). workspaces.Bootstrap applies them.
package apiexports

import "embed"

// FS holds resources/*.yaml and bootstrap/*.yaml.
//
//go:embed resources/*.yaml bootstrap/*.yaml
var FS embed.FS
