// Package manager assembles the one KubeOpera manager: a multicluster-runtime manager engaging
// every workspace bound to the kubeopera.io and platform.edgeconnect.eu exports (kcp apiexport
// providers joined by a multi provider), a backend client, and every reconciler. cmd/manager
// parses flags into Options and calls Run; the e2e suite and the dev environment call Run too.
package manager

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/controllers/tenant"
	"github.com/kubeopera/kubeopera/internal/aws/externalid"
	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/internal/vcluster"
)

// Options configure the manager. Every option has a flag; the seeds' settings also read their
// environment variables.
type Options struct {
	// KCPKubeconfig is a kubeconfig for kcp; its server may point anywhere in kcp, the manager
	// talks to PlatformWorkspace.
	KCPKubeconfig string
	// KCPContext selects a context of KCPKubeconfig (empty: current).
	KCPContext string
	// SweepKCPContext selects the context the orphan sweep looks workspaces up with: it lists the
	// Shards in root and reads each workspace's LogicalCluster on every shard, so it needs a shard
	// admin; with less, the sweep reports every namespace as unverified. Empty: KCPContext.
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
	// ProvisionerIdentity is the provisioner's ServiceAccount on the backend
	// (<namespace>/<name>), let read the cloud credential copies of provisioned HostClusters.
	ProvisionerIdentity string
	// ScaffolderIdentity is the gitops-scaffolder's ServiceAccount on the backend
	// (<namespace>/<name>): it may read each HostCluster's stored Secrets, by name.
	ScaffolderIdentity      string
	GitOpsScaffolderBaseURL string
	GitOpsScaffolderAPIKey  string
	// AWSEndpointURL is the AWS endpoint the EKS tokens the manager mints in process are signed
	// for (sts:AssumeRole, and the presigned sts:GetCallerIdentity the cluster replays); empty:
	// AWS's regional STS endpoints. Only tests and local development set it (their local AWS); the
	// manager's own AWS environment is never used for a tenant.
	AWSEndpointURL string
	// AWSPlatformIdentity says whether the manager has an AWS identity of its own: "default" is
	// the AWS SDK's default credential chain of the manager's process (its environment, a web
	// identity token as EKS's IRSA mounts it, a container or instance role), "" none. It is used
	// for one thing only: to assume the role of a tenant's credential that names a role_arn and no
	// access key (sts:AssumeRole with the workspace's external ID) for a provisioned EKS
	// cluster's tokens, which that role's session signs. Without it, such a credential is refused
	// for provision_eks.
	AWSPlatformIdentity string
	// AWSExternalIDKeySecret is the backend Secret (<namespace>/<name>) holding the installation
	// key of the workspaces' AWS external IDs; the manager creates it, immutable, when absent
	// (config/rbac/external-id-key.yaml lets it create only that one).
	AWSExternalIDKeySecret string
	// Environment is passed to Helm values and selects development logging.
	Environment string

	// FluxChart is the Flux Helm chart installed on HostClusters' targets (OCI reference, URL or a
	// local path) and FluxChartVersion its version.
	FluxChart        string
	FluxChartVersion string
	// GitOpsBranch is the branch of spec.gitOpsRepoURL Flux follows.
	GitOpsBranch string
	// GitOpsSyncInterval is how often Flux on a target looks at the tree's repository.
	GitOpsSyncInterval time.Duration
	// KubernetesClusterPollInterval is how often a KubernetesCluster being built or torn down is
	// looked at again.
	KubernetesClusterPollInterval time.Duration
	// OTCAuthHosts are the hosts OTC credentials' auth_url may name (ProviderConfig).
	OTCAuthHosts []string
	// HostClusterAccessGiveUp is how long an unreachable target is retried before its HostCluster
	// fails (docs/hostcluster.md#access: 5 minutes).
	HostClusterAccessGiveUp time.Duration
	// HostClusterPollInterval is how often a HostCluster waiting on Flux, the scaffolder or its
	// apps Kustomization is looked at again.
	HostClusterPollInterval time.Duration
	// HostClusterInventoryInterval is how often a Ready HostCluster's inventory and health score
	// are refreshed (jittered).
	HostClusterInventoryInterval time.Duration
	// FleetPriceTable is the path of the platform admin's price table of node instance types
	// (YAML or JSON: currency and hourly prices, docs/fleet.md#cost), for each HostCluster's
	// estimated monthly cost; empty: no estimates. In a deployment, a ConfigMap mounted as a file.
	FleetPriceTable string
	// HostClusterConcurrency is how many HostClusters are reconciled at once.
	HostClusterConcurrency int
	// KubernetesClusterConcurrency, ProviderConfigConcurrency, MachineCapabilitiesConcurrency and
	// FlavorCatalogConcurrency are how many objects of each kind are reconciled at once, across
	// all workspaces.
	KubernetesClusterConcurrency, ProviderConfigConcurrency, MachineCapabilitiesConcurrency, FlavorCatalogConcurrency int
	// TargetDenyCIDRs are ranges (CIDRs or addresses) the manager never dials on a tenant's
	// behalf, added to what it always refuses (internal/netguard): loopback, link-local with the
	// cloud metadata endpoints, unspecified, multicast and reserved addresses, kcp's addresses
	// and the backend's API server, service and pod ranges. Private ranges (RFC 1918, unique
	// local IPv6) are not denied by default, as a tenant's cluster may sit in a private network
	// the backend reaches: deny those the backend shares with what tenants must not reach.
	TargetDenyCIDRs []string
	// TargetAllowCIDRs are exceptions: ranges tenants' targets may be at although a deny rule
	// covers them. The most specific rule decides (an exception as long as a deny rule wins over
	// it), and kcp's and the backend API server's own address and port are never allowed. make run
	// and the tests allow 127.0.0.1/32, where their target clusters listen.
	TargetAllowCIDRs []string
	// BackendServiceCIDRs and BackendPodCIDRs are the backend's Service and Pod ranges, denied
	// as such, for when the manager cannot read them from the backend (it reads the ServiceCIDRs,
	// the kubernetes Service and EndpointSlice and the nodes' pod CIDRs).
	BackendServiceCIDRs []string
	BackendPodCIDRs     []string
	// TargetMaxResponseSize (a quantity), TargetMaxResponseElements, TargetMaxListPages and
	// TargetMaxListItems cap what the manager reads from HostClusters' targets
	// (internal/readlimit): the bytes of one response once decompressed, its JSON array elements,
	// and the pages and items of one list. Over a cap, the HostCluster fails with reason
	// ReadLimitExceeded.
	TargetMaxResponseSize     string
	TargetMaxResponseElements int64
	TargetMaxListPages        int
	TargetMaxListItems        int
	// ReconcileTimeout is the deadline of every reconcile pass of every controller; 0: none.
	ReconcileTimeout time.Duration
	// OperationTimeout bounds every long operation run outside the workers (a Flux or vCluster
	// install); 0: reconcile.DefaultOperationTimeout.
	OperationTimeout time.Duration
	// MaxWorkersPerWorkspace bounds how many of one controller's workers one workspace holds at
	// once, and MaxOperationsPerWorkspace how many of one controller's operation slots; 0: no
	// bound but the controller's own.
	MaxWorkersPerWorkspace    int
	MaxOperationsPerWorkspace int
	// MaxProvisioningRunsPerHour caps the provisioning runs (apply and destroy) one workspace
	// starts in any hour, however many HostClusters it creates and deletes; 0 means no limit.
	MaxProvisioningRunsPerHour int
	// AuthAPINamespace, AuthAPIService, AuthAPIPort and AuthAPISecret locate authapi on a target
	// for the admin bootstrap (its Service, reached through the API server's service proxy, and the
	// Secret holding INTERNAL_API_KEY).
	AuthAPINamespace string
	AuthAPIService   string
	AuthAPIPort      string
	AuthAPISecret    string

	MetricsAddr             string
	ProbeAddr               string
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	// MetricsSecure serves /metrics over HTTPS behind controller-runtime's authentication and
	// authorization filter (TokenReview + SubjectAccessReview on the backend: the caller needs
	// get on the non-resource URL /metrics, e.g. ClusterRole kubeopera-metrics-reader). Off, it is
	// plain HTTP open to anyone who reaches the port.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for /metrics; empty (or missing files): a
	// self-signed certificate made at start.
	MetricsCertDir string
	// FleetOverviewAddr is where the platform admins' fleet overview (page, JSON, see
	// internal/overview) is served; "0" or empty: off. Without FleetOverviewSecure it must be a
	// loopback address (reach it with kubectl port-forward).
	FleetOverviewAddr string
	// FleetOverviewSecure serves the fleet overview over HTTPS and authenticates and authorizes
	// every request against the backend cluster (TokenReview + SubjectAccessReview, as /metrics:
	// get on its paths, ClusterRole kubeopera-fleet-viewer); required to bind it to anything but
	// loopback.
	FleetOverviewSecure bool
	// FleetOverviewCertDir holds tls.crt and tls.key for the secure fleet overview; empty: a
	// self-signed certificate made at start.
	FleetOverviewCertDir string
	// FleetOverviewRefresh is how often an open overview page updates itself.
	FleetOverviewRefresh time.Duration
	// PprofAddr serves net/http/pprof (heap, goroutine profiles) on this address; empty or "0":
	// off. Bind it to localhost: the profiles are not authenticated.
	PprofAddr string
	// KCPQPS/KCPBurst and BackendQPS/BackendBurst bound the manager's request rate to kcp (one
	// limiter per export and shard, shared by every workspace) and to the backend.
	KCPQPS       float32
	KCPBurst     int
	BackendQPS   float32
	BackendBurst int

	// TenantRequeueInterval is the poll interval of a Provisioning Tenant.
	TenantRequeueInterval time.Duration
	// TenantConcurrency is how many Tenants are reconciled at once, across all workspaces.
	TenantConcurrency int
	// TenantInstallConcurrency is how many vCluster Helm installs and upgrades run at once,
	// outside the reconcile workers.
	TenantInstallConcurrency int
	// MaxTenantsPerWorkspace, MaxTenantCPUPerWorkspace and MaxTenantMemoryPerWorkspace are the
	// per-workspace limits on Tenants (count, sum of CPU quotas, sum of memory quotas); 0 or ""
	// means no limit.
	MaxTenantsPerWorkspace      int
	MaxTenantCPUPerWorkspace    string
	MaxTenantMemoryPerWorkspace string
	// MaxHostClustersPerWorkspace and MaxKubernetesClustersPerWorkspace cap how many HostClusters
	// and KubernetesClusters one workspace may have; 0 means no limit.
	MaxHostClustersPerWorkspace       int
	MaxKubernetesClustersPerWorkspace int

	// VClusterIngressClass, when set, lets vClusters sync Ingresses of that class to the backend;
	// empty keeps Ingress sync off.
	VClusterIngressClass string
	// VClusterDistro is the distro of every vCluster (k3s, the seed's; k8s).
	VClusterDistro string
	// VClusterServiceCIDR is the backend's Service range given to every vCluster; empty: read
	// from the backend's ServiceCIDR "kubernetes".
	VClusterServiceCIDR string
	// VClusterExposure is how vClusters are reached from outside the backend: none,
	// loadbalancer or ingress (with VClusterDomain and VClusterControlPlaneIngressClass).
	VClusterExposure                 string
	VClusterDomain                   string
	VClusterControlPlaneIngressClass string
	// ClaimsNamespace is the backend namespace holding the cloudSpaceID claim records.
	ClaimsNamespace string
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
		KCPKubeconfig:                    os.Getenv("KCP_KUBECONFIG"),
		PlatformWorkspace:                "root:kubeopera",
		BackendKubeconfig:                os.Getenv("BACKEND_KUBECONFIG"),
		KubeoperaEndpointSlice:           "kubeopera.io",
		PlatformEndpointSlice:            "platform.edgeconnect.eu",
		VClusterChart:                    envOr("VCLUSTER_CHART", "oci://ghcr.io/loft-sh/charts/vcluster"),
		VClusterChartVersion:             envOr("VCLUSTER_CHART_VERSION", "0.21.2"),
		HelmCacheDir:                     os.Getenv("HELM_CACHE_HOME"),
		VClusterDistro:                   envOr("VCLUSTER_DISTRO", vcluster.DistroK3s),
		VClusterExposure:                 envOr("VCLUSTER_EXPOSURE", string(vcluster.ExposeNone)),
		VClusterDomain:                   os.Getenv("VCLUSTER_DOMAIN"),
		VClusterServiceCIDR:              os.Getenv("VCLUSTER_SERVICE_CIDR"),
		VClusterControlPlaneIngressClass: envOr("VCLUSTER_CONTROL_PLANE_INGRESS_CLASS", vcluster.DefaultControlPlaneIngressClass),
		KubeoperaAPIBaseURL:              envOr("KUBEOPERA_API_BASE_URL", "http://kubeopera-api:8080"),
		InternalServiceToken:             os.Getenv("INTERNAL_SERVICE_TOKEN"),
		ClusterProvisionerBaseURL:        os.Getenv("CLUSTER_PROVISIONER_BASE_URL"),
		ClusterProvisionerAPIKey:         os.Getenv("CLUSTER_PROVISIONER_API_KEY"),
		ProvisionerIdentity:              hostcluster.DefaultProvisionerIdentity,
		ScaffolderIdentity:               hostcluster.DefaultScaffolderIdentity,
		GitOpsScaffolderBaseURL:          os.Getenv("GITOPS_SCAFFOLDER_BASE_URL"),
		GitOpsScaffolderAPIKey:           os.Getenv("GITOPS_SCAFFOLDER_API_KEY"),
		AWSExternalIDKeySecret:           externalid.DefaultNamespace + "/" + externalid.DefaultName,
		Environment:                      envOr("ENVIRONMENT", "development"),
		FluxChart:                        envOr("FLUX_CHART", flux.DefaultChartRef),
		FluxChartVersion:                 envOr("FLUX_CHART_VERSION", DefaultFluxChartVersion),
		GitOpsBranch:                     "main",
		GitOpsSyncInterval:               hostcluster.DefaultSyncInterval,
		HostClusterAccessGiveUp:          5 * time.Minute,
		OTCAuthHosts:                     otc.DefaultAuthHosts,
		KubernetesClusterPollInterval:    10 * time.Second,
		HostClusterPollInterval:          10 * time.Second,
		HostClusterInventoryInterval:     5 * time.Minute,
		HostClusterConcurrency:           8,
		KubernetesClusterConcurrency:     8,
		ProviderConfigConcurrency:        4,
		MachineCapabilitiesConcurrency:   4,
		FlavorCatalogConcurrency:         4,
		TargetMaxResponseSize:            readlimit.FormatQuantity(readlimit.DefaultMaxResponseBytes),
		TargetMaxResponseElements:        readlimit.DefaultMaxResponseElements,
		TargetMaxListPages:               readlimit.DefaultMaxListPages,
		TargetMaxListItems:               readlimit.DefaultMaxListItems,
		ReconcileTimeout:                 5 * time.Minute,
		OperationTimeout:                 reconcile.DefaultOperationTimeout,
		MaxWorkersPerWorkspace:           2,
		MaxOperationsPerWorkspace:        2,
		MaxProvisioningRunsPerHour:       hostcluster.DefaultMaxRunsPerHour,
		AuthAPINamespace:                 "kubeopera",
		AuthAPIService:                   "authapi",
		AuthAPIPort:                      "http",
		AuthAPISecret:                    "authapi-secrets",
		MetricsAddr:                      ":8080",
		MetricsSecure:                    true,
		KCPQPS:                           100,
		KCPBurst:                         200,
		BackendQPS:                       100,
		BackendBurst:                     200,
		ProbeAddr:                        ":8081",
		FleetOverviewAddr:                "127.0.0.1:8083",
		FleetOverviewRefresh:             5 * time.Second,
		LeaderElect:                      true,
		LeaderElectionNamespace:          "kubeopera-system",
		LeaderElectionID:                 "kubeopera-manager",
		TenantRequeueInterval:            15 * time.Second,
		TenantConcurrency:                8,
		TenantInstallConcurrency:         4,
		MaxTenantsPerWorkspace:           10,
		MaxTenantCPUPerWorkspace:         "16",
		MaxTenantMemoryPerWorkspace:      "64Gi",
		ClaimsNamespace:                  "kubeopera-system",
		TerminatorPollInterval:           5 * time.Second,
		OrphanSweepInterval:              10 * time.Minute,
		OrphanSweepMaxDeletions:          5,

		MaxHostClustersPerWorkspace:       10,
		MaxKubernetesClustersPerWorkspace: 10,
	}
}

