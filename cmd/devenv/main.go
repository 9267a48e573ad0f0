// Command devenv runs the embedded local environment behind `make run`: a kcp server, a backend
// cluster (or the one BACKEND_KUBECONFIG names), the platform workspace root:kubeopera, a demo
// tenant workspace root:orgs:demo and the manager. State lives under .dev/ and is reused by the
// next run; Ctrl-C stops everything. However it ends (a closed terminal, kill -9), the processes
// it started die with it on Linux; they are recorded in .dev/pids, and a start stops what a
// previous run left running and refuses, naming the process, a port or data directory that
// another process holds (internal/devenv.Processes).
//
// On the embedded backend, run as root, every Tenant's real vCluster runs (the k8s distro: the
// vcluster binary with kube-apiserver, kube-controller-manager and kine from _tools/bin) where
// its StatefulSet's Pod would, in namespaces of its own (sim.VClusterPods plays only the
// kubelet), and the backend's load balancer controller is played (sim.LoadBalancers): the
// manager exposes vClusters through load balancers, so the kubeconfig a Tenant gets works from
// this machine's shell. Not as root, `devenv simulate-vcluster <tenantName> [workspace]` plays
// the vCluster writing its vc-<release> kubeconfig Secret instead, so the Tenant can become
// Ready (its kubeconfig then names a server nothing serves).
//
// For HostClusters it also starts a target cluster (a second kube-apiserver) on which Flux's real
// source- and kustomize-controller run as processes once Flux is installed and authapi is played,
// a local git server and the gitops-scaffolder stand-in. `devenv hostcluster-secrets [clusterID]`
// prints the two Secrets a tenant puts next to their HostCluster (the target's kubeconfig and the
// git credentials), ready for `kubectl apply -f -`.
//
// For KubernetesClusters it loads the sample OTC and AWS flavor catalogs (config/samples) into the
// platform workspace and, on the embedded backend, installs the OTC and AWS Crossplane providers'
// CRDs (test/fixtures/crossplane/otc and aws), runs Crossplane core and function-patch-and-transform
// as processes (test/sim.StartCrossplane; they need root, for the network namespace Crossplane
// runs in) and applies config/crossplane. `devenv simulate-crossplane` plays the providers and
// their clouds on the embedded backend until Ctrl-C, so the seed's demo flow
// (config/samples/kubernetescluster-demo.yaml) and the AWS sample reach Ready.
//
// For provisioned HostClusters (provision_vanilla, provision_eks), on the embedded backend and
// with terraform on PATH, it starts test/sim/provisioning: the real provisioner (API on
// 127.0.0.1:8092, or $KUBEOPERA_PROVISIONER_PORT, its key in .dev/provisioning/api-key) whose
// runs' Pods are played with the real terraform-runner and terraform, AWS's S3, SSM and STS played
// by sim.AWS in this process, and the offline stand-in module (no machines are built: the
// "provisioned" cluster is the local target). It saves the AWS endpoint and two users' keys in
// .dev/provisioning/provisioning.json for the commands that play what no local process does:
// `devenv aws-credentials [namespace]` prints the tenant's credential Secret (user
// aws-credentials), and `devenv simulate-control-plane <clusterID>` plays node 0 of a
// vanilla_kubeadm cluster publishing its admin.conf (the target's) to SSM. Without terraform on
// PATH, make run says so and runs without provisioning.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/test/sim/provisioning"
	"github.com/kubeopera/kubeopera/workspaces"
)

// managerTokenTTL is how long the manager's backend token of one `make run` is valid.
const managerTokenTTL = 7 * 24 * time.Hour

