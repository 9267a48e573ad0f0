package kubernetescluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubeopera/kubeopera/syncer"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/crossplane"
	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/internal/crossplane/xr"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

const (
	// ControllerName names the controller, its field owner and its event reporter.
	ControllerName = "kubernetescluster-controller"
	// ProviderOTC is the provider type with a Crossplane implementation.
	ProviderOTC = "OTC"
	// DeliveredKubeconfigKey is the key of the kubeconfig in the delivered Secret.
	DeliveredKubeconfigKey = "kubeconfig"
	// DefaultPollInterval is how often a cluster being built or torn down is looked at again.
	DefaultPollInterval = 10 * time.Second
	// DefaultConcurrency is how many KubernetesClusters are reconciled at once, across all
	// workspaces.
	DefaultConcurrency = 8
	// ConnectionKubeconfigKey is the key of the kubeconfig in ClusterV3's connection Secret.
	ConnectionKubeconfigKey = "kubeconfig"
	// The network the platform creates when the tenant gives none.
	defaultVPCCIDR    = "192.168.0.0/16"
	defaultSubnetCIDR = "192.168.0.0/24"
	// referenceRecheck is how soon a KubernetesCluster waiting on an object of its workspace (its
	// ProviderConfig, MachineCapabilities, the flavor catalog) looks again; their changes are
	// watched, so this is the fallback.
	referenceRecheck = 5 * time.Minute
)

// Reconciler drives KubernetesClusters.
type Reconciler struct {
	// Workspaces serves every workspace bound to the platform.edgeconnect.eu export.
	Workspaces *apiexport.Provider
	// Backend reads (uncached) and writes the backend.
	Backend syncer.Backend
	// ConnectionSecretKey is the key of the kubeconfig in the cluster resource's connection Secret.
	ConnectionSecretKey string
	// PollInterval; DefaultPollInterval when zero.
	PollInterval time.Duration
	// MaxPerWorkspace is how many KubernetesClusters one workspace may have (QuotaExceeded
	// beyond); 0: no limit.
	MaxPerWorkspace int
	// Concurrency is how many KubernetesClusters are reconciled at once; DefaultConcurrency when
	// zero.
	Concurrency int
	// BackendWatcher watches the backend objects a KubernetesCluster waits on (its Crossplane
	// resources and connection Secret in kcp-<fp>, one name each) so it is reconciled when they
	// change: nil, they are polled only (PollInterval).
	BackendWatcher client.WithWatch
	// MaxWatches bounds those watches (256 when zero); beyond, they are polled.
	MaxWatches int

	// arrivals watch the backend objects KubernetesClusters wait on.
	arrivals *reconcile.Arrivals
	// kind is the KubernetesCluster described to the reconcile skeleton (SetupWithManager).
	kind *reconcile.Kind[*platformv1alpha1.KubernetesCluster, *scope]
}

