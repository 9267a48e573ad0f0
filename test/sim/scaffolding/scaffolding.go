// Package scaffolding runs the GitOps-tree side of the platform on a backend, for the HostCluster
// suite, the e2e suite and make run: the real gitops-scaffolder (its store and HTTP API,
// internal/scaffolder/jobs and server, as its ServiceAccount with config/scaffolder's RBAC, so it
// reads only the Secrets the manager grants it), and each scaffold's Job Pod played by
// sim.RunnerJobs running the built scaffold runner (cmd/scaffold-runner) with the Pod's identity,
// environment and volumes.
//
// With `kubectl apply -k config` applied to the backend, the namespace and identity are there
// already; Start installs them otherwise (config/provisioner/namespace.yaml,
// config/scaffolder/rbac.yaml). The scaffolder's Deployment itself is what this process plays:
// no kubelet runs it here.
package scaffolding

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/internal/scaffolder/server"
	"github.com/kubeopera/kubeopera/test/sim"
)

// NodeName is the Node the scaffolds' Pods run on.
const NodeName = "scaffold-runner-kubelet"

// Options configure Start.
type Options struct {
	// Backend is an admin config of the backend cluster.
	Backend *rest.Config
	// Root is the repository root (config/provisioner, config/scaffolder).
	Root string
	// RunnerBinary is the built cmd/scaffold-runner the scaffolds' Pods run (the binary of images
	// named scaffold-runner).
	RunnerBinary string
	// Jobs configures the store as the service's environment would (TEMPLATES_CONFIGMAP,
	// CHART_MIRROR, ALLOW_NETWORKS, SEALED_SECRETS_TIMEOUT, RUN_DEADLINE); its Namespace is
	// api.DefaultJobsNamespace and its RunnerImage jobs.RunnerImage when empty.
	Jobs jobs.Config
	// Env is set on top of the runner's environment in every Pod (e.g. what a real Pod's network
	// would give it).
	Env map[string]string
	// Addr is where the API listens; 127.0.0.1:0 when empty.
	Addr string
	// APIKey; a random one when empty.
	APIKey string
	// Log receives the scaffolder's and the actor's logs; discarded when nil.
	Log io.Writer
}

// Env is a running scaffolding side.
type Env struct {
	// URL of the scaffolder's API (GITOPS_SCAFFOLDER_BASE_URL) and its APIKey
	// (GITOPS_SCAFFOLDER_API_KEY).
	URL, APIKey string
	// Runner plays the scaffolds' Pods; Runner.Output(api.JobName(id)) is a scaffold's log.
	Runner *sim.RunnerJobs

	service *sim.JobService
}

// Start starts the scaffolding side; Stop stops it.
func Start(ctx context.Context, o Options) (*Env, error) {
	if o.RunnerBinary == "" {
		return nil, errors.New("no scaffold-runner binary: set Options.RunnerBinary")
	}
	if o.APIKey == "" {
		o.APIKey = sim.RandomAPIKey()
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := sim.Install(ctx, o.Backend, o.Root, "config/provisioner/namespace.yaml", "config/scaffolder/rbac.yaml"); err != nil {
		return nil, err
	}
	ns, sa, _ := strings.Cut(hostcluster.DefaultScaffolderIdentity, "/")
	cs, err := jobruntest.ServiceAccountClient(o.Backend, ns, sa)
	if err != nil {
		return nil, err
	}
	cfg := o.Jobs
	if cfg.Namespace == "" {
		cfg.Namespace = api.DefaultJobsNamespace
	}
	runs, err := jobs.New(cs, cfg)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewJSONHandler(o.Log, nil))
	srv, err := server.New(server.Config{APIKey: o.APIKey, Runs: runs, Retention: 24 * time.Hour, Log: log})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, err
	}
	// A Node of its own: the provisioning side's actor (test/sim/provisioning) may play the
	// provisioner's Jobs in the same namespace on the default one.
	ra := &sim.RunnerJobs{Backend: o.Backend, Namespace: cfg.Namespace, Binaries: map[string]string{"scaffold-runner": o.RunnerBinary},
		NodeName: NodeName, Env: o.Env, Log: o.Log}
	serve := func(ctx context.Context) error { return srv.Serve(ctx, ln) }
	return &Env{URL: "http://" + ln.Addr().String(), APIKey: o.APIKey, Runner: ra,
		service: sim.StartJobService("scaffolding", o.Log, serve, ra)}, nil
}

// Stop stops the scaffolder and the scaffolds' Pods.
func (e *Env) Stop() {
	e.service.Stop()
}
