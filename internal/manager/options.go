// Package manager assembles the one KubeOpera manager: a multicluster-runtime manager engaging
// every workspace bound to the kubeopera.io and platform.edgeconnect.eu exports (kcp apiexport
// providers joined by a multi provider), a backend client, and every reconciler. cmd/manager
// parses flags into Options and calls Run; the e2e suite and the dev environment call Run too.
package manager

import (
	"os"
	"time"

	"github.com/spf13/pflag"
)

// Options configure the manager. Every option has a flag; the seeds' settings also read their
// environment variables.
type Options struct {
	// KCPKubeconfig is a kubeconfig for kcp; its server may point anywhere in kcp, the manager
	// talks to PlatformWorkspace.
	KCPKubeconfig string
	// KCPContext selects a context of KCPKubeconfig (empty: current).
	KCPContext string
	// SweepKCPContext selects the context the orphan sweep reads LogicalClusters with; it needs
	// read access to logicalclusters in every workspace (e.g. a shard admin). Empty: KCPContext.
	SweepKCPContext string
	// PlatformWorkspace is where the exports and their endpoint slices live.
	PlatformWorkspace string
	// Bootstrap applies the platform workspace's schemas, exports, WorkspaceType and RBAC at start.
	Bootstrap bool
	// BackendKubeconfig is the backend cluster's kubeconfig; empty means in-cluster.
	BackendKubeconfig string
	// KubeoperaEndpointSlice and PlatformEndpointSlice name the exports' endpoint slices.
	KubeoperaEndpointSlice string
	PlatformEndpointSlice  string

	// VClusterChart is the vCluster chart reference (OCI or a local path) and VClusterChartVersion
	// its version; HelmCacheDir is Helm's cache.
	VClusterChart        string
	VClusterChartVersion string
	HelmCacheDir         string

	// KubeoperaAPIBaseURL and InternalServiceToken configure the CloudSpace callback.
	KubeoperaAPIBaseURL  string
	InternalServiceToken string
	// ClusterProvisionerBaseURL/APIKey and GitOpsScaffolderBaseURL/APIKey configure the
	// HostCluster controller's delegates.
	ClusterProvisionerBaseURL string
	ClusterProvisionerAPIKey  string
	GitOpsScaffolderBaseURL   string
	GitOpsScaffolderAPIKey    string
	// Environment is passed to Helm values and selects development logging.
	Environment string

	MetricsAddr             string
	ProbeAddr               string
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string

	// TenantRequeueInterval is the poll interval of a Provisioning Tenant.
	TenantRequeueInterval time.Duration
	// TerminatorPollInterval is how often terminating workspaces are looked for.
	TerminatorPollInterval time.Duration
	// OrphanSweepInterval is how often backend namespaces without a workspace are looked for.
	OrphanSweepInterval time.Duration
	// OrphanSweepDelete lets the orphan sweep delete backend namespaces whose workspace is
	// positively known to be gone; off, it only reports them.
	OrphanSweepDelete bool
	// OrphanSweepMaxDeletions caps the namespaces one sweep deletes.
	OrphanSweepMaxDeletions int
}

// DefaultOptions returns the defaults, with the seeds' environment variables applied.
func DefaultOptions() Options {
	return Options{
		KCPKubeconfig:             os.Getenv("KCP_KUBECONFIG"),
		PlatformWorkspace:         "root:kubeopera",
		BackendKubeconfig:         os.Getenv("BACKEND_KUBECONFIG"),
		KubeoperaEndpointSlice:    "kubeopera.io",
		PlatformEndpointSlice:     "platform.edgeconnect.eu",
		VClusterChart:             envOr("VCLUSTER_CHART", "oci://ghcr.io/loft-sh/charts/vcluster"),
		VClusterChartVersion:      envOr("VCLUSTER_CHART_VERSION", "0.21.2"),
		HelmCacheDir:              os.Getenv("HELM_CACHE_HOME"),
		KubeoperaAPIBaseURL:       envOr("KUBEOPERA_API_BASE_URL", "http://kubeopera-api:8080"),
		InternalServiceToken:      os.Getenv("INTERNAL_SERVICE_TOKEN"),
		ClusterProvisionerBaseURL: os.Getenv("CLUSTER_PROVISIONER_BASE_URL"),
		ClusterProvisionerAPIKey:  os.Getenv("CLUSTER_PROVISIONER_API_KEY"),
		GitOpsScaffolderBaseURL:   os.Getenv("GITOPS_SCAFFOLDER_BASE_URL"),
		GitOpsScaffolderAPIKey:    os.Getenv("GITOPS_SCAFFOLDER_API_KEY"),
		Environment:               envOr("ENVIRONMENT", "development"),
		MetricsAddr:               ":8080",
		ProbeAddr:                 ":8081",
		LeaderElect:               true,
		LeaderElectionNamespace:   "kubeopera-system",
		LeaderElectionID:          "kubeopera-manager",
		TenantRequeueInterval:     15 * time.Second,
		TerminatorPollInterval:    5 * time.Second,
		OrphanSweepInterval:       10 * time.Minute,
		OrphanSweepMaxDeletions:   5,
	}
}

