// Package kubernetescluster is the KubernetesCluster reconciler (seed 004): a managed Kubernetes
// cluster built by Crossplane on the backend, in the workspace's namespace kcp-<fp>, for a tenant
// who asked for it in their workspace.
//
// For spec.providerRef.type OTC it writes provider-opentelekomcloud's Crossplane v2 namespaced
// managed resources (internal/crossplane/otc): VpcV1 and SubnetV1 when the tenant gave no vpcID
// and subnetID, ClusterV3 wired to them by references, and NodePoolV3 with the cluster's id and the
// key pair written literally (never references, so deleting it cannot deadlock). The node flavor is
// spec.nodeFlavor, or the catalog's best match of the referenced MachineCapabilities
// (internal/flavors). Status mirrors each resource's Synced and Ready conditions; a sold-out node
// pool says so with the seed's advice. When the cluster is Ready its kubeconfig, read from the
// cluster resource's connection Secret, is delivered as <name>-kubeconfig.
//
// Every other provider type is built by Crossplane from one namespaced composite resource, a
// ManagedCluster (internal/crossplane/xr; its XRD and Compositions are in config/crossplane),
// selected to the Composition labelled for the provider. A type with no such Composition on the
// backend is Stalled with UnsupportedProvider naming the supported ones. ClusterReady mirrors
// the XR's Synced and Ready; the Composition writes the kubeconfig into Secret <base>-conn, which
// is delivered as for OTC. The ProviderConfig must be of the same type (spec.type).
//
// Deleting tears down in a safe order, waiting for each to be gone: node pool, cluster, subnet,
// VPC (only those this controller created), then the delivered kubeconfig; then the finalizer.
//
// Backend names are kc-<namespace>-<name> (workspaces.ObjectName: no collisions across the
// workspace's namespaces; the namespace kcp-<fp> separates workspaces) plus -vpc, -subnet,
// -cluster, -pool, -conn; every object is labelled with the workspace fingerprint and the
// KubernetesCluster it belongs to.
package kubernetescluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/providerconfig"
	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/internal/crossplane/xr"
	"github.com/kubeopera/kubeopera/internal/flavors"
	"github.com/kubeopera/kubeopera/internal/fleet"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"
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
	// ConnectionKubeconfigKey is the key of the kubeconfig in ClusterV3's connection Secret.
	ConnectionKubeconfigKey = "kubeconfig"
	// NodePoolSoldOut is NodePoolV3 status.atProvider.status when OTC has no capacity for it.
	NodePoolSoldOut = "SoldOut"
	// The network the platform creates when the tenant gives none.
	defaultVPCCIDR    = "192.168.0.0/16"
	defaultSubnetCIDR = "192.168.0.0/24"
)

// Reconciler drives KubernetesClusters.
type Reconciler struct {
	// Workspaces serves every workspace bound to the platform.edgeconnect.eu export.
	Workspaces *fleet.Provider
	// Backend reads (uncached) and writes the backend.
	Backend workspaces.Backend
	// ConnectionSecretKey is the key of the kubeconfig in the cluster resource's connection Secret.
	ConnectionSecretKey string
	// PollInterval; DefaultPollInterval when zero.
	PollInterval time.Duration
	// MaxPerWorkspace is how many KubernetesClusters one workspace may have (QuotaExceeded
	// beyond); 0: no limit.
	MaxPerWorkspace int
}

// SetupWithManager registers the controller; a ProviderConfig or MachineCapabilities changing
// requeues the KubernetesClusters of its namespace that name it.
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
	return fleet.NewController(mgr, "kubernetescluster", r.Workspaces, &platformv1alpha1.KubernetesCluster{},
		mccontroller.Options{Reconciler: r, MaxConcurrentReconciles: 8},
		fleet.Watch{Object: &platformv1alpha1.ProviderConfig{}, Map: r.naming(func(kc *platformv1alpha1.KubernetesCluster) string {
			if kc.Spec.ProviderRef.ConfigRef == nil {
				return ""
			}
			return kc.Spec.ProviderRef.ConfigRef.Name
		})},
		fleet.Watch{Object: &platformv1alpha1.MachineCapabilities{}, Map: r.naming(func(kc *platformv1alpha1.KubernetesCluster) string {
			return kc.Spec.MachineCapabilitiesRef.Name
		})})
}