// BindFlags binds every option to a flag on fs.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.KCPKubeconfig, "kcp-kubeconfig", o.KCPKubeconfig, "kubeconfig of kcp (env KCP_KUBECONFIG)")
	fs.StringVar(&o.KCPContext, "kcp-context", o.KCPContext, "context of --kcp-kubeconfig to use (default: current)")
	fs.StringVar(&o.SweepKCPContext, "orphan-sweep-kcp-context", o.SweepKCPContext, "context of --kcp-kubeconfig the orphan sweep uses to look workspaces up; it needs get on logicalclusters in every workspace (default: --kcp-context)")
	fs.StringVar(&o.PlatformWorkspace, "platform-workspace", o.PlatformWorkspace, "kcp workspace holding the APIExports and their endpoint slices")
	fs.BoolVar(&o.Bootstrap, "bootstrap", o.Bootstrap, "create --platform-workspace and apply its schemas, exports, WorkspaceType and RBAC before starting (idempotent)")
	fs.StringVar(&o.BackendKubeconfig, "backend-kubeconfig", o.BackendKubeconfig, "kubeconfig of the backend cluster; empty: in-cluster (env BACKEND_KUBECONFIG)")
	fs.StringVar(&o.KubeoperaEndpointSlice, "kubeopera-endpointslice", o.KubeoperaEndpointSlice, "APIExportEndpointSlice of the kubeopera.io export")
	fs.StringVar(&o.PlatformEndpointSlice, "platform-endpointslice", o.PlatformEndpointSlice, "APIExportEndpointSlice of the platform.edgeconnect.eu export")
	fs.StringVar(&o.VClusterChart, "vcluster-chart", o.VClusterChart, "vCluster Helm chart: OCI reference or local path (env VCLUSTER_CHART)")
	fs.StringVar(&o.VClusterChartVersion, "vcluster-chart-version", o.VClusterChartVersion, "vCluster chart version (env VCLUSTER_CHART_VERSION)")
	fs.StringVar(&o.HelmCacheDir, "helm-cache-dir", o.HelmCacheDir, "Helm cache directory (env HELM_CACHE_HOME)")
	fs.StringVar(&o.KubeoperaAPIBaseURL, "kubeopera-api-base-url", o.KubeoperaAPIBaseURL, "kubeopera-api base URL for the CloudSpace callback; empty disables it (env KUBEOPERA_API_BASE_URL)")
	fs.StringVar(&o.ClusterProvisionerBaseURL, "cluster-provisioner-base-url", o.ClusterProvisionerBaseURL, "cluster-provisioner URL (env CLUSTER_PROVISIONER_BASE_URL)")
	fs.StringVar(&o.ProvisionerIdentity, "provisioner-identity", o.ProvisionerIdentity, "the provisioner's ServiceAccount on the backend (<namespace>/<name>): it may read the cloud credential copies of provisioned HostClusters, each by name")
	fs.StringVar(&o.ScaffolderIdentity, "scaffolder-identity", o.ScaffolderIdentity, "the gitops-scaffolder's ServiceAccount on the backend (<namespace>/<name>): it may read the stored kubeconfig, git credentials and registry pull secret of each HostCluster, each by name")
	fs.StringVar(&o.GitOpsScaffolderBaseURL, "gitops-scaffolder-base-url", o.GitOpsScaffolderBaseURL, "gitops-scaffolder URL (env GITOPS_SCAFFOLDER_BASE_URL)")
	fs.StringVar(&o.AWSPlatformIdentity, "aws-platform-identity", o.AWSPlatformIdentity, "the manager's own AWS identity, used only to assume tenants' role_arn credentials (with the workspace's external ID) for provisioned EKS clusters' tokens: default (the AWS SDK's default chain: environment, IRSA web identity, container or instance role) or empty (none: an EKS credential needs an access key)")
	fs.StringVar(&o.AWSEndpointURL, "aws-endpoint-url", o.AWSEndpointURL, "AWS endpoint of the STS calls in the EKS tokens the manager mints for provisioned EKS clusters; empty: AWS's regional endpoints (set only for a local AWS in tests and development)")
	fs.StringVar(&o.AWSExternalIDKeySecret, "aws-external-id-key-secret", o.AWSExternalIDKeySecret, "backend Secret <namespace>/<name> holding the installation key of the workspaces' AWS external IDs (created when absent; deleting it changes every workspace's external ID)")
	fs.StringVar(&o.FluxChart, "flux-chart", o.FluxChart, "Flux Helm chart installed on HostClusters' targets: OCI reference, URL or local path (env FLUX_CHART)")
	fs.StringVar(&o.FluxChartVersion, "flux-chart-version", o.FluxChartVersion, "Flux chart version (env FLUX_CHART_VERSION)")
	fs.DurationVar(&o.GitOpsSyncInterval, "gitops-sync-interval", o.GitOpsSyncInterval, "how often Flux on a HostCluster's target looks at the tree's repository (its GitRepository's interval)")
	fs.StringVar(&o.GitOpsBranch, "gitops-branch", o.GitOpsBranch, "branch of spec.gitOpsRepoURL that Flux follows on HostClusters' targets")
	fs.DurationVar(&o.KubernetesClusterPollInterval, "kubernetescluster-poll-interval", o.KubernetesClusterPollInterval, "how often a KubernetesCluster being built or torn down is looked at again when no watch of the resource it waits on is free (at most 256 run)")
	fs.StringSliceVar(&o.OTCAuthHosts, "otc-auth-hosts", o.OTCAuthHosts, "hosts the auth_url of tenants' OTC credentials may name: exact names, *.domain for any name under it, or * for any; Crossplane's OTC provider connects there from the backend")
	fs.DurationVar(&o.HostClusterAccessGiveUp, "hostcluster-access-give-up", o.HostClusterAccessGiveUp, "how long an unreachable HostCluster target is retried before the HostCluster fails")
	fs.DurationVar(&o.HostClusterPollInterval, "hostcluster-poll-interval", o.HostClusterPollInterval, "how often a HostCluster waiting on Flux, the scaffolder or its apps Kustomization is looked at again")
	fs.DurationVar(&o.HostClusterInventoryInterval, "hostcluster-inventory-interval", o.HostClusterInventoryInterval, "how often a Ready HostCluster's inventory and health score are refreshed (jittered)")
	fs.StringVar(&o.FleetPriceTable, "fleet-price-table", o.FleetPriceTable, "file (YAML or JSON) with the hourly price of each node instance type and the currency, for each HostCluster's estimated monthly cost (hourly price x 730 h per node, by its node.kubernetes.io/instance-type label); empty: no cost estimates")
	fs.IntVar(&o.HostClusterConcurrency, "hostcluster-concurrency", o.HostClusterConcurrency, "how many HostClusters are reconciled at once, across all workspaces")
	fs.IntVar(&o.KubernetesClusterConcurrency, "kubernetescluster-concurrency", o.KubernetesClusterConcurrency, "how many KubernetesClusters are reconciled at once, across all workspaces")
	fs.IntVar(&o.ProviderConfigConcurrency, "providerconfig-concurrency", o.ProviderConfigConcurrency, "how many ProviderConfigs are reconciled at once, across all workspaces")
	fs.IntVar(&o.MachineCapabilitiesConcurrency, "machinecapabilities-concurrency", o.MachineCapabilitiesConcurrency, "how many MachineCapabilities are matched at once, across all workspaces")
	fs.IntVar(&o.FlavorCatalogConcurrency, "flavorcatalog-concurrency", o.FlavorCatalogConcurrency, "how many copies of the platform's flavor catalog are written at once, across all workspaces")
	fs.StringSliceVar(&o.TargetDenyCIDRs, "target-deny-cidrs", o.TargetDenyCIDRs, "CIDRs or addresses the manager never dials on a tenant's behalf (HostClusters' API servers), added to what it always refuses: loopback, link-local and cloud metadata, unspecified, multicast, reserved, kcp's and the backend's own addresses and ranges; private ranges are not denied unless listed here")
	fs.StringSliceVar(&o.TargetAllowCIDRs, "target-allow-cidrs", o.TargetAllowCIDRs, "exceptions: CIDRs or addresses tenants' targets may be at although a deny rule covers them (the most specific rule decides; kcp's and the backend API server's own address and port are never allowed), e.g. 127.0.0.1/32 for local targets in development")
	fs.StringSliceVar(&o.BackendServiceCIDRs, "backend-service-cidrs", o.BackendServiceCIDRs, "the backend cluster's Service ranges, never dialed on a tenant's behalf (the manager also reads the ServiceCIDRs and the kubernetes Service)")
	fs.StringSliceVar(&o.BackendPodCIDRs, "backend-pod-cidrs", o.BackendPodCIDRs, "the backend cluster's Pod ranges, never dialed on a tenant's behalf (the manager also reads the nodes' pod CIDRs; set this when the CNI assigns none)")
	fs.StringVar(&o.TargetMaxResponseSize, "target-max-response-size", o.TargetMaxResponseSize, "most bytes (a quantity, e.g. 32Mi) the manager reads of one response from a HostCluster's target, counted after gzip decoding; more fails the HostCluster (ReadLimitExceeded)")
	fs.Int64Var(&o.TargetMaxResponseElements, "target-max-response-elements", o.TargetMaxResponseElements, "most JSON array elements (at any depth) in one response from a HostCluster's target; each may decode into a whole object")
	fs.IntVar(&o.TargetMaxListPages, "target-max-list-pages", o.TargetMaxListPages, "most pages (continue tokens followed) of one list read from a HostCluster's target")
	fs.IntVar(&o.TargetMaxListItems, "target-max-list-items", o.TargetMaxListItems, "most items of one list (all its pages) read from a HostCluster's target")
	fs.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", o.ReconcileTimeout, "deadline of every reconcile pass of every controller; 0: none")
	fs.DurationVar(&o.OperationTimeout, "operation-timeout", o.OperationTimeout, "deadline of every long operation run outside the workers (Flux and vCluster installs)")
	fs.IntVar(&o.MaxWorkersPerWorkspace, "max-workers-per-workspace", o.MaxWorkersPerWorkspace, "most reconcile workers of one controller that one workspace holds at once (its other requests wait); 0: no bound")
	fs.IntVar(&o.MaxOperationsPerWorkspace, "max-operations-per-workspace", o.MaxOperationsPerWorkspace, "most operation slots (Flux installs, vCluster installs) of one controller that one workspace holds at once; 0: no bound")
	fs.IntVar(&o.MaxProvisioningRunsPerHour, "max-provisioning-runs-per-workspace-per-hour", o.MaxProvisioningRunsPerHour, "how many provisioning runs (apply and destroy) one workspace may start in any hour, however many HostClusters it creates and deletes; over it a HostCluster fails with QuotaExceeded; 0: no limit")
	fs.StringVar(&o.AuthAPINamespace, "authapi-namespace", o.AuthAPINamespace, "namespace of authapi on HostClusters' targets (admin bootstrap)")
	fs.StringVar(&o.AuthAPIService, "authapi-service", o.AuthAPIService, "authapi's Service on HostClusters' targets, reached through the API server's service proxy")
	fs.StringVar(&o.AuthAPIPort, "authapi-port", o.AuthAPIPort, "port name (or number) of authapi's Service")
	fs.StringVar(&o.AuthAPISecret, "authapi-secret", o.AuthAPISecret, "Secret holding authapi's INTERNAL_API_KEY, next to its Service")
	fs.StringVar(&o.Environment, "environment", o.Environment, "environment name; development enables development logging (env ENVIRONMENT)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve /metrics over HTTPS to authenticated, authorized callers only (get on /metrics, e.g. ClusterRole kubeopera-metrics-reader); false: plain HTTP to anyone")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "directory with tls.crt and tls.key for /metrics; empty: a self-signed certificate")
	fs.StringVar(&o.FleetOverviewAddr, "fleet-overview-bind-address", o.FleetOverviewAddr, "address of the platform admins' fleet overview (page and JSON); loopback unless --fleet-overview-secure; 0: off")
	fs.BoolVar(&o.FleetOverviewSecure, "fleet-overview-secure", o.FleetOverviewSecure, "serve the fleet overview over HTTPS to authenticated, authorized callers only (get on its paths, e.g. ClusterRole kubeopera-fleet-viewer); required to bind it to a non-loopback address")
	fs.StringVar(&o.FleetOverviewCertDir, "fleet-overview-cert-dir", o.FleetOverviewCertDir, "directory with tls.crt and tls.key for the secure fleet overview; empty: a self-signed certificate")
	fs.DurationVar(&o.FleetOverviewRefresh, "fleet-overview-refresh-interval", o.FleetOverviewRefresh, "how often an open fleet overview page updates itself")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, "address of net/http/pprof (e.g. 127.0.0.1:6060); empty: off")
	fs.Float32Var(&o.KCPQPS, "kcp-qps", o.KCPQPS, "requests per second to kcp, per export and shard, shared by every workspace")
	fs.IntVar(&o.KCPBurst, "kcp-burst", o.KCPBurst, "burst of --kcp-qps")
	fs.Float32Var(&o.BackendQPS, "backend-qps", o.BackendQPS, "requests per second to the backend cluster")
	fs.IntVar(&o.BackendBurst, "backend-burst", o.BackendBurst, "burst of --backend-qps")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader on the backend cluster so several replicas are safe")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "backend namespace of the leader election lease")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader election lease")
	fs.DurationVar(&o.TenantRequeueInterval, "tenant-requeue-interval", o.TenantRequeueInterval, "poll interval of a Provisioning Tenant")
	fs.IntVar(&o.TenantConcurrency, "tenant-concurrency", o.TenantConcurrency, "how many Tenants are reconciled at once, across all workspaces")
	fs.IntVar(&o.TenantInstallConcurrency, "tenant-install-concurrency", o.TenantInstallConcurrency, "how many vCluster Helm installs and upgrades run at once, outside the reconcile workers")
	fs.IntVar(&o.MaxTenantsPerWorkspace, "max-tenants-per-workspace", o.MaxTenantsPerWorkspace, "how many Tenants one workspace may have; 0: no limit")
	fs.StringVar(&o.MaxTenantCPUPerWorkspace, "max-tenant-cpu-per-workspace", o.MaxTenantCPUPerWorkspace, "the most CPU the quotas of one workspace's Tenants may add up to (a quantity); empty or 0: no limit")
	fs.StringVar(&o.MaxTenantMemoryPerWorkspace, "max-tenant-memory-per-workspace", o.MaxTenantMemoryPerWorkspace, "the most memory the quotas of one workspace's Tenants may add up to (a quantity); empty or 0: no limit")
	fs.IntVar(&o.MaxHostClustersPerWorkspace, "max-hostclusters-per-workspace", o.MaxHostClustersPerWorkspace, "how many HostClusters one workspace may have; 0: no limit")
	fs.IntVar(&o.MaxKubernetesClustersPerWorkspace, "max-kubernetesclusters-per-workspace", o.MaxKubernetesClustersPerWorkspace, "how many KubernetesClusters one workspace may have; 0: no limit")
	fs.StringVar(&o.VClusterDistro, "vcluster-distro", o.VClusterDistro, "vCluster distro: k3s (the seed's) or k8s (env VCLUSTER_DISTRO)")
	fs.StringVar(&o.VClusterExposure, "vcluster-exposure", o.VClusterExposure, "how tenants reach their vClusters from outside the backend: none (in-cluster Service name only), loadbalancer (Service of type LoadBalancer) or ingress (TLS-passthrough Ingress on <tenantName>-<fingerprint>.<vcluster-domain>) (env VCLUSTER_EXPOSURE)")
	fs.StringVar(&o.VClusterServiceCIDR, "vcluster-service-cidr", o.VClusterServiceCIDR, "the backend's Service range, given to every vCluster; empty: read from the backend's ServiceCIDR kubernetes (env VCLUSTER_SERVICE_CIDR)")
	fs.StringVar(&o.VClusterDomain, "vcluster-domain", o.VClusterDomain, "platform domain of --vcluster-exposure=ingress; its wildcard DNS record points at the ingress controller (env VCLUSTER_DOMAIN)")
	fs.StringVar(&o.VClusterControlPlaneIngressClass, "vcluster-control-plane-ingress-class", o.VClusterControlPlaneIngressClass, "ingress class of the vClusters' control-plane Ingresses with --vcluster-exposure=ingress; its controller must pass TLS through (ingress-nginx --enable-ssl-passthrough) (env VCLUSTER_CONTROL_PLANE_INGRESS_CLASS)")
	fs.StringVar(&o.VClusterIngressClass, "vcluster-ingress-class", o.VClusterIngressClass, "let vClusters sync Ingresses of this ingress class to the backend (config/policies/ingress-class.yaml refuses other classes); empty: Ingress sync off")
	fs.StringVar(&o.ClaimsNamespace, "claims-namespace", o.ClaimsNamespace, "backend namespace of the cloudSpaceID claim records (must exist)")
	fs.DurationVar(&o.TerminatorPollInterval, "terminator-poll-interval", o.TerminatorPollInterval, "how often terminating workspaces are looked for")
	fs.DurationVar(&o.OrphanSweepInterval, "orphan-sweep-interval", o.OrphanSweepInterval, "how often backend namespaces are checked for a workspace")
	fs.BoolVar(&o.OrphanSweepDelete, "orphan-sweep-delete", o.OrphanSweepDelete, "let the orphan sweep delete backend namespaces whose workspace every kcp shard reports gone on two sweeps; off: report only")
	fs.IntVar(&o.OrphanSweepMaxDeletions, "orphan-sweep-max-deletions", o.OrphanSweepMaxDeletions, "most backend namespaces one orphan sweep deletes")
	// Secrets are read from the environment only, never from flags (they would show in ps).
}

