package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Kubectl runs the pinned kubectl (_tools/bin/kubectl, built by hack/build-tools.sh) with
// kubeconfig and args, as a tenant runs it on their laptop, and returns its standard output. hosts
// (name -> IP) are what the tenant's DNS would answer: kubectl then runs in a mount namespace of
// its own (unshare --mount, as root) where /etc/hosts is a copy of this machine's with those
// entries added, so the kubeconfig's server name is resolved by kubectl's own resolver and
// nothing of this machine changes.
func Kubectl(ctx context.Context, t testing.TB, kubeconfig []byte, hosts map[string]string, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cfg, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(ToolsBin(), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is not built (make tools): %v", err)
	}
	argv := append([]string{kubectl, "--kubeconfig", cfg, "--request-timeout", "20s"}, args...)
	if len(hosts) > 0 {
		base, err := os.ReadFile("/etc/hosts")
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, 0, len(hosts))
		for name := range hosts {
			names = append(names, name)
		}
		sort.Strings(names)
		var b bytes.Buffer
		b.Write(base)
		b.WriteString("\n")
		for _, name := range names {
			fmt.Fprintf(&b, "%s %s\n", hosts[name], name)
		}
		hostsFile := filepath.Join(dir, "hosts")
		if err := os.WriteFile(hostsFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		argv = append([]string{"unshare", "--mount", "--propagation", "private", "--",
			"sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hostsFile}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