// naming maps an object to the KubernetesClusters of its namespace whose ref names it.
func (r *Reconciler) naming(ref func(*platformv1alpha1.KubernetesCluster) string) fleet.MapFunc {
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

// scope carries what one pass knows.
type scope struct {
	kc             *platformv1alpha1.KubernetesCluster
	ws             fleet.Workspace
	logicalCluster string
	storeNamespace string
	owner          string
	base           string
	// providerConfig is the OTC ProviderConfig's name on the backend, and credentialsSecret the
	// credentials Secret's (provider step).
	providerConfig    string
	credentialsSecret string
	// flavor is the node flavor (flavor step).
	flavor string
}

func (s *scope) name(suffix string) string { return s.base + "-" + suffix }

// Reconcile implements mcreconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	ctx, _ = reconcile.RequestLogger(ctx, req, "KubernetesCluster")
	kc := &platformv1alpha1.KubernetesCluster{}
	ws, found, err := r.Workspaces.Read(ctx, req, kc)
	if !found {
		return ctrl.Result{}, err
	}
	s := &scope{
		kc: kc, ws: ws, logicalCluster: ws.LogicalCluster,
		storeNamespace: workspaces.Namespace(ws.LogicalCluster),
		owner:          "KubernetesCluster " + kc.Namespace + "/" + kc.Name,
		base:           "kc-" + workspaces.ObjectName(kc.Namespace, kc.Name, 40),
	}
	return reconcile.Pass[*scope]{
		Client:    ws.Client(),
		Object:    kc,
		Scope:     s,
		Finalizer: platformv1alpha1.KubernetesClusterFinalizer,
		Normal:    r.steps(kc),
		// Every kind either path writes is deleted, each only when it exists and is this
		// KubernetesCluster's: an object left from another spec cannot be orphaned.
		Delete: []reconcile.Step[*scope]{
			{Name: "delete the node pool", Condition: platformv1alpha1.NodePoolReadyCondition, Run: r.deleteOf(otc.NodePoolGVK, "pool")},
			{Name: "delete the cluster", Condition: platformv1alpha1.ClusterReadyCondition, Run: r.deleteOf(otc.ClusterGVK, "cluster")},
			// Foreground: the XR is gone only once the resources composed for it are (they are its
			// dependents), so "deleted" means the cloud resources are.
			{Name: "delete the composite cluster", Condition: platformv1alpha1.ClusterReadyCondition, Run: r.deleteOf(xr.GVK, "cluster", client.PropagationPolicy(metav1.DeletePropagationForeground))},
			{Name: "delete the subnet", Condition: platformv1alpha1.NetworkReadyCondition, Run: r.deleteOf(otc.SubnetGVK, "subnet")},
			{Name: "delete the VPC", Condition: platformv1alpha1.NetworkReadyCondition, Run: r.deleteOf(otc.VPCGVK, "vpc")},
			{Name: "remove the kubeconfig", Condition: platformv1alpha1.KubeconfigDeliveredCondition, Run: r.removeKubeconfig},
		},
		Recorder: ws.Recorder(ControllerName),
		ReadyMessage: func(s *scope) string {
			return fmt.Sprintf("Cluster ready with %d %s nodes; kubeconfig in Secret %s", s.kc.Spec.NodeCount, s.kc.Status.Flavor, s.kc.Status.KubeconfigSecret)
		},
		ReadyRequeue: func() time.Duration {
			if isOTC(kc) {
				return 10 * time.Minute
			}
			// A composition's kubeconfig may hold a short-lived token its provider renews in the
			// backend Secret (provider-upjet-aws' ClusterAuth: 15 minutes, renewed every 10):
			// the delivered copy follows it.
			return 2 * time.Minute
		},
	}.Run(ctx)
}

