package framework

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/devenv"
)

// identityTTL is how long the tokens of the tests' identities are valid: longer than any suite.
const identityTTL = 3 * time.Hour

// Identity is the manager's backend identity as the product ships it: ServiceAccount
// kubeopera-system/kubeopera-manager with exactly the rights of config/rbac/.
type Identity struct {
	// Config holds only the ServiceAccount's token (no admin credential).
	Config *rest.Config
	// KubeconfigPath is the same as a kubeconfig file, for --backend-kubeconfig.
	KubeconfigPath string
}

// RBACDir is config/rbac: the manager's backend RBAC and admission policy.
func RBACDir() string { return filepath.Join(RepoRoot(), "config", "rbac") }

// ManagerIdentity applies config/rbac to backend b (with its admin config), mints a token of the
// manager's ServiceAccount with the TokenRequest API, writes its kubeconfig into dir
// (manager-backend.kubeconfig) and returns once the identity works and the admission policy
// confines it. The e2e suite runs the manager with it; `make run` does the same (cmd/devenv).
func ManagerIdentity(ctx context.Context, b *devenv.Backend, dir string) (*Identity, error) {
	path := filepath.Join(dir, "manager-backend.kubeconfig")
	cfg, err := devenv.ManagerIdentity(ctx, b.Config, RBACDir(), path, identityTTL)
	if err != nil {
		return nil, err
	}
	return &Identity{Config: cfg, KubeconfigPath: path}, nil
}

// ManagerOnBackend is a backend started for a test with the manager's shipped identity applied:
// Admin is an admin client of it, Manager a client with the manager's token only (what the
// manager's code runs with), Identity that identity.
type ManagerOnBackend struct {
	Backend  *devenv.Backend
	Identity *Identity
	Admin    client.Client
	Manager  client.Client
}

// StartBackendAsManager starts a backend (StartBackend), applies the manager's identity
// (ManagerIdentity) and returns admin and manager clients of it, with the client-go scheme.
func StartBackendAsManager(t testing.TB) *ManagerOnBackend {
	t.Helper()
	b := StartBackend(t)
	id, err := ManagerIdentity(t.Context(), b, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := &ManagerOnBackend{Backend: b, Identity: id}
	if m.Admin, err = client.New(b.Config, client.Options{}); err != nil {
		t.Fatal(err)
	}
	if m.Manager, err = client.New(id.Config, client.Options{}); err != nil {
		t.Fatal(err)
	}
	return m
}

// MetricsReaderToken returns a token of a ServiceAccount bound to ClusterRole
// kubeopera-metrics-reader on backend b (config/rbac must be applied): what a scraper presents to
// the manager's /metrics.
func MetricsReaderToken(ctx context.Context, b *devenv.Backend) (string, error) {
	return devenv.MetricsReaderToken(ctx, b.Config, identityTTL)
}
