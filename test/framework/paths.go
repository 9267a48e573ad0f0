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

// ToolsCharts returns the folder with the charts hack/build-tools.sh assembles or copies
// (_tools/charts), or $KUBEOPERA_TOOLS_CHARTS (build-tools.sh writes there when it is set).
func ToolsCharts() string {
	if dir := os.Getenv("KUBEOPERA_TOOLS_CHARTS"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "_tools", "charts")
}

// VClusterChart returns vCluster's own chart as hack/build-tools.sh copies it from the vCluster
// module the tools pin (_tools/charts/vcluster): what the tests and `make run` install.
func VClusterChart() string {
	return filepath.Join(ToolsCharts(), "vcluster")
}

// FluxChart returns the local Flux chart hack/build-tools.sh assembles (_tools/charts/flux2):
// the project's templates (charts/flux2) with the CRDs of Flux's controllers.
func FluxChart() string {
	return filepath.Join(ToolsCharts(), "flux2")
}

// SealedSecretsChart returns the sealed-secrets controller's own chart as hack/build-tools.sh
// copies it from the module the tools pin (_tools/charts/sealed-secrets).
func SealedSecretsChart() string {
	return filepath.Join(ToolsCharts(), "sealed-secrets")
}