// steps are the steps of a KubernetesCluster of its provider type: OTC's managed resources one by
// one, or one composite resource for every other provider.
func (r *Reconciler) steps(kc *platformv1alpha1.KubernetesCluster) []reconcile.Step[*scope] {
	head := []reconcile.Step[*scope]{
		{Name: "admit the KubernetesCluster", Condition: platformv1alpha1.AdmittedCondition, Run: r.admit},
		{Name: "check the provider and its credentials", Condition: platformv1alpha1.CredentialsValidCondition, Run: r.provider},
		{Name: "match a node flavor", Condition: platformv1alpha1.FlavorMatchedCondition, Run: r.matchFlavor},
		{Name: "prepare the backend namespace", Run: r.backendNamespace},
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

// admit counts the KubernetesCluster against the workspace's cap (MaxPerWorkspace) before
// anything is created for it: first come, first served, and an admitted one stays admitted.
func (r *Reconciler) admit(ctx context.Context, s *scope) error {
	if reconcile.IsTrue(s.kc, platformv1alpha1.AdmittedCondition) {
		return nil
	}
	if limit := (reconcile.CountLimit{Max: r.MaxPerWorkspace, Kind: "KubernetesClusters"}); limit.Max > 0 {
		list := &platformv1alpha1.KubernetesClusterList{}
		if err := s.ws.Client().List(ctx, list); err != nil {
			return fmt.Errorf("failed to list the workspace's KubernetesClusters: %w", err)
		}
		if err := limit.Check(len(reconcile.Ahead(s.kc, reconcile.Pointers(list.Items), platformv1alpha1.AdmittedCondition))); err != nil {
			return err
		}
	}
	reconcile.MarkTrue(s.kc, platformv1alpha1.AdmittedCondition, commonv1alpha1.SucceededReason, "Within the workspace's limits")
	return nil
}

func isOTC(kc *platformv1alpha1.KubernetesCluster) bool {
	return strings.EqualFold(kc.Spec.ProviderRef.Type, ProviderOTC)
}

// provider checks that the platform builds clusters of the provider type (OTC, or a type with a
// Crossplane Composition for ManagedCluster on the backend) and waits for the ProviderConfig to be
// Ready and of that type.
func (r *Reconciler) provider(ctx context.Context, s *scope) error {
	kc := s.kc
	if !isOTC(kc) {
		if err := r.composition(ctx, kc.Spec.ProviderRef.Type); err != nil {
			return err
		}
	}
	if kc.Spec.ProviderRef.ConfigRef == nil || kc.Spec.ProviderRef.ConfigRef.Name == "" {
		return reconcile.Stalled(commonv1alpha1.InvalidSpecReason, "spec.providerRef.configRef.name must name a ProviderConfig in this namespace")
	}
	name := kc.Spec.ProviderRef.ConfigRef.Name
	pc := &platformv1alpha1.ProviderConfig{}
	if err := s.ws.Client().Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, pc); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Waiting(platformv1alpha1.ProviderConfigNotReadyReason, fmt.Sprintf("ProviderConfig %s/%s does not exist", kc.Namespace, name), 5*time.Minute)
		}
		return err
	}
	if !reconcile.IsTrue(pc, commonv1alpha1.ReadyCondition) {
		msg := fmt.Sprintf("ProviderConfig %s/%s is not Ready", kc.Namespace, name)
		if c := reconcile.GetCondition(pc, platformv1alpha1.CredentialsValidCondition); c != nil && c.Message != "" {
			msg += ": " + c.Reason + ": " + c.Message
		}
		return reconcile.Waiting(platformv1alpha1.ProviderConfigNotReadyReason, reconcile.Truncate(msg), 5*time.Minute)
	}
	if !strings.EqualFold(orDefault(pc.Spec.Type, ProviderOTC), kc.Spec.ProviderRef.Type) {
		return reconcile.Waiting(platformv1alpha1.ProviderConfigNotReadyReason, fmt.Sprintf(
			"ProviderConfig %s/%s holds %s credentials, not %s (spec.providerRef.type)", kc.Namespace, name, orDefault(pc.Spec.Type, ProviderOTC), kc.Spec.ProviderRef.Type), 5*time.Minute)
	}
	s.providerConfig = providerconfig.BackendName(kc.Namespace, name)
	s.credentialsSecret = providerconfig.CredentialsSecretName(kc.Namespace, name)
	reconcile.MarkTrue(kc, platformv1alpha1.CredentialsValidCondition, commonv1alpha1.SucceededReason, fmt.Sprintf("ProviderConfig %s is Ready", name))
	return nil
}

