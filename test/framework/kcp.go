package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// StartKCP starts a real kcp server in a temporary root directory and stops it when the test ends.
// Set KUBEOPERA_TEST_KCP_LOG=1 to see its logs.
func StartKCP(t testing.TB) *devenv.KCP {
	t.Helper()
	SkipWithoutServers(t)
	k, stop, err := StartKCPIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return k
}

// StartKCPIn starts a real kcp server with its root directory and its log (kcp.log) in dir, for
// an environment shared by several tests (started once, e.g. from TestMain); stop stops it. Set
// KUBEOPERA_TEST_KCP_LOG=1 to see its logs on stderr instead.
func StartKCPIn(dir string) (k *devenv.KCP, stop func(), err error) {
	return StartShardedKCPIn(dir, 1)
}

// StartShardedKCPIn is StartKCPIn with shards shards behind kcp's front proxy
// (devenv.StartShardedKCP); 1 starts one kcp server.
func StartShardedKCPIn(dir string, shards int) (k *devenv.KCP, stop func(), err error) {
	opts := devenv.KCPOptions{
		Binary:  filepath.Join(ToolsBin(), "kcp"),
		RootDir: filepath.Join(dir, "kcp"),
		Output:  os.Stderr,
	}
	closeLog := func() {}
	if os.Getenv("KUBEOPERA_TEST_KCP_LOG") == "" {
		f, err := os.Create(filepath.Join(dir, "kcp.log"))
		if err != nil {
			return nil, nil, err
		}
		opts.Output, closeLog = f, func() { _ = f.Close() }
	}
	if shards > 1 {
		k, err = devenv.StartShardedKCP(context.Background(), devenv.ShardedKCPOptions{BinDir: ToolsBin(), RootDir: opts.RootDir, Shards: shards, Output: opts.Output})
	} else {
		k, err = devenv.StartKCP(context.Background(), opts)
	}
	if err != nil {
		closeLog()
		msg := fmt.Sprintf("failed to start kcp: %v", err)
		if log, rerr := os.ReadFile(filepath.Join(dir, "kcp.log")); rerr == nil && len(log) > 0 {
			msg += "\nkcp log tail:\n" + string(tail(log, 4000))
		}
		return nil, nil, fmt.Errorf("%s", msg)
	}
	return k, func() { k.Stop(); closeLog() }, nil
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
