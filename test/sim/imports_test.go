package sim_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kubeopera/kubeopera/test/framework"
)

// TestNoProductPackageImportsSim: the simulation and the test helpers stay out of the product.
// Only tests, test/... and cmd/devenv (a development binary) may depend on test/sim or
// test/framework; any other package of the module that does, even through another package,
// fails here.
func TestNoProductPackageImportsSim(t *testing.T) {
	const module = "github.com/kubeopera/kubeopera/"
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...")
	cmd.Dir = framework.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		if strings.HasPrefix(pkg, module+"test/") || pkg == module+"cmd/devenv" {
			continue
		}
		checked[pkg] = true
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, module+"test/") {
				t.Errorf("%s depends on %s: product packages must not import the simulation or the test helpers", pkg, dep)
			}
		}
	}
	for _, pkg := range []string{"cmd/manager", "internal/manager", "controllers/hostcluster", "syncer"} {
		if !checked[module+pkg] {
			t.Errorf("%s was not checked: go list printed\n%s", pkg, out)
		}
	}
}