// composition finds the Crossplane Composition of ManagedCluster labelled for the provider type on
// the backend; without one, the type is not supported (Stalled: an admin installs one, then the
// tenant retries).
func (r *Reconciler) composition(ctx context.Context, providerType string) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(xr.CompositionGVK.GroupVersion().WithKind(xr.CompositionGVK.Kind + "List"))
	err := r.Backend.Reader.List(ctx, list)
	if meta.IsNoMatchError(err) || meta404(err) {
		return reconcile.Stalledf(platformv1alpha1.UnsupportedProviderReason,
			"spec.providerRef.type %q is not a provider this platform implements: no Crossplane Compositions are installed on the platform's backend; supported: %s", providerType, ProviderOTC)
	}
	if err != nil {
		return fmt.Errorf("failed to list Crossplane Compositions: %w", err)
	}
	supported := []string{ProviderOTC}
	for _, c := range list.Items {
		apiVersion, _, _ := unstructured.NestedString(c.Object, "spec", "compositeTypeRef", "apiVersion")
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "compositeTypeRef", "kind")
		provider := c.GetLabels()[xr.ProviderLabel]
		if apiVersion != xr.GVK.GroupVersion().String() || kind != xr.Kind || provider == "" {
			continue
		}
		if provider == xr.ProviderValue(providerType) {
			return nil
		}
		if !slices.Contains(supported, provider) {
			supported = append(supported, provider)
		}
	}
	return reconcile.Stalledf(platformv1alpha1.UnsupportedProviderReason,
		"spec.providerRef.type %q is not a provider this platform implements (no Crossplane Composition of %s labelled %s=%s on the platform's backend); supported: %s",
		providerType, xr.Kind, xr.ProviderLabel, xr.ProviderValue(providerType), strings.Join(supported, ", "))
}

// matchFlavor picks the node flavor: spec.nodeFlavor, checked against the catalog, or the
// catalog's best match of the MachineCapabilities.
func (r *Reconciler) matchFlavor(ctx context.Context, s *scope) error {
	kc := s.kc
	catalog := &platformv1alpha1.ProviderMachineFlavorList{}
	if err := s.ws.Client().List(ctx, catalog); err != nil {
		return fmt.Errorf("failed to read the flavor catalog: %w", err)
	}
	if kc.Spec.NodeFlavor != "" {
		f, err := flavors.Override(catalog.Items, kc.Spec.ProviderRef.Type, kc.Spec.NodeFlavor, kc.Spec.NodeAvailableZone)
		if err != nil {
			return reconcile.Waiting(platformv1alpha1.NoMatchingFlavorReason, "spec.nodeFlavor: "+err.Error(), 5*time.Minute)
		}
		s.flavor = f.Spec.Flavor
		kc.Status.Flavor = s.flavor
		reconcile.MarkTrue(kc, platformv1alpha1.FlavorMatchedCondition, commonv1alpha1.SucceededReason, "spec.nodeFlavor "+s.flavor+" is in the catalog")
		return nil
	}
	mc := &platformv1alpha1.MachineCapabilities{}
	name := kc.Spec.MachineCapabilitiesRef.Name
	if err := s.ws.Client().Get(ctx, client.ObjectKey{Namespace: kc.Namespace, Name: name}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Waiting(platformv1alpha1.MachineCapabilitiesMissingReason, fmt.Sprintf("MachineCapabilities %s/%s does not exist", kc.Namespace, name), 5*time.Minute)
		}
		return err
	}
	res := flavors.Match(catalog.Items, flavors.Request{Provider: kc.Spec.ProviderRef.Type, Zone: kc.Spec.NodeAvailableZone, Capabilities: mc.Spec})
	if res.Best == nil {
		return reconcile.Waiting(platformv1alpha1.NoMatchingFlavorReason, res.Missing, 5*time.Minute)
	}
	s.flavor = res.Best.Spec.Flavor
	kc.Status.Flavor = s.flavor
	reconcile.MarkTrue(kc, platformv1alpha1.FlavorMatchedCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("%s (%s) is the smallest catalog flavor with what MachineCapabilities %s asks", s.flavor, res.Best.Name, name))
	return nil
}

