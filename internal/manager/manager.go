package manager

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces/sweep"
	"github.com/kubeopera/kubeopera/workspaces/terminator"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	corev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	tenancyv1alpha1 "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
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
	"github.com/kubeopera/kubeopera/controllers/flavorcatalog"
	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/controllers/kubernetescluster"
	"github.com/kubeopera/kubeopera/controllers/machinecapabilities"
	"github.com/kubeopera/kubeopera/controllers/providerconfig"
	"github.com/kubeopera/kubeopera/controllers/tenant"
	"github.com/kubeopera/kubeopera/internal/authapi"
	"github.com/kubeopera/kubeopera/internal/aws/externalid"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/health"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/internal/kcpversion"
	"github.com/kubeopera/kubeopera/internal/kubeoperaapi"
	"github.com/kubeopera/kubeopera/internal/netguard"
	"github.com/kubeopera/kubeopera/internal/overview"
	pclient "github.com/kubeopera/kubeopera/internal/provisioner/client"
	scaffolderclient "github.com/kubeopera/kubeopera/internal/scaffolder/client"
	"github.com/kubeopera/kubeopera/internal/vcluster"
	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
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
	// Helm is the backend's config for Helm's operations: Backend's identity and rate limiter,
	// its requests counted apart (kubeopera_api_requests_total{target="helm"}). Backend when nil.
	Helm *rest.Config
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
	// One limiter for every client of the backend made from this config (the controllers' per-kind
	// REST clients, Helm's, the provider's), so --backend-qps bounds the manager as a whole; a
	// config without one gives each client a limiter of its own.
	backend.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.BackendQPS, o.BackendBurst)
	helm := rest.CopyConfig(backend)
	countRequests(kcp, targetKCP)
	countRequests(backend, targetBackend)
	countRequests(helm, targetHelm)
	return &Configs{KCP: kcp, Sweep: sweep, Backend: backend, Helm: helm}, nil
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

// Manager is the manager assembled: the multicluster manager, one workspace provider per export,
// the backend and the dial guard. Controllers are registered on it from a list (Controllers).
type Manager struct {
	mcmanager.Manager
	// Options and Configs are what it was built from.
	Options Options
	Configs *Configs
	// Scheme holds every type the manager reads or writes.
	Scheme *runtime.Scheme
	// Workspaces are the providers of the exports' workspaces, by provider name
	// (KubeoperaProvider, PlatformProvider).
	Workspaces map[string]*apiexport.Provider
	// Backend reads (uncached) and writes the backend cluster with the manager's identity.
	Backend syncer.Backend
	// BackendWatcher watches single backend objects controllers wait on (reconcile.Arrivals).
	BackendWatcher client.WithWatch
	// Guard checks every address dialed on a tenant's behalf.
	Guard *netguard.Guard
	// Log is the manager's logger.
	Log logr.Logger
}

// Controller is one entry of the manager's list: a name and how it registers itself.
type Controller struct {
	Name  string
	Setup func(ctx context.Context, m *Manager) error
}

// Controllers are what the manager runs besides its providers, registered in this order by
// Setup: the reconcilers, then the platform's own loops.
var Controllers = []Controller{
	{Name: "tenant", Setup: setupTenants},
	{Name: "hostcluster", Setup: setupHostClusters},
	{Name: "flavorcatalog", Setup: setupCatalog},
	{Name: "machinecapabilities", Setup: setupMachineCapabilities},
	{Name: "providerconfig", Setup: setupProviderConfigs},
	{Name: "kubernetescluster", Setup: setupKubernetesClusters},
	{Name: "terminator", Setup: setupTerminator},
	{Name: "orphansweep", Setup: setupOrphanSweep},
	{Name: "overview", Setup: setupFleetOverview},
}