const (
	demoWorkspace = "root:orgs:demo"
	defaultChart  = "oci://ghcr.io/loft-sh/charts/vcluster"
	localChart    = "_tools/charts/vcluster"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "hostcluster-secrets" {
		if err := hostClusterSecrets(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "simulate-crossplane" {
		if err := simulateCrossplane(); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "aws-credentials" {
		if err := awsCredentials(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "simulate-control-plane" {
		if err := simulateControlPlane(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "simulate-vcluster" {
		if err := simulateVCluster(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// stateDir is where the environment keeps its state: .dev, or $KUBEOPERA_DEV_DIR.
func stateDir() string {
	if d := os.Getenv("KUBEOPERA_DEV_DIR"); d != "" {
		return d
	}
	return ".dev"
}

// binDir holds the built manager: bin, or $KUBEOPERA_BIN_DIR.
func binDir(root string) string {
	if d := os.Getenv("KUBEOPERA_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, "bin")
}

func say(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run() error {
	// SIGHUP: the terminal was closed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	root, _ := os.Getwd()
	bin := filepath.Join(root, "_tools", "bin")
	state := stateDir()
	dev := state
	if !filepath.IsAbs(dev) {
		dev = filepath.Join(root, state)
	}
	logs := filepath.Join(dev, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}

	port := 6443
	if p, err := strconv.Atoi(os.Getenv("KCP_PORT")); err == nil {
		port = p
	}
	// Before anything starts (or a log is truncated): this run's records, what a previous run left
	// running stopped, and nothing else holding what this run needs.
	procs, err := devenv.OpenProcesses(filepath.Join(dev, "pids"))
	if err != nil {
		return err
	}
	defer func() { _ = procs.Close() }()
	stopped, err := procs.StopLeftovers(ctx)
	if err != nil {
		return err
	}
	for _, r := range stopped {
		say("Stopped %s, which a previous run left running", r)
	}
	// A process that has just died (a killed run's servers die with it) may hold its ports for a
	// moment after it is gone, before the kernel releases its sockets: ask again for a few
	// seconds before giving up.
	claimErr := devenv.CheckClaims(claims(root, dev, port))
	for deadline := time.Now().Add(10 * time.Second); claimErr != nil && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		claimErr = devenv.CheckClaims(claims(root, dev, port))
	}
	if claimErr != nil {
		return claimErr
	}
	kcpLog, _ := os.Create(filepath.Join(logs, "kcp.log"))
	say("Starting kcp on https://127.0.0.1:%d (state in %s/kcp, log in %s/logs/kcp.log)", port, state, state)
	kcp, err := devenv.StartKCP(ctx, devenv.KCPOptions{Binary: filepath.Join(bin, "kcp"), RootDir: filepath.Join(dev, "kcp"), SecurePort: port, Output: kcpLog, Processes: procs})
	if err != nil {
		return err
	}
	defer kcp.Stop()

	backendKubeconfig := filepath.Join(dev, "backend.kubeconfig")
	if ext := os.Getenv("BACKEND_KUBECONFIG"); ext != "" {
		say("Using the backend cluster of BACKEND_KUBECONFIG=%s", ext)
		raw, err := os.ReadFile(ext)
		if err != nil {
			return err
		}
		if err := os.WriteFile(backendKubeconfig, raw, 0o600); err != nil {
			return err
		}
	} else {
		kcmLog, _ := os.Create(filepath.Join(logs, "kube-controller-manager.log"))
		say("Starting the embedded backend: kube-apiserver, etcd and kube-controller-manager (state in %s/backend-etcd)", state)
		b, err := devenv.StartBackend(ctx, devenv.BackendOptions{BinDir: bin, DataDir: filepath.Join(dev, "backend-etcd"), KubeconfigPath: backendKubeconfig, Output: kcmLog, Processes: procs.With("backend")})
		if err != nil {
			return err
		}
		defer b.Stop()
	}
	backendCfg, err := clientcmd.BuildConfigFromFlags("", backendKubeconfig)
	if err != nil {
		return err
	}
	say("Bootstrapping the platform workspace %s (schemas, exports, WorkspaceType kubeopera-tenant), the manager's role for kcp user %q, root:orgs and the backend namespace %s", bootstrap.PlatformWorkspace, devenv.ManagerKCPUser, devenv.ManagerNamespace)
	if err := devenv.InstallPlatform(ctx, kcp.Config, backendCfg); err != nil {
		return err
	}
	// The manager runs on the backend as its ServiceAccount with exactly the RBAC and admission
	// policy the product ships (config/rbac), with a fresh token at every run; the admin
	// kubeconfig stays the developer's (and simulate-vcluster's).
	say("Applying the manager's backend RBAC (config/rbac); the manager runs as ServiceAccount kubeopera-system/kubeopera-manager")
	managerBackendKubeconfig := filepath.Join(dev, "manager-backend.kubeconfig")
	if _, err := devenv.ManagerIdentity(ctx, backendCfg, filepath.Join(root, "config", "rbac"), managerBackendKubeconfig, managerTokenTTL); err != nil {
		return err
	}
	if _, err := devenv.MetricsReaderToken(ctx, backendCfg, time.Hour); err != nil {
		return err
	}

	for _, catalog := range []string{"otc-flavors.yaml", "aws-flavors.yaml"} {
		say("Loading the sample flavor catalog config/samples/%s into %s", catalog, bootstrap.PlatformWorkspace)
		if err := applyFile(ctx, workspaces.ClusterConfig(kcp.Config, bootstrap.PlatformWorkspace), filepath.Join(root, "config", "samples", catalog)); err != nil {
			return err
		}
	}
	if os.Getenv("BACKEND_KUBECONFIG") == "" {
		say("Installing the OTC and AWS Crossplane providers' CRDs on the embedded backend (test/fixtures/crossplane/otc and aws; bin/devenv simulate-crossplane plays the providers and the clouds)")
		if _, err := envtest.InstallCRDs(backendCfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(root, "test", "fixtures", "crossplane", "otc")}}); err != nil {
			return err
		}
		if err := sim.InstallAWSProviderCRDs(backendCfg, root); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			xpLog, _ := os.Create(filepath.Join(logs, "crossplane.log"))
			defer func() { _ = xpLog.Close() }()
			say("Starting Crossplane core and function-patch-and-transform on the embedded backend (built by make tools; log in %s/logs/crossplane.log) and applying the ManagedCluster XRD and Compositions (config/crossplane)", state)
			xp, err := sim.StartCrossplane(ctx, sim.CrossplaneOptions{Backend: backendCfg, ToolsDir: filepath.Join(root, "_tools"), Dir: filepath.Join(dev, "crossplane"), Log: xpLog, Processes: procs})
			if err != nil {
				return fmt.Errorf("failed to start Crossplane: %w", err)
			}
			defer xp.Stop()
			if err := sim.ApplyCrossplaneConfig(ctx, backendCfg, root); err != nil {
				return err
			}
		} else {
			say("Not run as root, so Crossplane cannot run here (it binds its metrics and health ports to every interface, so it runs in a network namespace of its own, which needs root): KubernetesClusters of providers other than OTC say UnsupportedProvider")
		}
	}
	demoLC, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root:orgs", "demo", workspaces.TenantWorkspaceTypeIn(bootstrap.PlatformWorkspace))
	if err != nil {
		return err
	}
	kcpKubeconfig := filepath.Join(dev, "kcp.kubeconfig")
	if err := writeKCPKubeconfig(kcp.KubeconfigPath, kcpKubeconfig); err != nil {
		return err
	}

	chart, version := os.Getenv("VCLUSTER_CHART"), os.Getenv("VCLUSTER_CHART_VERSION")
	if chart == "" {
		chart, version = defaultChart, "0.21.2"
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := helm.Reachable(rctx, helm.Options{ChartRef: chart, ChartVersion: version, CacheDir: filepath.Join(dev, "helm-cache")})
		cancel()
		if err != nil {
			say("The vCluster chart %s %s cannot be reached (%v); using the repo's local chart %s instead", chart, version, err, localChart)
			chart = filepath.Join(root, localChart)
		}
	}

	// What HostClusters need around the platform: a target cluster with Flux's controllers (and
	// the sealed-secrets controller they install) run as processes and authapi played on it, a git
	// server, the chart mirror of the tree's infrastructure layer, and the real gitops-scaffolder
	// whose Jobs run the real scaffold runner.
	say("Starting the HostCluster target cluster (kubeconfig %s/target/target.kubeconfig); Flux's source-, kustomize- and helm-controller run there as processes once Flux is installed, and the sealed-secrets controller once Flux installed it (as root: it needs a Pod network), authapi is played (log in %s/target/flux.log)", state, state)
	target, stopTarget, err := sim.StartTargetWith(sim.TargetOptions{Dir: filepath.Join(dev, "target"), BinDir: bin, KeepData: true, Processes: procs,
		Charts: append([]string{filepath.Join(root, "_tools", "charts", "sealed-secrets")}, sim.StandInCharts(root)...)})
	if err != nil {
		return err
	}
	defer stopTarget()
	gitAddr := "127.0.0.1:" + envOr("KUBEOPERA_GIT_PORT", "8090")
	gitops, stopGitOps, err := sim.StartGitOps(sim.GitOpsOptions{Dir: filepath.Join(dev, "gitops"), GitAddr: gitAddr})
	if err != nil {
		return err
	}
	defer stopGitOps()
	scaffolderLog, _ := os.Create(filepath.Join(logs, "scaffolder.log"))
	defer func() { _ = scaffolderLog.Close() }()
	scaffolder, err := startScaffolder(ctx, root, dev, backendCfg, target.Charts.URL, scaffolderLog)
	if err != nil {
		return err
	}
	defer scaffolder.Stop()
	say("Started the local git server: %s (user %s), the chart mirror %s and the gitops-scaffolder: %s (API key in %s/%s; log in %s/logs/scaffolder.log)", gitops.RepoURL, sim.GitUsername, target.Charts.URL, scaffolder.URL, state, scaffolderKeyFile, state)
	// Provisioned HostClusters: the provisioner, its runs and AWS, played on the embedded backend.
	var provisioner *provisioning.Env
	if os.Getenv("BACKEND_KUBECONFIG") == "" {
		provLog, _ := os.Create(filepath.Join(logs, "provisioner.log"))
		defer func() { _ = provLog.Close() }()
		if provisioner, err = startProvisioning(ctx, root, dev, state, backendCfg, target.Cluster.Config.CAData, provLog); err != nil {
			return err
		}
		if provisioner != nil {
			defer provisioner.Stop()
		}
	} else {
		if err := os.Remove(filepath.Join(dev, provisioningDir, provisioningStateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		say("Provisioning is played on the embedded backend only: with BACKEND_KUBECONFIG no provisioner is started (deploy config/provisioner there and give the manager CLUSTER_PROVISIONER_BASE_URL and CLUSTER_PROVISIONER_API_KEY)")
	}
	fluxChart := os.Getenv("FLUX_CHART")
	if fluxChart == "" {
		// No chart registry is reachable from here: the local chart (Flux's CRDs and the
		// controllers' Deployments), assembled by `make tools` into _tools/charts/flux2.
		fluxChart = filepath.Join(root, "_tools", "charts", "flux2")
	}

	// The Tenants' vClusters, for real, on the embedded backend (as root: each runs in
	// namespaces of its own).
	realVClusters := os.Getenv("BACKEND_KUBECONFIG") == "" && os.Geteuid() == 0
	if realVClusters {
		vcLog, _ := os.Create(filepath.Join(logs, "vclusters.log"))
		defer func() { _ = vcLog.Close() }()
		say("Every Tenant's vCluster runs for real on the embedded backend (the k8s distro; log in %s/logs/vclusters.log); their Services get load balancer addresses on 127.0.0.0/8", state)
		stopVClusters, err := startVClusters(ctx, backendCfg, bin, filepath.Join(dev, "vclusters"), vcLog, procs)
		if err != nil {
			return err
		}
		defer stopVClusters()
	}

	// The fleet overview: loopback, plain HTTP, as the manager serves it by default.
	overviewAddr := "127.0.0.1:" + envOr("KUBEOPERA_FLEET_OVERVIEW_PORT", "8083")
	mgrLog := filepath.Join(logs, "manager.log")
	say("Starting the manager (log in %s/logs/manager.log), vCluster chart %s", state, chart)
	mf, _ := os.Create(mgrLog)
	mgrArgs := []string{
		"--kcp-kubeconfig", kcpKubeconfig,
		"--kcp-context", "user",
		"--backend-kubeconfig", managerBackendKubeconfig,
		"--vcluster-chart", chart,
		"--vcluster-chart-version", version,
		"--helm-cache-dir", filepath.Join(dev, "helm-cache"),
		"--orphan-sweep-kcp-context", "system:admin",
		"--flux-chart", fluxChart,
		"--hostcluster-poll-interval", "2s",
		// Flux on the local target looks at the tree every 10 s: a scaffold's second pass lands soon.
		"--gitops-sync-interval", "10s",
		"--fleet-overview-bind-address", overviewAddr,
		// The target clusters of this environment listen on 127.0.0.1, which the manager never
		// dials on a tenant's behalf unless allowed: exactly that address is.
		"--target-allow-cidrs", "127.0.0.1/32",
	}
	if realVClusters {
		mgrArgs = append(mgrArgs, "--vcluster-distro", "k8s", "--vcluster-exposure", "loadbalancer")
	}
	mgrEnv := append(os.Environ(), "KUBEOPERA_API_BASE_URL="+os.Getenv("KUBEOPERA_API_BASE_URL"),
		"GITOPS_SCAFFOLDER_BASE_URL="+scaffolder.URL, "GITOPS_SCAFFOLDER_API_KEY="+scaffolder.APIKey)
	if provisioner != nil {
		// The key goes by environment (the manager has no flag for it: no secret on a command line).
		// EKS tokens the manager mints are signed for the AWS played here.
		mgrArgs = append(mgrArgs, "--cluster-provisioner-base-url", provisioner.URL, "--aws-endpoint-url", provisioner.AWS.URL)
		mgrEnv = append(mgrEnv, "CLUSTER_PROVISIONER_API_KEY="+provisioner.APIKey)
	}
	mgr := exec.CommandContext(ctx, filepath.Join(binDir(root), "manager"), mgrArgs...)
	mgr.Env = mgrEnv
	mgr.Stdout, mgr.Stderr = mf, mf
	mgr.Cancel = func() error { return mgr.Process.Signal(syscall.SIGTERM) }
	mgr.WaitDelay = 20 * time.Second
	mgrProc, err := procs.Start("manager", mgr)
	if err != nil {
		return fmt.Errorf("failed to start bin/manager (run `make build`): %w", err)
	}

	fmt.Printf(`
KubeOpera is running. kcp: https://127.0.0.1:%d   demo workspace: %s (logical cluster %s)
  kcp admin kubeconfig:   %s/kcp.kubeconfig   (contexts: root, demo)
  backend kubeconfig:     %s/backend.kubeconfig
  logs:                   %s/logs/

As a tenant, in another shell:
  export KUBECONFIG=$PWD/%s/kcp.kubeconfig
  kubectl ws :%s                # with the kcp kubectl plugin; without it use --context demo
  kubectl --context demo apply -f config/samples/tenant.yaml
  kubectl --context demo get tenants
  kubectl --context demo wait --for=condition=Ready tenant/alice-default --timeout=10m
  kubectl --context demo get tenant alice-default -o jsonpath='{.status.endpoint}'
  kubectl --context demo get secret tenant-7e9d3a1b-0000-4000-8000-000000000002-kubeconfig -o jsonpath='{.data.kubeconfig}' | base64 -d > alice.kubeconfig
  kubectl --kubeconfig alice.kubeconfig get namespaces      # your vCluster
`, port, demoWorkspace, demoLC, state, state, state, state, demoWorkspace)
	if os.Getenv("BACKEND_KUBECONFIG") == "" && !realVClusters {
		fmt.Printf(`
Not run as root, so no vCluster can run here (each needs network and mount namespaces of its
own) and a Tenant waits in Provisioning. To play the vCluster writing its kubeconfig Secret, run:
  bin/devenv simulate-vcluster alice-default %s
`, demoWorkspace)
	}
	fmt.Printf(`
KubernetesCluster demo (the seed's): the catalog is in %s; as a tenant:
  kubectl --context demo get providermachineflavors
  kubectl --context demo apply -f config/samples/kubernetescluster-demo.yaml
  bin/devenv simulate-crossplane          # plays the OTC and AWS providers and their clouds until Ctrl-C
  kubectl --context demo -n demo wait --for=condition=Ready kubernetescluster/my-cluster --timeout=5m
  kubectl --context demo -n demo get secret my-cluster-kubeconfig -o jsonpath='{.data.kubeconfig}' | base64 -d
`, bootstrap.PlatformWorkspace)
	fmt.Printf(`
HostCluster walkthrough: connect the local target cluster from the demo workspace.
  bin/devenv hostcluster-secrets | kubectl --context demo apply -f -
  kubectl --context demo apply -f config/samples/hostcluster.yaml
  kubectl --context demo -n kubeopera-system get hostclusters -w
  kubectl --context demo -n kubeopera-system wait --for=condition=Ready hostcluster/my-cluster --timeout=10m
  kubectl --context demo -n kubeopera-system get secret hostcluster-7e9d3a1b-admin-password -o jsonpath='{.data.password}' | base64 -d
  kubectl --kubeconfig %s/target/target.kubeconfig -n flux-system get gitrepositories,kustomizations
`, state)
	if provisioner != nil {
		fmt.Printf(`
Provisioning walkthrough (provision_vanilla): the provisioner is %s, AWS is played at %s.
No machines are built here: the "provisioned" cluster is the local target, and bin/devenv plays
what AWS's machines would do.
  bin/devenv hostcluster-secrets | kubectl --context demo apply -f -   # the git credentials (done if you connected my-cluster)
  bin/devenv aws-credentials | kubectl --context demo apply -f -       # Secret aws-credentials: an AWS user's key
  kubectl --context demo apply -f config/samples/hostcluster-provisioned.yaml
  kubectl --context demo -n kubeopera-system get hostcluster my-aws-cluster -w      # Provisioning; describe shows the run: Queued, Planning, Applying
  bin/devenv simulate-control-plane c-7e9d3a1b    # node 0 publishes its admin.conf (the target's) to SSM
  kubectl --context demo -n kubeopera-system wait --for=condition=Ready hostcluster/my-aws-cluster --timeout=10m
As the admin: the runs are Jobs on the backend; no kubelet keeps their logs here, so each run's
output is copied to %s/logs/runs/<job>.log.
  kubectl --kubeconfig %s/backend.kubeconfig -n kubeopera-provisioning get jobs
  curl -s -H "X-Api-Key: $(cat %s/%s/%s)" %s/api/v1/provisions/<id>
`, provisioner.URL, provisioner.AWS.URL, state, state, state, provisioningDir, provisioningAPIKey, provisioner.URL)
	}
	fmt.Printf(`
Metrics are HTTPS (self-signed) for callers allowed by ClusterRole kubeopera-metrics-reader, e.g.
ServiceAccount kubeopera-system/kubeopera-metrics-reader; probes are plain HTTP:
  curl -sk -H "Authorization: Bearer $(kubectl --kubeconfig %s/backend.kubeconfig -n kubeopera-system create token kubeopera-metrics-reader)" https://127.0.0.1:8080/metrics
  curl -s http://127.0.0.1:8081/readyz
`, state)
	fmt.Printf(`
Fleet overview for platform admins (every HostCluster of every workspace, live): http://%s/
  JSON:  curl -s http://%s/v1/fleet
  Register the backend as the platform's own cluster (the host), with the manager's identities:
  %s/manager register-host --kcp-kubeconfig %s/kcp.kubeconfig --kcp-context user --backend-kubeconfig %s
`, overviewAddr, overviewAddr, relOr(root, binDir(root)), state, relOr(root, managerBackendKubeconfig))
	fmt.Println("\nCtrl-C stops everything; the next `make run` reuses what is stored in .dev/.")

	err = mgrProc.Wait()
	if ctx.Err() != nil {
		say("Stopping")
		return nil
	}
	return fmt.Errorf("the manager exited: %v (see %s)", err, mgrLog)
}

// claims are the ports and data directories this run needs: a process it did not start holding
// one stops it at once, naming that process, rather than a server failing to start later (etcd
// waits for its data directory's lock until envtest gives up, five times over).
func claims(root, dev string, kcpPort int) []devenv.Claim {
	c := []devenv.Claim{{Port: kcpPort, What: "kcp, KCP_PORT"}}
	for _, p := range []struct{ env, def, what string }{
		{"KUBEOPERA_GIT_PORT", "8090", "the git server"},
		{"KUBEOPERA_SCAFFOLDER_PORT", "8091", "the gitops-scaffolder"},
		{"KUBEOPERA_FLEET_OVERVIEW_PORT", "8083", "the fleet overview"},
	} {
		if n, err := strconv.Atoi(envOr(p.env, p.def)); err == nil {
			c = append(c, devenv.Claim{Port: n, What: p.what + ", " + p.env})
		}
	}
	c = append(c,
		devenv.Claim{Port: 8080, What: "the manager's metrics"},
		devenv.Claim{Port: 8081, What: "the manager's health probes"},
		devenv.Claim{Dir: filepath.Join(dev, "kcp"), What: "kcp's state"},
		devenv.Claim{Dir: filepath.Join(dev, "target", "etcd"), What: "the target cluster's etcd"},
	)
	if os.Getenv("BACKEND_KUBECONFIG") == "" {
		c = append(c, devenv.Claim{Dir: filepath.Join(dev, "backend-etcd"), What: "the backend's etcd"})
		if _, err := provisioning.Terraform(root); err == nil {
			if n, err := strconv.Atoi(envOr("KUBEOPERA_PROVISIONER_PORT", "8092")); err == nil {
				c = append(c, devenv.Claim{Port: n, What: "the provisioner, KUBEOPERA_PROVISIONER_PORT"})
			}
		}
	}
	return c
}

// applyFile creates the objects of a manifest file (kept when they exist).
func applyFile(ctx context.Context, cfg *rest.Config, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := manifests.Decode(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	for _, o := range objs {
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := c.Create(ctx, o.DeepCopy())
			return err == nil || apierrors.IsAlreadyExists(err), nil
		})
		if err != nil {
			return fmt.Errorf("failed to create %s %s from %s: %w", o.GetKind(), o.GetName(), path, err)
		}
	}
	return nil
}

// simulateCrossplane plays, on the embedded backend until Ctrl-C, what make run's Crossplane
// cannot do there: provider-opentelekomcloud with the OTC API (and Crossplane's managed
// reconciler for its resources) and provider-upjet-aws with AWS under the resources Crossplane
// composes for ManagedClusters. test/sim's CrossplaneOTC and AWSProvider say what they do and
// cite where each behaviour comes from.
func simulateCrossplane() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	backendCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir(), "backend.kubeconfig"))
	if err != nil {
		return err
	}
	say("Playing Crossplane's OTC provider and the OTC API (VpcV1, SubnetV1, ClusterV3, NodePoolV3) and provider-upjet-aws and AWS (the IAM and EKS resources Crossplane composes for ManagedClusters) on the embedded backend, in every kcp-* namespace; Ctrl-C stops")
	errs := make(chan error, 2)
	go func() { errs <- (&sim.CrossplaneOTC{Backend: backendCfg, ReadyAfter: 3 * time.Second}).Run(ctx) }()
	go func() { errs <- (&sim.AWSProvider{Backend: backendCfg, ReadyAfter: 3 * time.Second}).Run(ctx) }()
	err = <-errs
	stop()
	return errors.Join(err, <-errs)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// hostClusterSecrets prints the Secrets a tenant puts next to the sample HostCluster
// (config/samples/hostcluster.yaml): the local target's kubeconfig under key "kubeconfig", and
// the local git server's credentials (username, password, as Flux's GitRepository takes them),
// both labelled so the platform may read them.
func hostClusterSecrets(args []string) error {
	clusterID := "7e9d3a1b"
	if len(args) > 0 {
		clusterID = args[0]
	}
	raw, err := os.ReadFile(filepath.Join(stateDir(), "target", "target.kubeconfig"))
	if err != nil {
		return fmt.Errorf("no target kubeconfig (is `make run` running?): %w", err)
	}
	label := map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}
	list := []any{
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "kubeopera-system"}},
		&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "kubeopera-system", Name: "hostcluster-" + clusterID + "-input-kubeconfig", Labels: label},
			StringData: map[string]string{"kubeconfig": string(raw)}},
		&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "kubeopera-system", Name: "gitops-iac-credentials", Labels: label},
			StringData: map[string]string{"username": sim.GitUsername, "password": sim.GitPassword}},
	}
	return printYAML(list...)
}