// backendNamespace makes kcp-<fp> exist and belong to this workspace.
func (r *Reconciler) backendNamespace(ctx context.Context, s *scope) error {
	err := r.Backend.EnsureNamespaces(ctx, s.logicalCluster, workspaces.NamespaceClaim{Name: s.storeNamespace})
	if workspaces.IsCollision(err) {
		return reconcile.Stalled(commonv1alpha1.FingerprintCollisionReason, err.Error())
	}
	return err
}

func (s *scope) object(suffix string) otc.Object {
	return otc.Object{Name: s.name(suffix), Namespace: s.storeNamespace, Labels: map[string]string{
		workspaces.FingerprintLabel:               workspaces.Fingerprint(s.logicalCluster),
		"platform.edgeconnect.eu/owner-kind":      "KubernetesCluster",
		"platform.edgeconnect.eu/owner-namespace": s.kc.Namespace,
		"platform.edgeconnect.eu/owner-name":      workspaces.ShortName(s.kc.Name, 63),
	}}
}

// apply writes a managed resource this KubernetesCluster owns and returns it as stored.
func (r *Reconciler) apply(ctx context.Context, s *scope, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(u.GroupVersionKind())
	err := r.Backend.Client.Get(ctx, client.ObjectKeyFromObject(u), cur)
	switch {
	case err == nil && !workspaces.OwnedBy(cur, s.logicalCluster, s.owner):
		return nil, reconcile.Stalledf(commonv1alpha1.NameConflictReason, "%s %s/%s on the backend belongs to %s", u.GetKind(), u.GetNamespace(), u.GetName(), cur.GetAnnotations()[workspaces.OwnerAnnotation])
	case err != nil && !apierrors.IsNotFound(err):
		return nil, err
	case err == nil && contains(cur.Object["spec"], u.Object["spec"]) && contains(cur.Object["metadata"].(map[string]any)["labels"], u.Object["metadata"].(map[string]any)["labels"]):
		// Already as wanted: no write (each pass stays cheap, and Crossplane's own writes to the
		// object do not race ours).
		return cur, nil
	}
	u.SetAnnotations(map[string]string{workspaces.LogicalClusterAnnotation: s.logicalCluster, workspaces.OwnerAnnotation: s.owner})
	if err := providerconfig.Apply(ctx, r.Backend.Client, u); err != nil {
		if apierrors.IsInvalid(err) {
			// The kind's schema on the backend (a provider's CRD, or a composite's XRD rules)
			// refuses what the spec asks: retrying cannot help, the tenant changes the spec.
			return nil, reconcile.Stalledf(commonv1alpha1.InvalidSpecReason, "the backend refuses %s %s: %s", u.GetKind(), u.GetName(), invalidCauses(err))
		}
		return nil, fmt.Errorf("failed to write %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return u, nil
}

// invalidCauses is what a 422 from the backend says is wrong, field by field.
func invalidCauses(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return err.Error()
	}
	var causes []string
	for _, c := range status.Status().Details.Causes {
		causes = append(causes, strings.TrimSpace(c.Field+": "+c.Message))
	}
	return reconcile.Truncate(strings.Join(causes, "; "))
}

// contains reports whether have holds everything of want (maps: every key of want, recursively;
// lists: the same length, element by element; values: equal as printed, so an int64 written and a
// number read back compare equal). Fields others added (resolved references, defaults) are
// ignored.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !contains(h[k], v) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		return fmt.Sprint(have) == fmt.Sprint(want)
	}
}