// New builds the manager with no controller registered: the dial guard (the platform's own
// addresses read before anything is served), one provider per export with one event sink for
// every workspace, and the multicluster manager on the backend. overrides adjust
// controller-runtime's manager options (a test's logger).
func New(ctx context.Context, o Options, cfgs *Configs, overrides ...func(*manager.Options)) (*Manager, error) {
	kcpCfg, backendCfg := cfgs.KCP, cfgs.Backend
	log := ctrl.LoggerFrom(ctx).WithName("manager")
	m := &Manager{Options: o, Configs: cfgs, Scheme: Scheme(), Workspaces: map[string]*apiexport.Provider{}, Log: log}

	// Every address the manager dials on a tenant's behalf is checked; the platform's own are
	// read before anything is served.
	guard, err := o.TargetGuard()
	if err != nil {
		return nil, err
	}
	m.Guard = guard
	kcps := []*rest.Config{kcpCfg}
	if cfgs.Sweep != nil {
		kcps = append(kcps, cfgs.Sweep)
	}
	addrs := &PlatformAddresses{Guard: guard, Backend: backendCfg, KCP: kcps, Log: log.WithName("target-guard")}
	addrs.Refresh(ctx)
	log.Info("Tenants' targets are dialed through the guard", "denyCIDRs", o.TargetDenyCIDRs, "allowCIDRs", o.TargetAllowCIDRs,
		"backendServiceCIDRs", o.BackendServiceCIDRs, "backendPodCIDRs", o.BackendPodCIDRs)

	// One event sink for every workspace of both exports.
	sink := &apiexport.EventSink{Scheme: m.Scheme, Log: log.WithName("events")}
	providers := multi.New(multi.Options{})
	for name, slice := range m.endpointSlices() {
		plog := log.WithName("provider").WithValues("export", name)
		p, err := apiexport.New(apiexport.Options{
			Name:          name,
			Config:        kcpCfg,
			EndpointSlice: slice,
			Scheme:        m.Scheme,
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
			return nil, fmt.Errorf("failed to create the workspace provider for %s: %w", name, err)
		}
		if err := providers.AddProvider(name, p); err != nil {
			return nil, fmt.Errorf("failed to add provider %s: %w", name, err)
		}
		m.Workspaces[name] = p
	}

	fingerprinted, err := labels.NewRequirement(workspaces.FingerprintLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	mo := manager.Options{
		Scheme:                        m.Scheme,
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
		// Except the metadata of the manager's own namespaces (labelled with a fingerprint), which
		// every Tenant and HostCluster pass checks (syncer.Backend.Namespaces).
		// managedFields are never read, and are most of a small object's size.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
			syncer.NamespaceMetadata(): {Label: labels.NewSelector().Add(*fingerprinted)},
			// And of the Tenants' claim records, which every pass of an admitted Tenant checks.
			tenant.ClaimMetadata(): {
				Namespaces: map[string]cache.Config{o.ClaimsNamespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{kov1alpha1.ManagedByLabel: tenant.ControllerName}),
			},
		}},
	}
	for _, o := range overrides {
		o(&mo)
	}
	if m.Manager, err = mcmanager.New(backendCfg, providers, mo); err != nil {
		return nil, fmt.Errorf("failed to create manager: %w", err)
	}
	if err := m.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := m.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	local := m.GetLocalManager()
	if m.BackendWatcher, err = client.NewWithWatch(backendCfg, client.Options{Scheme: m.Scheme, Mapper: local.GetRESTMapper()}); err != nil {
		return nil, fmt.Errorf("failed to create the backend watcher: %w", err)
	}
	m.Backend = syncer.Backend{Client: local.GetClient(), Reader: local.GetAPIReader(), Namespaces: local.GetCache(), DeferAccess: true}
	if err := local.Add(addrs); err != nil {
		return nil, fmt.Errorf("failed to add the target guard's refresh: %w", err)
	}
	if err := local.Add(sink); err != nil {
		return nil, fmt.Errorf("failed to add the event sink: %w", err)
	}
	return m, nil
}

// endpointSlices are the exports' endpoint slices by provider name.
func (m *Manager) endpointSlices() map[string]string {
	return map[string]string{KubeoperaProvider: m.Options.KubeoperaEndpointSlice, PlatformProvider: m.Options.PlatformEndpointSlice}
}