// SetupWithManager registers the controller; a ProviderConfig or MachineCapabilities changing
// requeues the KubernetesClusters of its namespace that name it, and a flavor of the workspace's
// catalog copy changing requeues those still without a flavor (waitingForFlavor).
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	if r.Workspaces == nil {
		return errors.New("kubernetescluster controller needs the platform export's workspaces")
	}
	if r.PollInterval == 0 {
		r.PollInterval = DefaultPollInterval
	}
	if r.ConnectionSecretKey == "" {
		r.ConnectionSecretKey = ConnectionKubeconfigKey
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	// Crossplane and its providers take seconds to minutes to act on a resource: each one waited
	// on is watched (one name in kcp-<fp>), so its change is seen at once; the poll stays the
	// fallback.
	arrivals, arrived, err := reconcile.NewArrivals(mgr, r.BackendWatcher, r.MaxWatches)
	if err != nil {
		return err
	}
	r.arrivals = arrivals
	r.kind = &reconcile.Kind[*platformv1alpha1.KubernetesCluster, *scope]{
		Controller:   ControllerName,
		GVK:          platformv1alpha1.GroupVersion.WithKind("KubernetesCluster"),
		Workspaces:   r.Workspaces,
		Backend:      r.Backend,
		Finalizer:    platformv1alpha1.KubernetesClusterFinalizer,
		New:          func() *platformv1alpha1.KubernetesCluster { return &platformv1alpha1.KubernetesCluster{} },
		Scope:        r.scope,
		Normal:       r.normalSteps,
		Delete:       r.deleteSteps,
		Phase:        phase,
		ReadyMessage: readyMessage,
		ReadyRequeue: func(kc *platformv1alpha1.KubernetesCluster) time.Duration {
			if isOTC(kc) {
				return 10 * time.Minute
			}
			// A composition's kubeconfig may hold a short-lived token its provider renews in the
			// backend Secret (provider-upjet-aws' ClusterAuth: 15 minutes, renewed every 10):
			// the delivered copy follows it.
			return 2 * time.Minute
		},
	}
	return apiexport.NewController(mgr, "kubernetescluster", r.Workspaces, &platformv1alpha1.KubernetesCluster{},
		mccontroller.Options{Reconciler: r.kind, MaxConcurrentReconciles: r.Concurrency}, r.kind.Watch(),
		apiexport.Watch{Object: &platformv1alpha1.ProviderConfig{}, Map: r.naming(func(kc *platformv1alpha1.KubernetesCluster) string {
			if kc.Spec.ProviderRef.ConfigRef == nil {
				return ""
			}
			return kc.Spec.ProviderRef.ConfigRef.Name
		})},
		apiexport.Watch{Object: &platformv1alpha1.MachineCapabilities{}, Map: r.naming(func(kc *platformv1alpha1.KubernetesCluster) string {
			return kc.Spec.MachineCapabilitiesRef.Name
		})},
		apiexport.Watch{Object: &platformv1alpha1.ProviderMachineFlavor{}, Map: r.waitingForFlavor},
		arrived)
}

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	return r.kind.Reconcile(ctx, req)
}

// naming maps an object to the KubernetesClusters of its namespace whose ref names it.
func (r *Reconciler) naming(ref func(*platformv1alpha1.KubernetesCluster) string) apiexport.MapFunc {
	return func(obj client.Object) []types.NamespacedName {
		ws, ok := r.Workspaces.Workspace(r.Workspaces.ClusterName(logicalClusterOf(obj)))
		if !ok {
			return nil
		}
		list := &platformv1alpha1.KubernetesClusterList{}
		if err := ws.Client().List(context.Background(), list, client.InNamespace(obj.GetNamespace())); err != nil {
			return nil
		}
		var out []types.NamespacedName
		for i := range list.Items {
			if ref(&list.Items[i]) == obj.GetName() {
				out = append(out, types.NamespacedName{Namespace: obj.GetNamespace(), Name: list.Items[i].Name})
			}
		}
		return out
	}
}

// waitingForFlavor maps a change of a workspace's catalog copy (the flavorcatalog controller
// writes it a flavor at a time, and again whenever the platform admin changes the catalog) to
// that workspace's KubernetesClusters with no flavor matched yet: one created before its
// workspace's copy was complete, or asking for what the catalog did not offer, matches as soon as
// the flavor is there, not at the next recheck.
func (r *Reconciler) waitingForFlavor(obj client.Object) []types.NamespacedName {
	ws, ok := r.Workspaces.Workspace(r.Workspaces.ClusterName(logicalClusterOf(obj)))
	if !ok {
		return nil
	}
	list := &platformv1alpha1.KubernetesClusterList{}
	if err := ws.Client().List(context.Background(), list); err != nil {
		return nil
	}
	var out []types.NamespacedName
	for i := range list.Items {
		if kc := &list.Items[i]; !reconcile.IsTrue(kc, platformv1alpha1.FlavorMatchedCondition) {
			out = append(out, types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name})
		}
	}
	return out
}

// logicalClusterOf is the logical cluster of an object read through the export's virtual
// workspace.
func logicalClusterOf(obj client.Object) string {
	return obj.GetAnnotations()["kcp.io/cluster"]
}

// scope is what one reconcile pass knows of a KubernetesCluster, around the shared
// workspace↔backend Scope; comments say which step sets each field.
type scope struct {
	*reconcile.Scope
	// kc is the object reconciled.
	kc *platformv1alpha1.KubernetesCluster
	// base is the base name of its backend objects (crossplane.ClusterName).
	base string
	// objects writes and deletes its backend objects for Crossplane.
	objects crossplane.Objects
	// providerConfig is the OTC ProviderConfig's name on the backend, and credentialsSecret the
	// credentials Secret's (provider).
	providerConfig    string
	credentialsSecret string
	// flavor is the node flavor (matchFlavor).
	flavor string
}

