package hostcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/kubeopera/kubeopera/syncer"

	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/authapi"
	"github.com/kubeopera/kubeopera/internal/aws/ekstoken"
	"github.com/kubeopera/kubeopera/internal/aws/externalid"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/health"
	"github.com/kubeopera/kubeopera/internal/netguard"
	pclient "github.com/kubeopera/kubeopera/internal/provisioner/client"
	"github.com/kubeopera/kubeopera/internal/provisioning"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	scaffolderclient "github.com/kubeopera/kubeopera/internal/scaffolder/client"
	"github.com/kubeopera/kubeopera/internal/target"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

const (
	// ControllerName names the controller, its field owner and its event reporter, and is the
	// managed-by label of its Secrets (docs/hostcluster.md#secrets: kubeopera.io/managed-by=host-cluster-controller).
	ControllerName = kov1alpha1.HostClusterManagedBy
	// DefaultAccessGiveUp is how long an unreachable target is retried before the HostCluster
	// fails (docs/hostcluster.md#access: 5 minutes).
	DefaultAccessGiveUp = 5 * time.Minute
	// DefaultPollInterval is how often a HostCluster waiting on Flux, the scaffolder or the apps
	// Kustomization is looked at again.
	DefaultPollInterval = 10 * time.Second
	// DefaultInventoryInterval is how often a Ready HostCluster's inventory and health score are
	// refreshed (jittered).
	DefaultInventoryInterval = 5 * time.Minute
	// DefaultConcurrency is how many HostClusters are reconciled at once, across all workspaces.
	DefaultConcurrency = 8
	// DefaultInstallConcurrency is how many Flux installs run at once.
	DefaultInstallConcurrency = 4
	// DefaultProvisionerIdentity is the provisioner's ServiceAccount (config/provisioner).
	DefaultProvisionerIdentity = "kubeopera-provisioning/kubeopera-provisioner"
	// DefaultScaffolderIdentity is the gitops-scaffolder's ServiceAccount (config/scaffolder).
	DefaultScaffolderIdentity = "kubeopera-provisioning/gitops-scaffolder"
	// DefaultSyncInterval is how often Flux on a target looks at the tree's repository: the
	// second pass of a scaffold reaches the target within it.
	DefaultSyncInterval = time.Minute
	// DefaultTargetTimeout bounds each request to a target cluster.
	DefaultTargetTimeout = 15 * time.Second
	// DefaultMaxRunsPerHour is the manager's default cap on the provisioning runs one workspace
	// starts per hour: a few clusters built and torn down, and retries.
	DefaultMaxRunsPerHour = 10
)

