package framework

import (
	"os"
	"path/filepath"
	"runtime"
)

// RepoRoot returns the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ToolsBin returns the folder with the built tools (_tools/bin), or $KUBEOPERA_TOOLS_BIN.
func ToolsBin() string {
	if dir := os.Getenv("KUBEOPERA_TOOLS_BIN"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "_tools", "bin")
}

// VClusterChart returns vCluster's own chart as hack/build-tools.sh copies it from the vCluster
// module the tools pin (_tools/charts/vcluster): what the tests and `make run` install.
func VClusterChart() string {
	return filepath.Join(RepoRoot(), "_tools", "charts", "vcluster")
}