// scope describes a KubernetesCluster to the shared Scope and builds its own around it.
func (r *Reconciler) scope(base *reconcile.Scope, kc *platformv1alpha1.KubernetesCluster) *scope {
	base.Labels = map[string]string{commonv1alpha1.ManagedByLabel: ControllerName}
	base.NamedBy = fmt.Sprintf("KubernetesCluster name %q", kc.Name)
	base.Poll = r.PollInterval
	return &scope{
		Scope:   base,
		kc:      kc,
		base:    crossplane.ClusterName(kc.Namespace, kc.Name),
		objects: crossplane.Objects{Client: base.Backend.Client, LogicalCluster: base.LogicalCluster, Owner: base.Owner},
	}
}

// name is the name of its backend object with suffix.
func (s *scope) name(suffix string) string { return s.base + "-" + suffix }

// kubeconfigSecret is the Secret its kubeconfig is delivered as.
func (s *scope) kubeconfigSecret() string { return s.kc.Name + "-kubeconfig" }

// normalSteps are the steps of a KubernetesCluster of its provider type: OTC's managed resources
// one by one, or one composite resource for every other provider.
func (r *Reconciler) normalSteps(kc *platformv1alpha1.KubernetesCluster) []reconcile.Step[*scope] {
	head := []reconcile.Step[*scope]{
		{Name: "admit the KubernetesCluster", Condition: platformv1alpha1.AdmittedCondition, Run: r.admit},
		{Name: "check the provider and its credentials", Condition: platformv1alpha1.CredentialsValidCondition, Run: r.provider},
		{Name: "match a node flavor", Condition: platformv1alpha1.FlavorMatchedCondition, Run: matchFlavor},
		{Name: "prepare the backend namespace", Run: backendNamespace},
	}
	deliver := reconcile.Step[*scope]{Name: "deliver the kubeconfig", Condition: platformv1alpha1.KubeconfigDeliveredCondition, Run: r.kubeconfig}
	if !isOTC(kc) {
		return append(head,
			reconcile.Step[*scope]{Name: "build the composite cluster", Condition: platformv1alpha1.ClusterReadyCondition, Run: r.composite},
			deliver)
	}
	return append(head,
		reconcile.Step[*scope]{Name: "build the network", Condition: platformv1alpha1.NetworkReadyCondition, Run: r.network},
		reconcile.Step[*scope]{Name: "build the cluster", Condition: platformv1alpha1.ClusterReadyCondition, Run: r.cluster},
		reconcile.Step[*scope]{Name: "build the node pool", Condition: platformv1alpha1.NodePoolReadyCondition, Run: r.nodePool},
		deliver)
}

// deleteSteps delete every kind either path writes, each only when it exists and is this
// KubernetesCluster's (an object left from another spec cannot be orphaned), in a safe order.
func (r *Reconciler) deleteSteps(*platformv1alpha1.KubernetesCluster) []reconcile.Step[*scope] {
	return []reconcile.Step[*scope]{
		{Name: "delete the node pool", Condition: platformv1alpha1.NodePoolReadyCondition, Run: r.deleteOf(otc.NodePoolGVK, "pool")},
		{Name: "delete the cluster", Condition: platformv1alpha1.ClusterReadyCondition, Run: r.deleteOf(otc.ClusterGVK, "cluster")},
		// Foreground: the XR is gone only once the resources composed for it are (they are its
		// dependents), so "deleted" means the cloud resources are.
		{Name: "delete the composite cluster", Condition: platformv1alpha1.ClusterReadyCondition, Run: r.deleteOf(xr.GVK, "cluster", client.PropagationPolicy(metav1.DeletePropagationForeground))},
		// The elastic IP only once the cluster it is bound to is gone (deleting the CCE cluster
		// releases it).
		{Name: "delete the elastic IP", Condition: platformv1alpha1.NetworkReadyCondition, Run: r.deleteOf(otc.EIPGVK, "eip")},
		{Name: "delete the subnet", Condition: platformv1alpha1.NetworkReadyCondition, Run: r.deleteOf(otc.SubnetGVK, "subnet")},
		{Name: "delete the VPC", Condition: platformv1alpha1.NetworkReadyCondition, Run: r.deleteOf(otc.VPCGVK, "vpc")},
		{Name: "remove the kubeconfig", Condition: platformv1alpha1.KubeconfigDeliveredCondition, Run: removeKubeconfig},
	}
}