// Setup registers the named entries of Controllers, in the list's order (every entry when none
// is named).
func (m *Manager) Setup(ctx context.Context, names ...string) error {
	for _, c := range Controllers {
		if len(names) > 0 && !slices.Contains(names, c.Name) {
			continue
		}
		if err := c.Setup(ctx, m); err != nil {
			return fmt.Errorf("failed to set up %s: %w", c.Name, err)
		}
	}
	return nil
}

// Run builds the manager, registers every controller and runs it until ctx is done.
func Run(ctx context.Context, o Options, cfgs *Configs) error {
	m, err := New(ctx, o, cfgs)
	if err != nil {
		return err
	}
	if err := m.Setup(ctx); err != nil {
		return err
	}
	m.Log.Info("Starting manager", "platformWorkspace", o.PlatformWorkspace, "vclusterChart", o.VClusterChart, "vclusterChartVersion", o.VClusterChartVersion)
	return m.Start(ctx)
}

// setupTenants registers the Tenant controller with its Helm client, and makes the backend admit
// tenant Ingresses of the allowed class only (config/policies).
func setupTenants(ctx context.Context, m *Manager) error {
	o := m.Options
	helmCfg := m.Configs.Helm
	if helmCfg == nil {
		helmCfg = m.Configs.Backend
	}
	helmClient, err := helm.New(helmCfg, helm.Options{
		ChartRef:     o.VClusterChart,
		ChartVersion: o.VClusterChartVersion,
		CacheDir:     o.HelmCacheDir,
		Log:          m.Log.WithName("helm"),
	})
	if err != nil {
		return fmt.Errorf("failed to create Helm client: %w", err)
	}
	vc, err := o.VCluster()
	if err != nil {
		return err
	}
	if vc.ServiceCIDR == "" {
		cs, err := kubernetes.NewForConfig(m.Configs.Backend)
		if err != nil {
			return err
		}
		if vc.ServiceCIDR, err = vcluster.BackendServiceCIDR(ctx, cs); err != nil {
			// vCluster then detects it itself, which works on backends before Kubernetes 1.33.
			m.Log.Info("Could not read the backend's Service range for the vClusters; set --vcluster-service-cidr", "error", err.Error())
		}
	}
	limits, err := o.TenantLimits()
	if err != nil {
		return err
	}
	if err := (&tenant.Reconciler{
		Workspaces:         m.Workspaces[KubeoperaProvider],
		BackendWatcher:     m.BackendWatcher,
		Backend:            m.Backend,
		Helm:               helmClient,
		API:                &kubeoperaapi.Client{BaseURL: o.KubeoperaAPIBaseURL, Token: o.InternalServiceToken},
		Environment:        o.Environment,
		IngressClass:       o.VClusterIngressClass,
		Distro:             vc.Distro,
		ServiceCIDR:        vc.ServiceCIDR,
		Exposure:           vc.Exposure,
		ClaimsNamespace:    o.ClaimsNamespace,
		Claims:             m.GetLocalManager().GetCache(),
		Limits:             limits,
		RequeueInterval:    o.TenantRequeueInterval,
		Concurrency:        o.TenantConcurrency,
		InstallConcurrency: o.TenantInstallConcurrency,
		// One workspace holds a bounded share of the install slots; every install has a deadline.
		InstallsPerWorkspace: o.MaxOperationsPerWorkspace,
		InstallTimeout:       o.OperationTimeout,
	}).SetupWithManager(m); err != nil {
		return err
	}
	params := vcluster.IngressParams{Class: o.VClusterIngressClass}
	if vc.Exposure.Mode == vcluster.ExposeIngress {
		// Helm writes the control-plane Ingresses as the manager's backend user.
		if params.ControlPlaneWriter, err = vcluster.Writer(ctx, helmCfg); err != nil {
			return err
		}
		params.ControlPlaneClass = vc.Exposure.IngressClass
	}
	return vcluster.EnsureIngressParams(ctx, m.Backend.Reader, m.Backend.Client, o.ClaimsNamespace, params)
}

// setupProviderConfigs registers the ProviderConfig controller.
func setupProviderConfigs(_ context.Context, m *Manager) error {
	o := m.Options
	return (&providerconfig.Reconciler{Workspaces: m.Workspaces[PlatformProvider], Backend: m.Backend, AuthHosts: o.OTCAuthHosts,
		Concurrency: o.ProviderConfigConcurrency}).SetupWithManager(m)
}