// PlatformAWS returns the manager's own AWS identity (AWSPlatformIdentity); nil for none.
func (o Options) PlatformAWS(ctx context.Context) (aws.CredentialsProvider, error) {
	switch o.AWSPlatformIdentity {
	case "":
		return nil, nil
	case "default":
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("--aws-platform-identity=default: failed to load the AWS SDK's default configuration: %w", err)
		}
		return cfg.Credentials, nil
	}
	return nil, fmt.Errorf("--aws-platform-identity=%q: want default or empty", o.AWSPlatformIdentity)
}

// DefaultFluxChartVersion is the community flux2 chart's version installed by default.
const DefaultFluxChartVersion = flux.DefaultChartVersion

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

// MetricsServerOptions returns the metrics server's options: with MetricsSecure, HTTPS (the
// certificate of MetricsCertDir or a self-signed one) behind controller-runtime's authentication
// and authorization filter, as kubebuilder scaffolds it; without, plain HTTP.
func (o Options) MetricsServerOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsSecure {
		opts.SecureServing = true
		opts.CertDir = o.MetricsCertDir
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}

// ReadLimits parses the caps on what is read from HostClusters' targets.
func (o Options) ReadLimits() (readlimit.Limits, error) {
	l := readlimit.Limits{MaxResponseElements: o.TargetMaxResponseElements, MaxListPages: o.TargetMaxListPages, MaxListItems: o.TargetMaxListItems}
	if o.TargetMaxResponseSize != "" {
		q, err := resource.ParseQuantity(o.TargetMaxResponseSize)
		if err != nil {
			return l, fmt.Errorf("--target-max-response-size=%q is not a quantity: %w", o.TargetMaxResponseSize, err)
		}
		if q.Sign() <= 0 {
			return l, fmt.Errorf("--target-max-response-size=%q must be more than zero", o.TargetMaxResponseSize)
		}
		l.MaxResponseBytes = q.Value()
	}
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"--target-max-response-elements", o.TargetMaxResponseElements},
		{"--target-max-list-pages", int64(o.TargetMaxListPages)},
		{"--target-max-list-items", int64(o.TargetMaxListItems)},
	} {
		if f.value < 0 {
			return l, fmt.Errorf("%s=%d must not be negative (0: the default)", f.name, f.value)
		}
	}
	return l, nil
}

