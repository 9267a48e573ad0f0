package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// StartKCP starts a real kcp server in a temporary root directory and stops it when the test ends.
// Set KUBEOPERA_TEST_KCP_LOG=1 to see its logs.
func StartKCP(t testing.TB) *devenv.KCP {
	t.Helper()
	dir := t.TempDir()
	opts := devenv.KCPOptions{
		Binary:  filepath.Join(ToolsBin(), "kcp"),
		RootDir: filepath.Join(dir, "kcp"),
	}
	if os.Getenv("KUBEOPERA_TEST_KCP_LOG") != "" {
		opts.Output = os.Stderr
	} else {
		f, err := os.Create(filepath.Join(dir, "kcp.log"))
		if err != nil {
			t.Fatal(err)
		}
		opts.Output = f
		t.Cleanup(func() { _ = f.Close() })
	}
	k, err := devenv.StartKCP(context.Background(), opts)
	if err != nil {
		if opts.Output != os.Stderr {
			if log, rerr := os.ReadFile(filepath.Join(dir, "kcp.log")); rerr == nil && len(log) > 4000 {
				t.Logf("kcp log tail:\n%s", log[len(log)-4000:])
			}
		}
		t.Fatalf("failed to start kcp: %v", err)
	}
	t.Cleanup(k.Stop)
	return k
}