// setupKubernetesClusters registers the KubernetesCluster controller.
func setupKubernetesClusters(_ context.Context, m *Manager) error {
	o := m.Options
	return (&kubernetescluster.Reconciler{Workspaces: m.Workspaces[PlatformProvider], Backend: m.Backend, BackendWatcher: m.BackendWatcher, PollInterval: o.KubernetesClusterPollInterval,
		MaxPerWorkspace: o.MaxKubernetesClustersPerWorkspace, Concurrency: o.KubernetesClusterConcurrency}).SetupWithManager(m)
}

// setupMachineCapabilities registers the MachineCapabilities controller.
func setupMachineCapabilities(_ context.Context, m *Manager) error {
	return (&machinecapabilities.Reconciler{Workspaces: m.Workspaces[PlatformProvider], Concurrency: m.Options.MachineCapabilitiesConcurrency}).SetupWithManager(m)
}

// setupTerminator removes the workspace type's terminator from a deleted workspace once its CRs
// and backend namespaces are gone.
func setupTerminator(_ context.Context, m *Manager) error {
	return m.GetLocalManager().Add(&terminator.Terminator{
		KCPConfig:     m.Configs.KCP,
		WorkspaceType: workspaces.TenantWorkspaceTypeName,
		Backend:       m.Backend,
		Workspace:     workspaceObjects(m.Configs.KCP, m.Scheme, m.endpointSlices()),
		Interval:      m.Options.TerminatorPollInterval,
	})
}

// setupOrphanSweep reports (and, when asked, deletes) backend namespaces whose workspace or
// owner is gone.
func setupOrphanSweep(_ context.Context, m *Manager) error {
	o := m.Options
	sweepCfg := m.Configs.Sweep
	if sweepCfg == nil {
		sweepCfg = m.Configs.KCP
	}
	return m.GetLocalManager().Add(&sweep.OrphanSweep{
		Backend:    m.Backend,
		Workspaces: (&sweep.ShardLookup{Config: sweepCfg}).State,
		OwnerExists: (&workspaces.OwnerLookup{KCPConfig: m.Configs.KCP, Kinds: map[string]workspaces.OwnerKind{
			"Tenant":            {EndpointSlice: o.KubeoperaEndpointSlice, Resource: kov1alpha1.GroupVersion.WithResource("tenants"), Namespaced: true},
			"HostCluster":       {EndpointSlice: o.KubeoperaEndpointSlice, Resource: kov1alpha1.GroupVersion.WithResource("hostclusters"), Namespaced: true},
			"KubernetesCluster": {EndpointSlice: o.PlatformEndpointSlice, Resource: platformv1alpha1.GroupVersion.WithResource("kubernetesclusters"), Namespaced: true},
		}}).Exists,
		Interval:     o.OrphanSweepInterval,
		MinAge:       o.OrphanSweepInterval / 2,
		Delete:       o.OrphanSweepDelete,
		MaxDeletions: o.OrphanSweepMaxDeletions,
	})
}