// VCluster returns the vCluster options every Tenant is installed with, or what is wrong with
// them.
func (o Options) VCluster() (vcluster.Options, error) {
	v := vcluster.Options{
		Environment:  o.Environment,
		IngressClass: o.VClusterIngressClass,
		Distro:       o.VClusterDistro,
		ServiceCIDR:  o.VClusterServiceCIDR,
		Exposure: vcluster.Exposure{
			Mode:         vcluster.ExposureMode(o.VClusterExposure),
			Domain:       o.VClusterDomain,
			IngressClass: o.VClusterControlPlaneIngressClass,
		},
	}
	if v.ServiceCIDR != "" {
		if _, _, err := net.ParseCIDR(v.ServiceCIDR); err != nil {
			return v, fmt.Errorf("--vcluster-service-cidr %q is not a CIDR", v.ServiceCIDR)
		}
	}
	if v.Distro != vcluster.DistroK3s && v.Distro != vcluster.DistroK8s {
		return v, fmt.Errorf("--vcluster-distro %q is not one of k3s, k8s", v.Distro)
	}
	if err := v.Exposure.Validate(); err != nil {
		return v, err
	}
	if v.Exposure.Mode == vcluster.ExposeIngress && v.IngressClass == v.Exposure.IngressClass {
		// The backend policy would then admit a tenant's synced TLS-passthrough route too.
		return v, fmt.Errorf("--vcluster-ingress-class %q must differ from --vcluster-control-plane-ingress-class: tenants' Ingresses must never share the control planes' passthrough class", v.IngressClass)
	}
	return v, nil
}

// TenantLimits parses the per-workspace Tenant limits.
func (o Options) TenantLimits() (tenant.Limits, error) {
	l := tenant.Limits{MaxTenants: o.MaxTenantsPerWorkspace}
	for _, q := range []struct {
		flag, value string
		into        *resource.Quantity
	}{
		{"--max-tenant-cpu-per-workspace", o.MaxTenantCPUPerWorkspace, &l.MaxCPU},
		{"--max-tenant-memory-per-workspace", o.MaxTenantMemoryPerWorkspace, &l.MaxMemory},
	} {
		if q.value == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.value)
		if err != nil {
			return l, fmt.Errorf("%s=%q is not a quantity: %w", q.flag, q.value, err)
		}
		*q.into = v
	}
	return l, nil
}

// ExternalIDKeySecret parses AWSExternalIDKeySecret.
func (o Options) ExternalIDKeySecret() (client.ObjectKey, error) {
	ns, name, ok := strings.Cut(o.AWSExternalIDKeySecret, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("--aws-external-id-key-secret=%q is not <namespace>/<name>", o.AWSExternalIDKeySecret)
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}
