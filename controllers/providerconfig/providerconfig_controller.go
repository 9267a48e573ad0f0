package providerconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubeopera/kubeopera/syncer"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/crossplane"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/workspaces"
	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

const (
	// ControllerName names the controller, its field owner and its event reporter.
	ControllerName = "providerconfig-controller"
	// Finalizer is set on every ProviderConfig so its backend objects go with it.
	Finalizer = "platform.edgeconnect.eu/providerconfig"
	// ProviderOTC is the provider type whose credentials are checked and given an OTC
	// ProviderConfig on the backend.
	ProviderOTC = "OTC"
	// DefaultConcurrency is how many ProviderConfigs are reconciled at once, across all workspaces.
	DefaultConcurrency = 4
	// recheck is how soon credentials that are missing or malformed are read again: the fix is in
	// a Secret, which is not watched.
	recheck = 30 * time.Second
	// readyRecheck is how often a Ready ProviderConfig's credentials are checked again.
	readyRecheck = 10 * time.Minute
	// ownerKindLabel, ownerNamespaceLabel and ownerNameLabel name the workspace object a backend
	// object was made for.
	ownerKindLabel      = "platform.edgeconnect.eu/owner-kind"
	ownerNamespaceLabel = "platform.edgeconnect.eu/owner-namespace"
	ownerNameLabel      = "platform.edgeconnect.eu/owner-name"
)

// Reconciler drives ProviderConfigs.
type Reconciler struct {
	// Workspaces serves every workspace bound to the platform.edgeconnect.eu export.
	Workspaces *apiexport.Provider
	// Backend reads (uncached) and writes backend namespaces and objects.
	Backend syncer.Backend
	// AuthHosts are the hosts OTC credentials' auth_url may name (otc.AuthHostAllowed patterns);
	// otc.DefaultAuthHosts when nil.
	AuthHosts []string
	// Concurrency is how many ProviderConfigs are reconciled at once; DefaultConcurrency when zero.
	Concurrency int

	// kind is the ProviderConfig described to the reconcile skeleton (SetupWithManager).
	kind *reconcile.Kind[*platformv1alpha1.ProviderConfig, *scope]
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr mcmanager.Manager) error {
	if r.Workspaces == nil {
		return errors.New("providerconfig controller needs the platform export's workspaces")
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	r.kind = &reconcile.Kind[*platformv1alpha1.ProviderConfig, *scope]{
		Controller: ControllerName,
		GVK:        platformv1alpha1.GroupVersion.WithKind("ProviderConfig"),
		Workspaces: r.Workspaces,
		Backend:    r.Backend,
		Finalizer:  Finalizer,
		New:        func() *platformv1alpha1.ProviderConfig { return &platformv1alpha1.ProviderConfig{} },
		Scope:      newScope,
		Normal: func(*platformv1alpha1.ProviderConfig) []reconcile.Step[*scope] {
			return []reconcile.Step[*scope]{
				{Name: "check the credentials", Condition: platformv1alpha1.CredentialsValidCondition, Run: r.credentials},
			}
		},
		Delete: func(*platformv1alpha1.ProviderConfig) []reconcile.Step[*scope] {
			return []reconcile.Step[*scope]{
				{Name: "wait for the clusters using it", Run: unused},
				{Name: "remove the backend objects", Run: remove},
			}
		},
		ReadyMessage: readyMessage,
		ReadyRequeue: func(*platformv1alpha1.ProviderConfig) time.Duration { return readyRecheck },
	}
	return apiexport.NewController(mgr, "providerconfig", r.Workspaces, &platformv1alpha1.ProviderConfig{},
		mccontroller.Options{Reconciler: r.kind, MaxConcurrentReconciles: r.Concurrency}, r.kind.Watch(),
		// A ProviderConfig being deleted waits for the KubernetesClusters naming it: one going
		// is looked at at once.
		apiexport.Watch{Object: &platformv1alpha1.KubernetesCluster{}, Map: func(obj client.Object) []types.NamespacedName {
			kc, ok := obj.(*platformv1alpha1.KubernetesCluster)
			if !ok || kc.Spec.ProviderRef.ConfigRef == nil {
				return nil
			}
			return []types.NamespacedName{{Namespace: kc.Namespace, Name: kc.Spec.ProviderRef.ConfigRef.Name}}
		}})
}

// scope is what one reconcile pass knows of a ProviderConfig, around the shared
// workspace↔backend Scope.
type scope struct {
	*reconcile.Scope
	// pc is the object reconciled.
	pc *platformv1alpha1.ProviderConfig
	// name is the name of its objects on the backend (crossplane.ProviderConfigName).
	name string
}

// newScope describes a ProviderConfig to the shared Scope and builds its own around it.
func newScope(base *reconcile.Scope, pc *platformv1alpha1.ProviderConfig) *scope {
	name := crossplane.ProviderConfigName(pc.Namespace, pc.Name)
	base.Labels = map[string]string{
		workspaces.FingerprintLabel: workspaces.Fingerprint(base.LogicalCluster),
		ownerKindLabel:              "ProviderConfig",
		ownerNamespaceLabel:         pc.Namespace,
		ownerNameLabel:              workspaces.ShortName(pc.Name, 63),
	}
	base.NamedBy = fmt.Sprintf("backend name %s", name)
	base.Poll = recheck
	return &scope{Scope: base, pc: pc, name: name}
}

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	return r.kind.Reconcile(ctx, req)
}
