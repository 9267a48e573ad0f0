package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestBinEnv names the folder where `make test` builds the project's commands once for the whole
// run (go build -o $KUBEOPERA_TEST_BIN/ ./cmd/...); every suite runs those binaries.
const TestBinEnv = "KUBEOPERA_TEST_BIN"

var commands struct {
	mu    sync.Mutex
	dir   string
	built map[string]error
}

// Command returns the path of the project's command name (cmd/<name>), as `make build` builds
// it: the one `make test` built for the run ($KUBEOPERA_TEST_BIN), or else one built once per
// test binary.
func Command(name string) (string, error) {
	if dir := os.Getenv(TestBinEnv); dir != "" {
		bin := filepath.Join(dir, name)
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	commands.mu.Lock()
	defer commands.mu.Unlock()
	if commands.dir == "" {
		dir, err := os.MkdirTemp("", "kubeopera-commands-")
		if err != nil {
			return "", err
		}
		commands.dir, commands.built = dir, map[string]error{}
	}
	bin := filepath.Join(commands.dir, name)
	err, done := commands.built[name]
	if !done {
		build := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
		build.Dir = RepoRoot()
		if out, berr := build.CombinedOutput(); berr != nil {
			err = fmt.Errorf("failed to build %s: %v\n%s", name, berr, out)
		}
		commands.built[name] = err
	}
	return bin, err
}

// MustCommand is Command for test t, which fails when the command does not build.
func MustCommand(t testing.TB, name string) string {
	t.Helper()
	bin, err := Command(name)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Commands puts the named commands (Command) into dir, which a command finds its siblings in
// (bin/devenv starts bin/manager), and returns dir.
func Commands(dir string, names ...string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range names {
		bin, err := Command(name)
		if err != nil {
			return "", err
		}
		if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}