// workspaceObjects returns the terminator's view of a workspace's CRs (workspaces.WorkspaceCRs):
// read uncached through the exports' virtual workspaces with the manager's identity, never taken
// for absent when they cannot be read.
func workspaceObjects(kcpCfg *rest.Config, scheme *runtime.Scheme, slices map[string]string) terminator.WorkspaceObjectsFunc {
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
func setupHostClusters(ctx context.Context, m *Manager) error {
	o, ws, backend, guard, log := m.Options, m.Workspaces[KubeoperaProvider], m.Backend, m.Guard, m.Log
	installer, err := flux.NewInstaller(flux.Options{
		ChartRef:     o.FluxChart,
		ChartVersion: o.FluxChartVersion,
		CacheDir:     o.HelmCacheDir,
		Log:          log.WithName("flux"),
	})
	if err != nil {
		return fmt.Errorf("failed to create the Flux installer: %w", err)
	}
	var sc *scaffolderclient.Client
	if o.GitOpsScaffolderBaseURL != "" {
		if sc, err = scaffolderclient.New(o.GitOpsScaffolderBaseURL, o.GitOpsScaffolderAPIKey, nil); err != nil {
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
	var prices *health.PriceTable
	if o.FleetPriceTable != "" {
		if prices, err = health.LoadPriceTable(o.FleetPriceTable); err != nil {
			return fmt.Errorf("--fleet-price-table: %w", err)
		}
		log.Info("Estimating HostClusters' monthly cost", "priceTable", o.FleetPriceTable, "currency", prices.Currency, "instanceTypes", len(prices.Hourly))
	}
	return (&hostcluster.Reconciler{
		Workspaces:          ws,
		Provisioner:         pc,
		ProvisionerIdentity: o.ProvisionerIdentity,
		ScaffolderIdentity:  o.ScaffolderIdentity,
		Backend:             backend,
		Flux:                installer,
		Scaffolder:          sc,
		AuthAPI:             authapi.Options{Namespace: o.AuthAPINamespace, Service: o.AuthAPIService, Port: o.AuthAPIPort, Secret: o.AuthAPISecret, SecretKey: authapi.DefaultOptions().SecretKey},
		GitBranch:           o.GitOpsBranch,
		SyncInterval:        o.GitOpsSyncInterval,
		AccessGiveUp:        o.HostClusterAccessGiveUp,
		PollInterval:        o.HostClusterPollInterval,
		InventoryInterval:   o.HostClusterInventoryInterval,
		Concurrency:         o.HostClusterConcurrency,
		ExternalIDKey:       &externalid.Key{Reader: backend.Reader, Writer: backend.Client, Name: keySecret},
		AWSEndpointURL:      o.AWSEndpointURL,
		PlatformAWS:         platformAWS,
		MaxPerWorkspace:     o.MaxHostClustersPerWorkspace,
		Guard:               guard,
		Prices:              prices,
		// What a target answers is capped; one workspace holds a bounded share of the Flux
		// install slots; every install has a deadline.
		ReadLimits:           readLimits,
		InstallsPerWorkspace: o.MaxOperationsPerWorkspace,
		InstallTimeout:       o.OperationTimeout,
		MaxRunsPerHour:       o.MaxProvisioningRunsPerHour,
	}).SetupWithManager(m)
}

// setupCatalog publishes the machine-flavor catalog kept in the platform workspace (kcpCfg points
// at it) to every workspace bound to the platform.edgeconnect.eu export.
func setupCatalog(ctx context.Context, m *Manager) error {
	// No ByObject: that would need the kind's REST mapping now, and the catalog's CRD may not be
	// served yet right after the platform workspace was bootstrapped.
	catalog, err := cache.New(m.Configs.KCP, cache.Options{Scheme: m.Scheme})
	if err != nil {
		return fmt.Errorf("failed to create the catalog cache: %w", err)
	}
	if err := m.GetLocalManager().Add(catalog); err != nil {
		return err
	}
	return (&flavorcatalog.Reconciler{Workspaces: m.Workspaces[PlatformProvider], Catalog: catalog, Concurrency: m.Options.FlavorCatalogConcurrency}).SetupWithManager(ctx, m)
}

// setupFleetOverview serves the platform admins' fleet overview (unless its address is off) and
// registers the fleet's gauges with the manager's metrics, both reading the same Source: the
// HostClusters in the fleet's shared cache and the platform workspace's RegisteredClusters.
func setupFleetOverview(_ context.Context, m *Manager) error {
	o, kcpCfg, backendCfg, scheme, ws, log := m.Options, m.Configs.KCP, m.Configs.Backend, m.Scheme, m.Workspaces[KubeoperaProvider], m.Log
	platform, err := client.New(kcpCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	backend, err := kubernetes.NewForConfig(backendCfg)
	if err != nil {
		return err
	}
	// Pages, JSON requests and scrapes read the platform workspace and the backend's nodes at
	// most every 10 s; HostClusters come from the shared cache on every call.
	src := overview.NewFleetSource(ws, platform, backend, o.PlatformWorkspace)
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
	return m.GetLocalManager().Add(srv)
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