// mirror reads a managed resource's Synced and Ready conditions (crossplane-runtime's) and says
// whether it is ready, and if not, what it shows.
func mirror(u *unstructured.Unstructured) (ready bool, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	get := func(typ string) (status, reason, msg string) {
		for _, c := range conds {
			m, ok := c.(map[string]any)
			if ok && m["type"] == typ {
				status, _ = m["status"].(string)
				reason, _ = m["reason"].(string)
				msg, _ = m["message"].(string)
			}
		}
		return
	}
	ss, sr, sm := get("Synced")
	rs, rr, rm := get("Ready")
	what := fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
	switch {
	case ss == "False":
		return false, orDefault(sr, "NotSynced"), fmt.Sprintf("%s is not Synced (%s): %s", what, sr, sm)
	case rs == "True" && ss == "True":
		return true, "", ""
	case rs == "":
		return false, platformv1alpha1.CreatingReason, what + " has no Ready condition yet"
	default:
		return false, orDefault(rr, platformv1alpha1.CreatingReason), strings.TrimSuffix(fmt.Sprintf("%s is not Ready (%s): %s", what, rr, rm), ": ")
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// network makes the VPC and subnet the tenant did not give, and waits until they are Ready.
func (r *Reconciler) network(ctx context.Context, s *scope) error {
	kc := s.kc
	if kc.Spec.VpcID != "" && kc.Spec.SubnetID != "" {
		reconcile.MarkTrue(kc, platformv1alpha1.NetworkReadyCondition, commonv1alpha1.SucceededReason, "Using the tenant's VPC "+kc.Spec.VpcID+" and subnet "+kc.Spec.SubnetID)
		return nil
	}
	s.setPhase(platformv1alpha1.KubernetesClusterPhaseProvisioning)
	var built []*unstructured.Unstructured
	if kc.Spec.VpcID == "" {
		vpc, err := r.apply(ctx, s, otc.VPC(otc.VPCParams{Object: s.object("vpc"), ProviderConfigName: s.providerConfig, CIDR: defaultVPCCIDR, Region: kc.Spec.Region}))
		if err != nil {
			return err
		}
		built = append(built, vpc)
	}
	gw, err := otc.GatewayIP(defaultSubnetCIDR)
	if err != nil {
		return err
	}
	subnet, err := r.apply(ctx, s, otc.Subnet(otc.SubnetParams{Object: s.object("subnet"), ProviderConfigName: s.providerConfig,
		CIDR: defaultSubnetCIDR, GatewayIP: gw, VPCID: kc.Spec.VpcID, VPCName: s.name("vpc"), Region: kc.Spec.Region}))
	if err != nil {
		return err
	}
	built = append(built, subnet)
	for _, u := range built {
		if ready, reason, msg := mirror(u); !ready {
			return reconcile.Waiting(reason, msg, r.PollInterval)
		}
	}
	reconcile.MarkTrue(kc, platformv1alpha1.NetworkReadyCondition, commonv1alpha1.SucceededReason, "VPC and subnet are Ready")
	return nil
}

// cluster makes the ClusterV3 and waits until it is Synced and Ready.
func (r *Reconciler) cluster(ctx context.Context, s *scope) error {
	kc := s.kc
	s.setPhase(platformv1alpha1.KubernetesClusterPhaseProvisioning)
	p := otc.ClusterParams{Object: s.object("cluster"), ProviderConfigName: s.providerConfig, Region: kc.Spec.Region,
		KubernetesVersion: kc.Spec.Kubernetes.Version, AvailabilityZone: kc.Spec.AvailableZone, ConnectionSecretName: s.name("conn")}
	if kc.Spec.VpcID != "" {
		p.VPCID = kc.Spec.VpcID
	} else {
		p.VPCName = s.name("vpc")
	}
	if kc.Spec.SubnetID != "" {
		p.SubnetID = kc.Spec.SubnetID
	} else {
		p.SubnetName = s.name("subnet")
	}
	u, err := r.apply(ctx, s, otc.Cluster(p))
	if err != nil {
		return err
	}
	if ready, reason, msg := mirror(u); !ready {
		return reconcile.Waiting(reason, msg, r.PollInterval)
	}
	reconcile.MarkTrue(kc, platformv1alpha1.ClusterReadyCondition, commonv1alpha1.SucceededReason, "ClusterV3 "+u.GetName()+" is Synced and Ready")
	return nil
}

// nodePool makes the NodePoolV3 with the cluster's id and the key pair written literally, and
// waits until it is Synced and Ready; a sold-out pool says so, with what to change.
func (r *Reconciler) nodePool(ctx context.Context, s *scope) error {
	kc := s.kc
	cl := &unstructured.Unstructured{}
	cl.SetGroupVersionKind(otc.ClusterGVK)
	if err := r.Backend.Client.Get(ctx, client.ObjectKey{Namespace: s.storeNamespace, Name: s.name("cluster")}, cl); err != nil {
		return err
	}
	id, ok := otc.AtProviderID(cl)
	if !ok {
		return reconcile.Waiting(platformv1alpha1.CreatingReason, "Waiting for the cluster's id", r.PollInterval)
	}
	u, err := r.apply(ctx, s, otc.NodePool(otc.NodePoolParams{Object: s.object("pool"), ProviderConfigName: s.providerConfig,
		ClusterID: id, Flavor: s.flavor, NodeCount: kc.Spec.NodeCount, AvailabilityZone: kc.Spec.NodeAvailableZone,
		KeyPair: kc.Spec.KeyPair, DiskSize: kc.Spec.NodeDiskSize}))
	if err != nil {
		return err
	}
	if st, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "status"); strings.EqualFold(st, NodePoolSoldOut) {
		return reconcile.Waiting(platformv1alpha1.SoldOutReason, fmt.Sprintf(
			"OTC has no capacity for flavor %s in zone %s (node pool SoldOut): set spec.nodeAvailableZone: random to let OTC pick a zone with capacity, or pick another spec.nodeFlavor and/or a lower spec.nodeCount",
			s.flavor, orDefault(kc.Spec.NodeAvailableZone, otc.DefaultNodeAvailabilityZone)), r.PollInterval)
	}
	if ready, reason, msg := mirror(u); !ready {
		return reconcile.Waiting(reason, msg, r.PollInterval)
	}
	reconcile.MarkTrue(kc, platformv1alpha1.NodePoolReadyCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("NodePoolV3 %s (%d × %s) is Synced and Ready", u.GetName(), kc.Spec.NodeCount, s.flavor))
	return nil
}

// composite makes the ManagedCluster XR for a provider other than OTC and waits until Crossplane
// says it is Synced and Ready: its Composition builds network, cluster and workers, and writes
// the kubeconfig into Secret <base>-conn.
func (r *Reconciler) composite(ctx context.Context, s *scope) error {
	kc := s.kc
	s.setPhase(platformv1alpha1.KubernetesClusterPhaseProvisioning)
	o := s.object("cluster")
	p := xr.Params{Name: o.Name, Namespace: o.Namespace, Labels: o.Labels,
		Provider: kc.Spec.ProviderRef.Type, Region: kc.Spec.Region, KubernetesVersion: kc.Spec.Kubernetes.Version,
		AvailableZone: kc.Spec.AvailableZone, NodeAvailableZone: kc.Spec.NodeAvailableZone,
		NodeFlavor: s.flavor, NodeCount: kc.Spec.NodeCount, VPCID: kc.Spec.VpcID, SubnetID: kc.Spec.SubnetID, KeyPair: kc.Spec.KeyPair,
		CredentialsSecretName: s.credentialsSecret, CredentialsKey: providerconfig.CredentialsKey,
		KubeconfigSecretName: s.name("conn")}
	if kc.Spec.NodeDiskSize != nil {
		p.NodeDiskSizeGiB = otc.DiskSizeGiB(*kc.Spec.NodeDiskSize)
	}
	u, err := r.apply(ctx, s, xr.New(p).GetUnstructured())
	if err != nil {
		return err
	}
	if ready, reason, msg := xr.Status(xr.From(u)); !ready {
		return reconcile.Waiting(reason, msg, r.PollInterval)
	}
	reconcile.MarkTrue(kc, platformv1alpha1.ClusterReadyCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("%s %s is Synced and Ready: network, cluster and %d × %s workers built by the %s composition", xr.Kind, u.GetName(), kc.Spec.NodeCount, s.flavor, kc.Spec.ProviderRef.Type))
	return nil
}

// kubeconfig delivers the cluster's kubeconfig: from its connection Secret when that holds one
// (key ConnectionSecretKey), otherwise built from the certificates the ClusterV3 observes (the
// OTC provider publishes no connection details for CCE clusters: see otc.Kubeconfig).
func (r *Reconciler) kubeconfig(ctx context.Context, s *scope) error {
	kc := s.kc
	conn := &corev1.Secret{}
	err := r.Backend.Reader.Get(ctx, client.ObjectKey{Namespace: s.storeNamespace, Name: s.name("conn")}, conn)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	raw := conn.Data[r.ConnectionSecretKey]
	if len(raw) == 0 && !isOTC(kc) {
		return reconcile.Waiting(commonv1alpha1.WaitingReason, fmt.Sprintf("Waiting for the %s composition to write the kubeconfig into Secret %s (key %q)", kc.Spec.ProviderRef.Type, s.name("conn"), r.ConnectionSecretKey), r.PollInterval)
	}
	if len(raw) == 0 {
		cl := &unstructured.Unstructured{}
		cl.SetGroupVersionKind(otc.ClusterGVK)
		if err := r.Backend.Client.Get(ctx, client.ObjectKey{Namespace: s.storeNamespace, Name: s.name("cluster")}, cl); err != nil {
			return err
		}
		built, ok, err := otc.Kubeconfig(cl)
		if err != nil {
			return reconcile.Waiting(commonv1alpha1.WaitingReason, "The cluster's observed certificates cannot make a kubeconfig: "+err.Error(), r.PollInterval)
		}
		if !ok {
			return reconcile.Waiting(commonv1alpha1.WaitingReason, fmt.Sprintf("Waiting for ClusterV3 %s to observe its certificates", cl.GetName()), r.PollInterval)
		}
		raw = built
	}
	name := kc.Name + "-kubeconfig"
	err = syncer.Deliver(ctx, s.ws.Direct(), kc, platformv1alpha1.GroupVersion.WithKind("KubernetesCluster"), name,
		map[string]string{commonv1alpha1.ManagedByLabel: ControllerName}, map[string][]byte{DeliveredKubeconfigKey: raw})
	var conflict *syncer.DeliveryConflictError
	if errors.As(err, &conflict) {
		return reconcile.Stalled(commonv1alpha1.NameConflictReason, conflict.Error())
	}
	if err != nil {
		return err
	}
	kc.Status.KubeconfigSecret = name
	reconcile.MarkTrue(kc, platformv1alpha1.KubeconfigDeliveredCondition, commonv1alpha1.SucceededReason, fmt.Sprintf("Kubeconfig delivered in Secret %s (key %q)", name, DeliveredKubeconfigKey))
	return nil
}

func (s *scope) setPhase(p platformv1alpha1.KubernetesClusterPhase) {
	if s.kc.Status.Phase != platformv1alpha1.KubernetesClusterPhaseReady {
		s.kc.Status.Phase = p
	}
}

// deleteOf deletes this KubernetesCluster's managed resource of kind gvk and waits until it is
// gone, so the next one is deleted only then.
func (r *Reconciler) deleteOf(gvk schema.GroupVersionKind, suffix string, opts ...client.DeleteOption) func(context.Context, *scope) error {
	return func(ctx context.Context, s *scope) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		err := r.Backend.Client.Get(ctx, client.ObjectKey{Namespace: s.storeNamespace, Name: s.name(suffix)}, u)
		switch {
		case apierrors.IsNotFound(err) || meta404(err):
			return nil
		case err != nil:
			return err
		case !workspaces.OwnedBy(u, s.logicalCluster, s.owner):
			return nil
		}
		if u.GetDeletionTimestamp() == nil {
			if err := r.Backend.Client.Delete(ctx, u, opts...); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return reconcile.Waiting(commonv1alpha1.DeletingReason, fmt.Sprintf("Waiting for %s %s to be deleted", gvk.Kind, u.GetName()), r.PollInterval)
	}
}

// meta404 reports an error saying the kind is not served (Crossplane's CRDs absent): nothing of
// it can exist.
func meta404(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no matches for kind")
}

// removeKubeconfig removes the delivered kubeconfig.
func (r *Reconciler) removeKubeconfig(ctx context.Context, s *scope) error {
	return syncer.Undeliver(ctx, s.ws.Direct(), s.kc, s.kc.Name+"-kubeconfig")
}

// logicalClusterOf is the logical cluster of an object read through the export's virtual
// workspace.
func logicalClusterOf(obj client.Object) string {
	return obj.GetAnnotations()["kcp.io/cluster"]
}