// Reconciler drives HostClusters through their state machine.
type Reconciler struct {
	// Workspaces serves every workspace bound to the kubeopera.io export.
	Workspaces *apiexport.Provider
	// Backend reads (uncached) and writes backend namespaces and Secrets.
	Backend syncer.Backend
	// Flux installs Flux on targets.
	Flux *flux.Installer
	// Scaffolder is the gitops-scaffolder client; nil when GITOPS_SCAFFOLDER_BASE_URL is unset,
	// which fails GeneratingGitOpsTree at once, saying so.
	Scaffolder *scaffolderclient.Client
	// ScaffolderIdentity is the gitops-scaffolder's ServiceAccount on the backend,
	// <namespace>/<name>: it is let read each cluster's stored Secrets by name
	// (DefaultScaffolderIdentity).
	ScaffolderIdentity string
	// AuthAPI says where authapi and its Secret live on a target.
	AuthAPI authapi.Options
	// GitBranch is the branch Flux follows (default main).
	GitBranch string
	// SyncInterval is how often Flux on a target looks at the tree's repository
	// (DefaultSyncInterval).
	SyncInterval time.Duration
	// AccessGiveUp is how long an unreachable target is retried; DefaultAccessGiveUp when zero.
	AccessGiveUp time.Duration
	// PollInterval; DefaultPollInterval when zero.
	PollInterval time.Duration
	// InventoryInterval; DefaultInventoryInterval when zero.
	InventoryInterval time.Duration
	// TargetTimeout; DefaultTargetTimeout when zero.
	TargetTimeout time.Duration
	// Concurrency; DefaultConcurrency when zero.
	Concurrency int
	// InstallConcurrency; DefaultInstallConcurrency when zero.
	InstallConcurrency int
	// MaxPerWorkspace is how many HostClusters one workspace may have (QuotaExceeded beyond);
	// 0: no limit.
	MaxPerWorkspace int
	// InstallsPerWorkspace bounds the Flux installs of one workspace running at once (0: only
	// InstallConcurrency), so one tenant's slow targets never hold every install slot.
	InstallsPerWorkspace int
	// InstallTimeout bounds one Flux install (reconcile.DefaultOperationTimeout when zero).
	InstallTimeout time.Duration
	// ReadLimits cap what is read from targets: bytes and JSON array elements per response (the
	// transport of every target client), pages and items per list (zero fields: readlimit's
	// defaults).
	ReadLimits readlimit.Limits
	// Provisioner is the cluster provisioner's client; nil when CLUSTER_PROVISIONER_BASE_URL is
	// unset, which fails provision_vanilla and provision_eks at once, saying so.
	Provisioner *pclient.Client
	// MaxRunsPerHour caps the provisioning runs (apply and destroy) one workspace starts in any
	// hour, counted in a ledger in its backend namespace (internal/provisioning); over it a HostCluster fails
	// with QuotaExceeded and nothing is created. 0: no limit (the manager's flag defaults to
	// DefaultMaxRunsPerHour).
	MaxRunsPerHour int
	// ProvisionerIdentity is the provisioner's ServiceAccount on the backend,
	// <namespace>/<name>: it is let read the credential copies (DefaultProvisionerIdentity).
	ProvisionerIdentity string
	// ExternalIDKey is the installation key of the workspaces' AWS external IDs; nil: the default
	// Secret (externalid.DefaultNamespace/DefaultName) on Backend.
	ExternalIDKey *externalid.Key
	// AWSEndpointURL is the AWS endpoint the EKS tokens the manager mints in process are signed
	// for (sts:AssumeRole and the presigned sts:GetCallerIdentity an EKS API server replays);
	// empty: STS's regional endpoint of the cluster's region. Tests point it at their local AWS.
	AWSEndpointURL string
	// PlatformAWS is the platform's own AWS identity, used for one thing only: to assume the role
	// of a tenant's credential that has a role_arn and no access key (sts:AssumeRole with the
	// workspace's external ID, so the role's trust policy must name both), for a provisioned EKS
	// cluster's tokens. The tokens are always signed by the assumed role's session, never by this
	// identity. nil: such a credential is refused for provision_eks (an access key is needed).
	PlatformAWS aws.CredentialsProvider
	// Prices is the platform admin's price table of node instance types, for each cluster's
	// monthly cost estimate (docs/fleet.md#cost); nil: no estimate.
	Prices *health.PriceTable
	// Guard checks every address the controller dials on a tenant's behalf: the API server of a
	// target, named by its kubeconfig (connected, or provisioned in the tenant's cloud), for
	// every read and write there (access, inventory, Flux's install and sync, the admin
	// bootstrap through the service proxy). nil: netguard.DefaultRules with no exception, which
	// refuses loopback among others; the manager gives the platform's own addresses and the
	// admin's ranges, make run and the tests their loopback exception.
	Guard *netguard.Guard

	installs  *reconcile.Operations[mcreconcile.Request, flux.Result]
	runs      *provisioning.Runs
	eksTokens ekstoken.Cache
	now       func() time.Time
	// kind is the HostCluster described to the reconcile skeleton (SetupWithManager).
	kind *reconcile.Kind[*kov1alpha1.HostCluster, *scope]
}

