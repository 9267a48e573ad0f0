package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/providers/multi"

	fleetv1alpha1 "github.com/kubeopera/kubeopera/apis/fleet/v1alpha1"
	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	flavorcatalog "github.com/kubeopera/kubeopera/controllers/catalog"
	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/controllers/kubernetescluster"
	"github.com/kubeopera/kubeopera/controllers/machinecapabilities"
	"github.com/kubeopera/kubeopera/controllers/providerconfig"
	"github.com/kubeopera/kubeopera/controllers/tenant"
	"github.com/kubeopera/kubeopera/internal/authapi"
	"github.com/kubeopera/kubeopera/internal/aws/externalid"
	"github.com/kubeopera/kubeopera/internal/fleet"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/kcpversion"
	"github.com/kubeopera/kubeopera/internal/kubeoperaapi"
	"github.com/kubeopera/kubeopera/internal/netguard"
	"github.com/kubeopera/kubeopera/internal/overview"
	pclient "github.com/kubeopera/kubeopera/internal/provisioner/client"
	"github.com/kubeopera/kubeopera/internal/scaffolder"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/workspaces"
)

// Provider names in the multi provider; cluster names are "<provider>#<logical cluster>".
const (
	KubeoperaProvider = "kubeopera.io"
	PlatformProvider  = "platform.edgeconnect.eu"
)

// Scheme returns the scheme of every type the manager reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apisv1alpha1.AddToScheme(s))
	utilruntime.Must(apisv1alpha2.AddToScheme(s))
	utilruntime.Must(corev1alpha1.AddToScheme(s))
	utilruntime.Must(tenancyv1alpha1.AddToScheme(s))
	utilruntime.Must(kov1alpha1.AddToScheme(s))
	utilruntime.Must(platformv1alpha1.AddToScheme(s))
	utilruntime.Must(fleetv1alpha1.AddToScheme(s))
	return s
}

// Configs holds the configs the manager talks with.
type Configs struct {
	// KCP points at the platform workspace.
	KCP *rest.Config
	// Sweep is the orphan sweep's kcp config.
	Sweep *rest.Config
	// Backend is the backend cluster's config.
	Backend *rest.Config
}

// Configs loads the kcp configs (pointed at the platform workspace) and the backend config.
func (o Options) Configs() (*Configs, error) {
	if o.KCPKubeconfig == "" {
		return nil, fmt.Errorf("--kcp-kubeconfig (or KCP_KUBECONFIG) is required")
	}
	load := func(context string) (*rest.Config, error) {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.KCPKubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("failed to load kcp kubeconfig %s (context %q): %w", o.KCPKubeconfig, context, err)
		}
		return cfg, nil
	}
	kcp, err := load(o.KCPContext)
	if err != nil {
		return nil, err
	}
	sweep := kcp
	if o.SweepKCPContext != "" {
		if sweep, err = load(o.SweepKCPContext); err != nil {
			return nil, err
		}
	}
	var backend *rest.Config
	if o.BackendKubeconfig != "" {
		backend, err = clientcmd.BuildConfigFromFlags("", o.BackendKubeconfig)
	} else {
		backend, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("failed to load backend config: %w", err)
	}
	kcp = countWatches(workspaces.ClusterConfig(kcp, o.PlatformWorkspace))
	kcp.QPS, kcp.Burst = o.KCPQPS, o.KCPBurst
	backend.QPS, backend.Burst = o.BackendQPS, o.BackendBurst
	return &Configs{KCP: kcp, Sweep: sweep, Backend: backend}, nil
}

// CheckKCP reads the version of the kcp of cfg and returns an error, naming the version found,
// unless the manager can work with it (kcpversion.Check); it warns of a kcp release without the
// fix of CVE-2026-61682. The manager calls it before it reads or writes anything in kcp.
func CheckKCP(ctx context.Context, cfg *rest.Config) error {
	log := ctrl.LoggerFrom(ctx).WithName("manager")
	info, err := kcpversion.Get(cfg)
	if err != nil {
		return err
	}
	if err := kcpversion.Check(info); err != nil {
		return err
	}
	log.Info("Connected to kcp", "version", info.String(), "gitVersion", info.GitVersion)
	if kcpversion.Vulnerable(info) {
		log.Info("WARNING: this kcp release lacks the fix of CVE-2026-61682 (GHSA-c8w2-fgvx-vhv4): its front-proxy passes inbound X-Remote-* headers through, so any authenticated client can act as system:masters in any workspace. Run kcp v0.31.3 or newer, or v0.32.1 or newer, before a front-proxy is reachable by anyone but the platform.",
			"version", info.String())
	}
	return nil
}

