// Package fleettest runs a controller in process the way internal/manager.Run wires it, on real
// servers, for controller suites: a backend (kube-apiserver, etcd, kube-controller-manager) where
// the controller works with the manager's shipped backend identity (config/rbac), and a real kcp
// with tenant workspaces (each bound to both exports by the workspace type) that the manager
// serves as kcp's unprivileged "user" with the platform workspace role the product ships, through
// the kubeopera.io export's virtual workspace and the project's fleet provider. The e2e suite runs
// the manager binary itself; controller suites are the faster tables of phase transitions.
package fleettest

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	imanager "github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/netguard"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/platform"
	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

// Harness is a manager, not started yet, serving the kubeopera.io export's workspaces.
type Harness struct {
	// Backend is an admin client of the backend and BackendAdmin its config; BackendAs is the
	// manager's backend identity (what controllers get through Manager).
	Backend      client.Client
	BackendAdmin *rest.Config
	BackendAs    *rest.Config
	// KCP is the kcp server; PlatformKCP points at the platform workspace with the manager's kcp
	// identity.
	KCP         *devenv.KCP
	PlatformKCP *rest.Config
	// Fleet serves the kubeopera.io export's workspaces; register controllers on it.
	Fleet *apiexport.Provider
	// Manager is the multicluster manager; Run starts it.
	Manager mcmanager.Manager
	// Managed is the same manager as internal/manager assembles it (its providers, backend and
	// guard): register the product's controllers by name with Managed.Setup.
	Managed *imanager.Manager
	// WS are admin clients of the tenant workspaces, LC their logical clusters, Path their paths,
	// keyed by the names Start was given.
	WS   map[string]client.Client
	LC   map[string]string
	Path map[string]string
	// Shard is the shard each tenant workspace was placed on (StartShardedExport); empty on one
	// kcp server.
	Shard map[string]string
	// Guard checks the addresses controllers dial on tenants' behalf, as internal/manager.Run
	// makes it (the platform's own addresses read from kcp and the backend), with the exception
	// the tests' targets need: AllowedTargets. Give it to the HostCluster reconciler.
	Guard *netguard.Guard
	// Log keeps what the manager logged.
	Log *LogBuffer
}

// AllowedTargets is the one loopback address the tests' target clusters listen on, allowed as
// make run allows it (--target-allow-cidrs); every other loopback address stays denied.
const AllowedTargets = "127.0.0.1/32"

// Start starts the servers and makes the manager serving the kubeopera.io export, with one tenant
// workspace per name (made unique to the run). The caller registers its controller on h.Fleet and
// calls h.Run.
func Start(t *testing.T, names ...string) *Harness {
	t.Helper()
	return StartExport(t, imanager.KubeoperaProvider, "kubeopera.io", names...)
}

// StartExport is Start for the export whose endpoint slice is slice, its fleet named provider.
func StartExport(t *testing.T, provider, slice string, names ...string) *Harness {
	t.Helper()
	return StartShardedExport(t, provider, slice, 1, names...)
}