// writeKCPKubeconfig copies kcp's admin kubeconfig and adds a "demo" context for root:orgs:demo.
func writeKCPKubeconfig(src, dst string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	rootCtx, ok := cfg.Contexts["root"]
	if !ok {
		return fmt.Errorf("%s has no context root", src)
	}
	rootCluster := cfg.Clusters[rootCtx.Cluster]
	demo := rootCluster.DeepCopy()
	demo.Server = workspaces.ServerBase(rootCluster.Server) + "/clusters/" + demoWorkspace
	cfg.Clusters["demo"] = demo
	c := rootCtx.DeepCopy()
	c.Cluster = "demo"
	cfg.Contexts["demo"] = c
	return clientcmd.WriteToFile(*cfg, dst)
}

// simulateVCluster plays the vCluster control plane of a Tenant once its Pod would be up (the
// embedded backend has no kubelet): it writes the kubeconfig Secret as loft-sh/vcluster v0.21.2
// does. The Secret is named "vc-" + the vCluster's name, which is its Helm release name, so
// release vc-<tenantName> gets Secret vc-vc-<tenantName> (pkg/setup/controllers.go lines
// 271-272, pkg/util/kubeconfig/kubeconfig.go lines 28-35 and 37-100, chart/templates/
// statefulset.yaml lines 191-192): keys config, certificate-authority, client-certificate,
// client-key and token, type Opaque, owned by the vCluster's Service, with the server of the
// release's exportKubeConfig.server. test/framework/sim.VClusterWritesKubeconfig says how
// each part follows vCluster's source; the e2e suite plays the vCluster with the same function.
func simulateVCluster(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("usage: devenv simulate-vcluster <tenantName> [workspace path, default %s]", demoWorkspace)
	}
	tenantName, ws := args[0], demoWorkspace
	if len(args) > 1 {
		ws = args[1]
	}
	ctx := context.Background()
	kcpCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir(), "kcp.kubeconfig"))
	if err != nil {
		return err
	}
	lc, err := workspaces.LogicalClusterOf(ctx, kcpCfg, ws)
	if err != nil {
		return err
	}
	backendCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir(), "backend.kubeconfig"))
	if err != nil {
		return err
	}
	ns, release := workspaces.VClusterNamespace(lc, tenantName), "vc-"+tenantName
	written, err := sim.VClusterWritesKubeconfig(ctx, backendCfg, ns, release)
	if err != nil {
		return fmt.Errorf("%w (is the Tenant Provisioning?)", err)
	}
	say("Wrote Secret %s/%s as vCluster %s would; the Tenant becomes Ready at its next poll (within 15 s)", ns, written.Secret.Name, release)
	return nil
}

// relOr returns path relative to root when it is below root, else path.
func relOr(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// printYAML prints objs as one YAML stream, ready for `kubectl apply -f -`.
func printYAML(objs ...any) error {
	for _, obj := range objs {
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", out)
	}
	return nil
}

// startVClusters plays the kubelet for every vCluster StatefulSet on the backend (the real
// vcluster binary runs, sim.VClusterPods) and the backend's load balancer controller
// (sim.LoadBalancers, reaching the vClusters through VClusterPods), until the returned stop.
func startVClusters(ctx context.Context, backend *rest.Config, bin, dir string, log io.Writer, procs *devenv.Processes) (func(), error) {
	pods := &sim.VClusterPods{Host: backend, BinDir: bin, WorkDir: dir, Log: log, Processes: procs}
	lbs, err := sim.NewLoadBalancers(backend, pods.DialService, func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) })
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := pods.Run(ctx); err != nil {
			say("The vClusters cannot run: %v", err)
		}
	}()
	go func() { defer wg.Done(); lbs.Run(ctx) }()
	return func() { cancel(); wg.Wait() }, nil
}