// Run builds the manager and runs it until ctx is done.
func Run(ctx context.Context, o Options, cfgs *Configs) error {
	kcpCfg, backendCfg := cfgs.KCP, cfgs.Backend
	log := ctrl.LoggerFrom(ctx).WithName("manager")
	scheme := Scheme()

	// Every address the manager dials on a tenant's behalf is checked; the platform's own are
	// read before anything is served.
	guard, err := o.TargetGuard()
	if err != nil {
		return err
	}
	addrs := &PlatformAddresses{Guard: guard, Backend: backendCfg, KCP: []*rest.Config{kcpCfg, cfgs.Sweep}, Log: log.WithName("target-guard")}
	addrs.Refresh(ctx)
	log.Info("Tenants' targets are dialed through the guard", "denyCIDRs", o.TargetDenyCIDRs, "allowCIDRs", o.TargetAllowCIDRs,
		"backendServiceCIDRs", o.BackendServiceCIDRs, "backendPodCIDRs", o.BackendPodCIDRs)

	endpointSlices := map[string]string{KubeoperaProvider: o.KubeoperaEndpointSlice, PlatformProvider: o.PlatformEndpointSlice}
	// One event sink for every workspace of both exports.
	sink := &fleet.EventSink{Scheme: scheme, Log: log.WithName("events")}
	fleets := map[string]*fleet.Provider{}
	providers := multi.New(multi.Options{})
	for name, slice := range endpointSlices {
		plog := log.WithName("provider").WithValues("export", name)
		p, err := fleet.New(fleet.Options{
			Name:          name,
			Config:        kcpCfg,
			EndpointSlice: slice,
			Scheme:        scheme,
			Events:        sink,
			Log:           plog,
			// Every pass of every controller has a deadline, and one workspace holds a bounded
			// share of each controller's workers.
			PassTimeout:         o.ReconcileTimeout,
			WorkersPerWorkspace: o.MaxWorkersPerWorkspace,
			OnEngage: func(lc string, b client.Object) {
				plog.V(1).Info("Workspace bound", "cluster", lc, "binding", b.GetName())
			},
			OnDisengage: func(lc string, b client.Object) {
				plog.Info("Workspace unbound; its backend namespaces are kept until the workspace is deleted or the orphan sweep finds it gone", "cluster", lc, "binding", b.GetName())
			},
			OnEndpoints: addrs.Endpoints(name),
		})
		if err != nil {
			return fmt.Errorf("failed to create the workspace provider for %s: %w", name, err)
		}
		if err := providers.AddProvider(name, p); err != nil {
			return fmt.Errorf("failed to add provider %s: %w", name, err)
		}
		fleets[name] = p
	}

	mgr, err := mcmanager.New(backendCfg, providers, manager.Options{
		Scheme:                        scheme,
		Metrics:                       o.MetricsServerOptions(),
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionReleaseOnCancel: true,
		// Secrets, Namespaces and ConfigMaps (claim records) are read uncached so the manager never
		// caches the whole backend.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.Namespace{}, &corev1.ConfigMap{}}}},
	})
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	local := mgr.GetLocalManager()
	backend := workspaces.Backend{Client: local.GetClient(), Reader: local.GetAPIReader()}
	if err := local.Add(addrs); err != nil {
		return fmt.Errorf("failed to add the target guard's refresh: %w", err)
	}

	helmClient, err := helm.New(backendCfg, helm.Options{
		ChartRef:     o.VClusterChart,
		ChartVersion: o.VClusterChartVersion,
		CacheDir:     o.HelmCacheDir,
		Log:          log.WithName("helm"),
	})
	if err != nil {
		return fmt.Errorf("failed to create Helm client: %w", err)
	}
	if err := local.Add(sink); err != nil {
		return fmt.Errorf("failed to add the event sink: %w", err)
	}
	limits, err := o.TenantLimits()
	if err != nil {
		return err
	}
	if err := (&tenant.Reconciler{
		Workspaces:         fleets[KubeoperaProvider],
		Backend:            backend,
		Helm:               helmClient,
		API:                &kubeoperaapi.Client{BaseURL: o.KubeoperaAPIBaseURL, Token: o.InternalServiceToken},
		Environment:        o.Environment,
		IngressClass:       o.VClusterIngressClass,
		ClaimsNamespace:    o.ClaimsNamespace,
		Limits:             limits,
		RequeueInterval:    o.TenantRequeueInterval,
		Concurrency:        o.TenantConcurrency,
		InstallConcurrency: o.TenantInstallConcurrency,
		// One workspace holds a bounded share of the install slots; every install has a deadline.
		InstallsPerWorkspace: o.MaxOperationsPerWorkspace,
		InstallTimeout:       o.OperationTimeout,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the tenant controller: %w", err)
	}
	if err := setupHostClusters(ctx, mgr, o, fleets[KubeoperaProvider], backend, guard, log); err != nil {
		return err
	}
	if err := setupCatalog(ctx, mgr, o, kcpCfg, scheme, fleets[PlatformProvider]); err != nil {
		return err
	}
	if err := (&providerconfig.Reconciler{Workspaces: fleets[PlatformProvider], Backend: backend, AuthHosts: o.OTCAuthHosts, Concurrency: o.ProviderConfigConcurrency}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the providerconfig controller: %w", err)
	}
	if err := (&kubernetescluster.Reconciler{Workspaces: fleets[PlatformProvider], Backend: backend, PollInterval: o.KubernetesClusterPollInterval,
		MaxPerWorkspace: o.MaxKubernetesClustersPerWorkspace, Concurrency: o.KubernetesClusterConcurrency}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the kubernetescluster controller: %w", err)
	}
	// The backend admits tenant Ingresses of the allowed class only (config/policies).
	if err := vcluster.EnsureIngressClassParam(ctx, backend.Reader, backend.Client, o.ClaimsNamespace, o.VClusterIngressClass); err != nil {
		return err
	}

	if err := local.Add(&workspaces.Terminator{
		KCPConfig:     kcpCfg,
		WorkspaceType: workspaces.TenantWorkspaceTypeName,
		Backend:       backend,
		Workspace:     workspaceObjects(kcpCfg, scheme, endpointSlices),
		Interval:      o.TerminatorPollInterval,
	}); err != nil {
		return err
	}
	if err := local.Add(&workspaces.OrphanSweep{
		Backend:    backend,
		Workspaces: (&workspaces.ShardLookup{Config: cfgs.Sweep}).State,
		OwnerExists: (&workspaces.OwnerLookup{KCPConfig: kcpCfg, Kinds: map[string]workspaces.OwnerKind{
			"Tenant":            {EndpointSlice: o.KubeoperaEndpointSlice, Resource: kov1alpha1.GroupVersion.WithResource("tenants"), Namespaced: true},
			"HostCluster":       {EndpointSlice: o.KubeoperaEndpointSlice, Resource: kov1alpha1.GroupVersion.WithResource("hostclusters"), Namespaced: true},
			"KubernetesCluster": {EndpointSlice: o.PlatformEndpointSlice, Resource: platformv1alpha1.GroupVersion.WithResource("kubernetesclusters"), Namespaced: true},
		}}).Exists,
		Interval:     o.OrphanSweepInterval,
		MinAge:       o.OrphanSweepInterval / 2,
		Delete:       o.OrphanSweepDelete,
		MaxDeletions: o.OrphanSweepMaxDeletions,
	}); err != nil {
		return err
	}

	if err := setupFleetOverview(mgr, o, kcpCfg, backendCfg, scheme, fleets[KubeoperaProvider], log); err != nil {
		return err
	}

	log.Info("Starting manager", "platformWorkspace", o.PlatformWorkspace, "vclusterChart", o.VClusterChart, "vclusterChartVersion", o.VClusterChartVersion)
	return mgr.Start(ctx)
}

// workspaceObjects returns the terminator's view of a workspace's CRs (workspaces.WorkspaceCRs):
// read uncached through the exports' virtual workspaces with the manager's identity, never taken
// for absent when they cannot be read.
func workspaceObjects(kcpCfg *rest.Config, scheme *runtime.Scheme, slices map[string]string) workspaces.WorkspaceObjectsFunc {
	return (&workspaces.WorkspaceCRs{
		KCPConfig: kcpCfg,
		Scheme:    scheme,
		Exports: []workspaces.ExportKinds{
			{EndpointSlice: slices[KubeoperaProvider], Lists: []client.ObjectList{&kov1alpha1.TenantList{}, &kov1alpha1.HostClusterList{}}},
			{EndpointSlice: slices[PlatformProvider], Lists: []client.ObjectList{&platformv1alpha1.KubernetesClusterList{}}},
		},
	}).Remaining
}

// VirtualWorkspaceClient returns an uncached client for one workspace through the virtual
// workspace of the export whose endpoint slice is named slice (in the platform workspace kcpCfg
// points at), with kcpCfg's identity: the provider's view of a tenant workspace.
func VirtualWorkspaceClient(ctx context.Context, kcpCfg *rest.Config, slice, logicalCluster string, scheme *runtime.Scheme) (client.Client, error) {
	pc, err := client.New(kcpCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	es := &apisv1alpha1.APIExportEndpointSlice{}
	if err := pc.Get(ctx, client.ObjectKey{Name: slice}, es); err != nil {
		return nil, fmt.Errorf("failed to get APIExportEndpointSlice %s: %w", slice, err)
	}
	if len(es.Status.APIExportEndpoints) == 0 {
		return nil, fmt.Errorf("APIExportEndpointSlice %s has no endpoints yet", slice)
	}
	cfg := rest.CopyConfig(kcpCfg)
	cfg.Host = es.Status.APIExportEndpoints[0].URL + "/clusters/" + logicalCluster
	return client.New(cfg, client.Options{Scheme: scheme})
}

// setupHostClusters registers the HostCluster controller with its Flux installer and, when
// GITOPS_SCAFFOLDER_BASE_URL is set, the gitops-scaffolder client.
func setupHostClusters(ctx context.Context, mgr mcmanager.Manager, o Options, ws *fleet.Provider, backend workspaces.Backend, guard *netguard.Guard, log logr.Logger) error {
	installer, err := flux.NewInstaller(flux.Options{
		ChartRef:     o.FluxChart,
		ChartVersion: o.FluxChartVersion,
		CacheDir:     o.HelmCacheDir,
		Log:          log.WithName("flux"),
	})
	if err != nil {
		return fmt.Errorf("failed to create the Flux installer: %w", err)
	}
	var sc *scaffolder.Client
	if o.GitOpsScaffolderBaseURL != "" {
		if sc, err = scaffolder.New(o.GitOpsScaffolderBaseURL, o.GitOpsScaffolderAPIKey, nil); err != nil {
			return fmt.Errorf("failed to create the gitops-scaffolder client: %w", err)
		}
	} else {
		log.Info("GITOPS_SCAFFOLDER_BASE_URL is not set: HostClusters will fail at GeneratingGitOpsTree, saying so")
	}
	pc, err := pclient.New(o.ClusterProvisionerBaseURL, o.ClusterProvisionerAPIKey)
	if err != nil {
		return err
	}
	if pc == nil {
		log.Info("CLUSTER_PROVISIONER_BASE_URL is not set: HostClusters of mode provision_vanilla and provision_eks will fail at Provisioning, saying so")
	}
	platformAWS, err := o.PlatformAWS(ctx)
	if err != nil {
		return err
	}
	keySecret, err := o.ExternalIDKeySecret()
	if err != nil {
		return err
	}
	readLimits, err := o.ReadLimits()
	if err != nil {
		return err
	}
	if err := (&hostcluster.Reconciler{
		Workspaces:          ws,
		Provisioner:         pc,
		ProvisionerIdentity: o.ProvisionerIdentity,
		Backend:             backend,
		Flux:                installer,
		Scaffolder:          sc,
		AuthAPI:             authapi.Options{Namespace: o.AuthAPINamespace, Service: o.AuthAPIService, Port: o.AuthAPIPort, Secret: o.AuthAPISecret, SecretKey: authapi.DefaultOptions().SecretKey},
		GitBranch:           o.GitOpsBranch,
		AccessGiveUp:        o.HostClusterAccessGiveUp,
		PollInterval:        o.HostClusterPollInterval,
		InventoryInterval:   o.HostClusterInventoryInterval,
		Concurrency:         o.HostClusterConcurrency,
		ExternalIDKey:       &externalid.Key{Reader: backend.Reader, Writer: backend.Client, Name: keySecret},
		AWSEndpointURL:      o.AWSEndpointURL,
		PlatformAWS:         platformAWS,
		MaxPerWorkspace:     o.MaxHostClustersPerWorkspace,
		Guard:               guard,
		// What a target answers is capped; one workspace holds a bounded share of the Flux
		// install slots; every install has a deadline.
		ReadLimits:           readLimits,
		InstallsPerWorkspace: o.MaxOperationsPerWorkspace,
		InstallTimeout:       o.OperationTimeout,
		MaxRunsPerHour:       o.MaxProvisioningRunsPerHour,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the hostcluster controller: %w", err)
	}
	return nil
}

// setupCatalog publishes the machine-flavor catalog kept in the platform workspace (kcpCfg points
// at it) to every workspace bound to the platform.edgeconnect.eu export.
func setupCatalog(ctx context.Context, mgr mcmanager.Manager, o Options, kcpCfg *rest.Config, scheme *runtime.Scheme, ws *fleet.Provider) error {
	// No ByObject: that would need the kind's REST mapping now, and the catalog's CRD may not be
	// served yet right after the platform workspace was bootstrapped.
	catalog, err := cache.New(kcpCfg, cache.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("failed to create the catalog cache: %w", err)
	}
	if err := mgr.GetLocalManager().Add(catalog); err != nil {
		return err
	}
	if err := (&flavorcatalog.Reconciler{Workspaces: ws, Catalog: catalog, Concurrency: o.FlavorCatalogConcurrency}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("failed to set up the flavor catalog controller: %w", err)
	}
	if err := (&machinecapabilities.Reconciler{Workspaces: ws, Concurrency: o.MachineCapabilitiesConcurrency}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the machinecapabilities controller: %w", err)
	}
	return nil
}

// setupFleetOverview serves the platform admins' fleet overview (unless its address is off) and
// registers the fleet's gauges with the manager's metrics, both reading the same Source: the
// HostClusters in the fleet's shared cache and the platform workspace's RegisteredClusters.
func setupFleetOverview(mgr mcmanager.Manager, o Options, kcpCfg, backendCfg *rest.Config, scheme *runtime.Scheme, ws *fleet.Provider, log logr.Logger) error {
	platform, err := client.New(kcpCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	backend, err := kubernetes.NewForConfig(backendCfg)
	if err != nil {
		return err
	}
	reg := &registeredSource{platform: platform, backend: backend, platformWorkspace: o.PlatformWorkspace, now: time.Now}
	// Pages, JSON requests and scrapes read the platform workspace and the backend's nodes at
	// most every 10 s; HostClusters come from the shared cache on every call.
	regCache := &ttlCache[[]overview.Cluster]{ttl: 10 * time.Second, fetch: reg.clusters}
	src := &fleetSource{workspaces: ws, registered: regCache.get}
	fleetCollector.set(src)
	if o.FleetOverviewAddr == "" || o.FleetOverviewAddr == "0" {
		log.Info("The fleet overview is off (--fleet-overview-bind-address 0)")
		return nil
	}
	srv, err := overview.New(overview.Options{
		BindAddress:       o.FleetOverviewAddr,
		Source:            src,
		RefreshInterval:   o.FleetOverviewRefresh,
		Secure:            o.FleetOverviewSecure,
		CertDir:           o.FleetOverviewCertDir,
		RestConfig:        backendCfg,
		PlatformWorkspace: o.PlatformWorkspace,
		Log:               log.WithName("fleet-overview"),
	})
	if err != nil {
		return err
	}
	return mgr.GetLocalManager().Add(srv)
}

// fleetCollector is the fleet's gauges in controller-runtime's metrics registry: registered once
// per process, reading the Source of the manager started last (the e2e and dev environments run
// Run more than once in a process).
var fleetCollector = &swappableCollector{}

func init() { ctrlmetrics.Registry.MustRegister(fleetCollector) }

// swappableCollector collects overview.NewCollector of its current Source; nothing before set.
type swappableCollector struct {
	mu sync.RWMutex
	c  prometheus.Collector
}

func (s *swappableCollector) set(src overview.Source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c = overview.NewCollector(src)
}

// Describe sends no descriptions: the collector is unchecked, as its Source comes later.
func (s *swappableCollector) Describe(chan<- *prometheus.Desc) {}

func (s *swappableCollector) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	c := s.c
	s.mu.RUnlock()
	if c != nil {
		c.Collect(ch)
	}
}