// SetupWithManager registers the controller with the workspaces' provider.
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	if r.Workspaces == nil {
		return errors.New("hostcluster controller needs the workspaces of the kubeopera.io export")
	}
	if r.Flux == nil {
		return errors.New("hostcluster controller needs a Flux installer")
	}
	if r.SyncInterval <= 0 {
		r.SyncInterval = DefaultSyncInterval
	}
	if r.GitBranch == "" {
		r.GitBranch = "main"
	}
	if r.AccessGiveUp == 0 {
		r.AccessGiveUp = DefaultAccessGiveUp
	}
	if r.PollInterval == 0 {
		r.PollInterval = DefaultPollInterval
	}
	if r.InventoryInterval == 0 {
		r.InventoryInterval = DefaultInventoryInterval
	}
	if r.TargetTimeout == 0 {
		r.TargetTimeout = DefaultTargetTimeout
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	if r.InstallConcurrency == 0 {
		r.InstallConcurrency = DefaultInstallConcurrency
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.ScaffolderIdentity == "" {
		r.ScaffolderIdentity = DefaultScaffolderIdentity
	}
	if r.ProvisionerIdentity == "" {
		r.ProvisionerIdentity = DefaultProvisionerIdentity
	}
	if r.AuthAPI == (authapi.Options{}) {
		r.AuthAPI = authapi.DefaultOptions()
	}
	if r.ExternalIDKey == nil {
		r.ExternalIDKey = &externalid.Key{Reader: r.Backend.Reader, Writer: r.Backend.Client}
	}
	if r.Guard == nil {
		r.Guard = netguard.New(nil, netguard.DefaultRules()...)
	}
	r.runs = &provisioning.Runs{
		Client: r.Provisioner, Identity: r.ProvisionerIdentity, MaxPerHour: r.MaxRunsPerHour, PlatformIdentity: r.PlatformAWS != nil,
		ManagedBy: ControllerName, PollInterval: r.PollInterval, Now: r.now,
	}
	// A Flux install writes a dozen CRDs and takes seconds: never in a reconcile worker.
	installs, installEnds, err := reconcile.NewOperations[flux.Result](mgr, r.InstallConcurrency, r.InstallsPerWorkspace, r.InstallTimeout)
	if err != nil {
		return err
	}
	r.installs = installs
	r.kind = &reconcile.Kind[*kov1alpha1.HostCluster, *scope]{
		Controller:    ControllerName,
		GVK:           kov1alpha1.GroupVersion.WithKind("HostCluster"),
		Workspaces:    r.Workspaces,
		Backend:       r.Backend,
		Finalizer:     kov1alpha1.HostClusterFinalizer,
		New:           func() *kov1alpha1.HostCluster { return &kov1alpha1.HostCluster{} },
		Scope:         r.scope,
		Normal:        func(*kov1alpha1.HostCluster) []reconcile.Step[*scope] { return r.normalSteps() },
		Delete:        func(*kov1alpha1.HostCluster) []reconcile.Step[*scope] { return r.deleteSteps() },
		Phase:         phase,
		PublishPhases: true,
		ReadyMessage:  readyMessage,
		ReadyRequeue:  func(*kov1alpha1.HostCluster) time.Duration { return wait.Jitter(r.InventoryInterval, 0.2) },
		OwnAnnotations: []string{
			kov1alpha1.ValidationStartedAnnotation, kov1alpha1.ScaffoldJobIDAnnotation,
			kov1alpha1.ProvisionJobIDAnnotation, kov1alpha1.DestroyJobIDAnnotation, kov1alpha1.PlanJobIDAnnotation,
		},
	}
	return apiexport.NewController(mgr, "hostcluster", r.Workspaces, &kov1alpha1.HostCluster{},
		mccontroller.Options{Reconciler: r.kind, MaxConcurrentReconciles: r.Concurrency}, r.kind.Watch(), installEnds)
}

// scope is what one reconcile pass knows of a HostCluster, around the shared workspace↔backend
// Scope; comments say which step sets each field.
type scope struct {
	*reconcile.Scope
	// hc is the object reconciled.
	hc *kov1alpha1.HostCluster
	// target talks to the target cluster (access).
	target *target.Target
	// externalID is the workspace's AWS external ID (runsFor, first called by
	// provision).
	externalID string
}

// scope describes a HostCluster to the shared Scope and builds its own around it.
func (r *Reconciler) scope(base *reconcile.Scope, hc *kov1alpha1.HostCluster) *scope {
	base.Labels = map[string]string{
		kov1alpha1.HostClusterIDLabel: hc.Spec.ClusterID,
		kov1alpha1.ManagedByLabel:     ControllerName,
	}
	base.NamedBy = fmt.Sprintf("clusterID %q", hc.Spec.ClusterID)
	base.Poll = r.PollInterval
	return &scope{Scope: base, hc: hc}
}

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	return r.kind.Reconcile(ctx, req)
}

// Secret names of a HostCluster (docs/hostcluster.md#secrets), in kcp-<fp> on the backend and, for the kubeconfig and
// the admin password, in the HostCluster's namespace in its workspace.
func kubeconfigSecretName(clusterID string) string { return "hostcluster-" + clusterID + "-kubeconfig" }
func adminPasswordSecretName(clusterID string) string {
	return "hostcluster-" + clusterID + "-admin-password"
}
func gitCredentialsSecretName(clusterID string) string {
	return "hostcluster-" + clusterID + "-git-credentials"
}
func registryPullSecretName(clusterID string) string {
	return "hostcluster-" + clusterID + "-registry-pull"
}

// scaffolderGrantName is the Role (and RoleBinding) letting the gitops-scaffolder read the
// cluster's stored Secrets.
func scaffolderGrantName(clusterID string) string {
	return "hostcluster-" + clusterID + "-scaffolder-reader"
}

// opKey names this HostCluster's operations (reconcile.Operations).
func (s *scope) opKey(op string) string {
	return s.LogicalCluster + "/" + s.hc.Namespace + "/" + s.hc.Name + "/" + op
}
