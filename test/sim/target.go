// StartTarget and StartGitOps start what a HostCluster needs around the platform, for the e2e suite, the
// controller suite and bin/devenv: a target cluster (a real kube-apiserver) on which Flux's real
// controllers (with helm-controller, and the sealed-secrets controller they install) run as
// processes and authapi is played, and a real git server. The gitops-scaffolder is
// test/sim/scaffolding's. It has no testing dependency.

package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/devenv/gitserver"
)

// Target is a cluster a tenant connects: a real kube-apiserver with etcd and a
// kube-controller-manager (namespace and garbage-collector controllers), with what a kubelet would
// run for the platform on it: Flux's source-, kustomize- and helm-controller (FluxPods, the real
// binaries) once Flux's Deployments exist, the real sealed-secrets controller (FluxPods) once a
// HelmRelease installed its chart, and authapi (AuthAPI) once the GitOps tree's Service exists.
type Target struct {
	Cluster *devenv.Backend
	// KubeconfigPath is the target's admin kubeconfig and Kubeconfig its content: what a tenant
	// puts into the Secret their HostCluster references.
	KubeconfigPath string
	Kubeconfig     []byte
	// AuthAPI plays authapi on the target; its Calls count the admin bootstraps.
	AuthAPI *AuthAPI
	// Flux plays the kubelet for Flux's Deployments and the sealed-secrets controller's.
	Flux *FluxPods
	// Charts is the local chart repository serving TargetOptions.Charts (nil without): the URL
	// a GitOps tree's HelmRepository names for them.
	Charts *ChartRepo
}

// StartTarget starts a target with its state and logs in dir (target.kubeconfig, flux.log,
// kcm.log; etcd's data in dir/etcd when keepData); binDir holds kube-apiserver, etcd,
// kube-controller-manager and Flux's controllers. stop stops everything.
func StartTarget(dir, binDir string, keepData bool) (t *Target, stop func(), err error) {
	return StartTargetWith(TargetOptions{Dir: dir, BinDir: binDir, KeepData: keepData})
}

// TargetOptions configure StartTargetWith.
type TargetOptions struct {
	// Dir holds the target's state and logs; BinDir its binaries; KeepData keeps etcd's data in
	// Dir/etcd (see StartTarget).
	Dir, BinDir string
	KeepData    bool
	// Processes records the target's servers (target-etcd, target-kube-apiserver,
	// target-kube-controller-manager) and Flux's controllers (target-flux-<Deployment>); nil
	// records nothing.
	Processes *devenv.Processes
	// Charts are chart directories to serve from a local chart repository (Target.Charts, its
	// files in Dir/charts), e.g. the sealed-secrets chart and StandInCharts.
	Charts []string
}

// StartTargetWith starts a target as StartTarget does, recording its processes.
func StartTargetWith(o TargetOptions) (t *Target, stop func(), err error) {
	dir, binDir := o.Dir, o.BinDir
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	kcmLog, err := os.Create(filepath.Join(dir, "kcm.log"))
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, func() { _ = kcmLog.Close() })
	t = &Target{KubeconfigPath: filepath.Join(dir, "target.kubeconfig")}
	dataDir := ""
	if o.KeepData {
		dataDir = filepath.Join(dir, "etcd")
	}
	procs := o.Processes.With("target")
	t.Cluster, err = devenv.StartBackend(context.Background(), devenv.BackendOptions{
		BinDir:         binDir,
		DataDir:        dataDir,
		KubeconfigPath: filepath.Join(dir, "admin.kubeconfig"),
		Output:         kcmLog,
		Processes:      procs,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to start the target cluster: %w", err)
	}
	stops = append(stops, t.Cluster.Stop)
	if err := devenv.WriteKubeconfig(t.Cluster.Config, t.KubeconfigPath, "target"); err != nil {
		return nil, nil, err
	}
	if t.Kubeconfig, err = os.ReadFile(t.KubeconfigPath); err != nil {
		return nil, nil, err
	}
	fluxLog, err := os.Create(filepath.Join(dir, "flux.log"))
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, func() { _ = fluxLog.Close() })
	t.Flux = &FluxPods{Target: t.Cluster.Config, KubeconfigPath: t.KubeconfigPath, BinDir: binDir, WorkDir: filepath.Join(dir, "flux"), Log: fluxLog, Processes: procs.With("flux")}
	// authapi's key comes from the tree the gitops-scaffolder seals, unsealed by the real
	// sealed-secrets controller Flux installs from it.
	t.AuthAPI = &AuthAPI{Target: t.Cluster.Config, Unsealed: true}
	if len(o.Charts) > 0 {
		if t.Charts, err = StartChartRepo(filepath.Join(dir, "charts"), o.Charts...); err != nil {
			return nil, nil, err
		}
		stops = append(stops, func() { _ = t.Charts.Close() })
	}
	stops = append(stops, runActor(t.Flux.Run, fluxLog), runActor(t.AuthAPI.Run, fluxLog))
	return t, stop, nil
}

// run runs fn until the returned stop is called; an actor that ends early (e.g. authapi's, whose
// Service had not come yet) is reported to log and run again, as the kubelet restarts a Pod.
func runActor(fn func(context.Context) error, log io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := fn(ctx); err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(log, "actor stopped: %v; starting it again\n", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Git credentials of the local git server: what a tenant puts into the Secret their
// HostCluster's spec.gitCredentialsSecretRef names (keys username and password, as Flux's
// GitRepository secretRef takes them).
const (
	GitUsername = "flux"
	GitPassword = "local-git-password"
)

// GitOps is a real git server with one repository, the tenants' GitOps repository: the
// gitops-scaffolder (test/sim/scaffolding, the real service and runner) pushes cluster trees into
// it, Flux on the targets reads them.
type GitOps struct {
	Git *gitserver.Server
	// RepoURL is the repository's URL without credentials: a HostCluster's spec.gitOpsRepoURL.
	RepoURL string
}

// GitOpsOptions configure StartGitOps.
type GitOpsOptions struct {
	// Dir holds the git server's repositories.
	Dir string
	// GitAddr is where it listens; empty: 127.0.0.1 on a free port.
	GitAddr string
}

// StartGitOps starts the git server (basic auth GitUsername/GitPassword) with repository
// gitops-iac. stop stops it.
func StartGitOps(o GitOpsOptions) (g *GitOps, stop func(), err error) {
	g = &GitOps{}
	auth := &gitserver.BasicAuth{Username: GitUsername, Password: GitPassword}
	if o.GitAddr != "" {
		g.Git, err = gitserver.StartOn(o.GitAddr, filepath.Join(o.Dir, "git"), auth)
	} else {
		g.Git, err = gitserver.Start(filepath.Join(o.Dir, "git"), auth)
	}
	if err != nil {
		return nil, nil, err
	}
	if g.RepoURL, err = g.Git.CreateRepo("gitops-iac"); err != nil {
		_ = g.Git.Close()
		return nil, nil, err
	}
	return g, func() { _ = g.Git.Close() }, nil
}