// BindFlags binds every option to a flag on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.KCPKubeconfig, "kcp-kubeconfig", o.KCPKubeconfig, "kubeconfig of kcp (env KCP_KUBECONFIG)")
	fs.StringVar(&o.KCPContext, "kcp-context", o.KCPContext, "context of --kcp-kubeconfig to use (default: current)")
	fs.StringVar(&o.SweepKCPContext, "orphan-sweep-kcp-context", o.SweepKCPContext, "context of --kcp-kubeconfig the orphan sweep uses to look workspaces up; it needs get on logicalclusters in every workspace (default: --kcp-context)")
	fs.StringVar(&o.PlatformWorkspace, "platform-workspace", o.PlatformWorkspace, "kcp workspace holding the APIExports and their endpoint slices")
	fs.BoolVar(&o.Bootstrap, "bootstrap", o.Bootstrap, "create root:kubeopera and apply its schemas, exports, WorkspaceType and RBAC before starting (idempotent)")
	fs.StringVar(&o.BackendKubeconfig, "backend-kubeconfig", o.BackendKubeconfig, "kubeconfig of the backend cluster; empty: in-cluster (env BACKEND_KUBECONFIG)")
	fs.StringVar(&o.KubeoperaEndpointSlice, "kubeopera-endpointslice", o.KubeoperaEndpointSlice, "APIExportEndpointSlice of the kubeopera.io export")
	fs.StringVar(&o.PlatformEndpointSlice, "platform-endpointslice", o.PlatformEndpointSlice, "APIExportEndpointSlice of the platform.edgeconnect.eu export")
	fs.StringVar(&o.VClusterChart, "vcluster-chart", o.VClusterChart, "vCluster Helm chart: OCI reference or local path (env VCLUSTER_CHART)")
	fs.StringVar(&o.VClusterChartVersion, "vcluster-chart-version", o.VClusterChartVersion, "vCluster chart version (env VCLUSTER_CHART_VERSION)")
	fs.StringVar(&o.HelmCacheDir, "helm-cache-dir", o.HelmCacheDir, "Helm cache directory (env HELM_CACHE_HOME)")
	fs.StringVar(&o.KubeoperaAPIBaseURL, "kubeopera-api-base-url", o.KubeoperaAPIBaseURL, "kubeopera-api base URL for the CloudSpace callback; empty disables it (env KUBEOPERA_API_BASE_URL)")
	fs.StringVar(&o.ClusterProvisionerBaseURL, "cluster-provisioner-base-url", o.ClusterProvisionerBaseURL, "cluster-provisioner URL (env CLUSTER_PROVISIONER_BASE_URL)")
	fs.StringVar(&o.GitOpsScaffolderBaseURL, "gitops-scaffolder-base-url", o.GitOpsScaffolderBaseURL, "gitops-scaffolder URL (env GITOPS_SCAFFOLDER_BASE_URL)")
	fs.StringVar(&o.Environment, "environment", o.Environment, "environment name; development enables development logging (env ENVIRONMENT)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader on the backend cluster so several replicas are safe")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "backend namespace of the leader election lease")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader election lease")
	fs.DurationVar(&o.TenantRequeueInterval, "tenant-requeue-interval", o.TenantRequeueInterval, "poll interval of a Provisioning Tenant")
	fs.DurationVar(&o.TerminatorPollInterval, "terminator-poll-interval", o.TerminatorPollInterval, "how often terminating workspaces are looked for")
	fs.DurationVar(&o.OrphanSweepInterval, "orphan-sweep-interval", o.OrphanSweepInterval, "how often backend namespaces are checked for a workspace")
	fs.BoolVar(&o.OrphanSweepDelete, "orphan-sweep-delete", o.OrphanSweepDelete, "let the orphan sweep delete backend namespaces whose workspace every kcp shard reports gone on two sweeps; off: report only")
	fs.IntVar(&o.OrphanSweepMaxDeletions, "orphan-sweep-max-deletions", o.OrphanSweepMaxDeletions, "most backend namespaces one orphan sweep deletes")
	// Secrets are read from the environment only, never from flags (they would show in ps).
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}