// StartShardedExport is StartExport on a kcp of shards shards behind its front proxy, the tenant
// workspaces placed on them in turn (names[i] on shard i mod shards, h.Shard says which); 1 is one
// kcp server.
func StartShardedExport(t *testing.T, provider, slice string, shards int, names ...string) *Harness {
	t.Helper()
	ctx := t.Context()
	h := &Harness{WS: map[string]client.Client{}, LC: map[string]string{}, Path: map[string]string{}, Shard: map[string]string{}}
	framework.SkipWithoutServers(t)
	// kcp and the backend side by side, installed as bin/devenv installs them
	// (devenv.InstallPlatform).
	p, stop, err := platform.StartSharded(ctx, t.TempDir(), shards)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	h.KCP, h.BackendAdmin = p.KCP, p.Backend.Config
	if h.Backend, err = client.New(p.Backend.Config, client.Options{Scheme: imanager.Scheme()}); err != nil {
		t.Fatal(err)
	}
	id, err := framework.ManagerIdentity(ctx, p.Backend, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h.BackendAs = id.Config
	userCfg, err := h.KCP.ContextConfig(platform.ManagerKCPUser)
	if err != nil {
		t.Fatal(err)
	}
	// Pointed at the platform workspace with the manager's default request rate, as
	// internal/manager.Configs makes it.
	kcpCfg := workspaces.ClusterConfig(userCfg, bootstrap.PlatformWorkspace)
	defaults := imanager.DefaultOptions()
	kcpCfg.QPS, kcpCfg.Burst = defaults.KCPQPS, defaults.KCPBurst

	h.Log = &LogBuffer{}
	log := managerLog(t, h.Log)
	ctrl.SetLogger(log)
	// The manager as internal/manager builds it, with no controller registered: the caller
	// registers its own on h.Fleet. Metrics and probes are off; the tests' targets listen on
	// AllowedTargets.
	o := imanager.DefaultOptions()
	o.TargetAllowCIDRs = []string{AllowedTargets}
	o.MetricsAddr, o.ProbeAddr, o.LeaderElect = "0", "0", false
	switch provider {
	case imanager.KubeoperaProvider:
		o.KubeoperaEndpointSlice = slice
	case imanager.PlatformProvider:
		o.PlatformEndpointSlice = slice
	}
	h.PlatformKCP = kcpCfg
	m, err := imanager.New(ctrl.LoggerInto(ctx, log), o, &imanager.Configs{KCP: kcpCfg, Backend: h.BackendAs}, func(mo *manager.Options) {
		// Given explicitly: package framework sets controller-runtime's global logger to discard
		// (the servers' client libraries log through it), which ctrl.SetLogger cannot undo.
		mo.Logger = log
		// Several harnesses of one test binary register the same controllers, each in its own
		// manager; controller-runtime's process-wide name check is for one manager per process.
		mo.Controller = ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Managed, h.Manager, h.Fleet, h.Guard = m, m, m.Workspaces[provider], m.Guard

	suffix := strconv.FormatInt(time.Now().UnixNano()%(1<<20), 36)
	for i, name := range names {
		wsName := name + "-" + suffix
		path := "root:orgs:" + wsName
		if len(h.KCP.Shards) > 0 {
			h.Shard[name] = h.KCP.Shards[i%len(h.KCP.Shards)].Name
		}
		lc, err := workspaces.EnsureWorkspaceOn(ctx, h.KCP.Config, "root:orgs", wsName, workspaces.TenantWorkspaceTypeIn(bootstrap.PlatformWorkspace), h.Shard[name])
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(workspaces.ClusterConfig(h.KCP.Config, path), client.Options{Scheme: m.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "both exports served in "+path, func() (bool, string) {
			if err := c.List(ctx, &kov1alpha1.HostClusterList{}); err != nil {
				return false, err.Error()
			}
			err := c.List(ctx, &platformv1alpha1.ProviderMachineFlavorList{})
			return err == nil, fmt.Sprint(err)
		})
		h.WS[name], h.LC[name], h.Path[name] = c, lc, path
	}
	return h
}

// BackendStore returns the manager's view of the backend for controllers (syncer.Backend).
func (h *Harness) BackendStore() syncer.Backend {
	l := h.Manager.GetLocalManager()
	return syncer.Backend{Client: l.GetClient(), Reader: l.GetAPIReader()}
}

// Run starts the manager until the test ends.
func (h *Harness) Run(t *testing.T) { framework.RunUntilCleanup(t, h.Manager) }

// LogBuffer keeps what the manager logs; it is written until every goroutine of the manager has
// stopped, which may be after the test ended.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// managerLog returns a logger (V(1) included) writing to out; when the test fails, the last lines
// are logged after the manager stopped.
func managerLog(t *testing.T, out *LogBuffer) logr.Logger {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) > 300 {
			lines = lines[len(lines)-300:]
		}
		t.Logf("manager log (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
	})
	return zap.New(zap.WriteTo(out), zap.Level(zapcore.Level(-1)))
}

// PlatformAdmin returns a kcp admin client of the platform workspace.
func (h *Harness) PlatformAdmin(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(workspaces.ClusterConfig(h.KCP.Config, bootstrap.PlatformWorkspace), client.Options{Scheme: imanager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// PublishCatalog creates flavors in the platform workspace, as a platform admin does, and
// registers the catalog controller as internal/manager does (the harness must serve the
// platform.edgeconnect.eu export), so every bound workspace gets them. Call it before Run.
func (h *Harness) PublishCatalog(t *testing.T, flavors ...client.Object) {
	t.Helper()
	ctx := t.Context()
	admin := h.PlatformAdmin(t)
	for _, f := range flavors {
		framework.Eventually(t, time.Minute, "catalog flavor "+f.GetName()+" created", func() (bool, string) {
			err := admin.Create(ctx, f.DeepCopyObject().(client.Object))
			return err == nil || apierrors.IsAlreadyExists(err), fmt.Sprint(err)
		})
	}
	if err := h.Managed.Setup(ctx, "flavorcatalog"); err != nil {
		t.Fatal(err)
	}
}
