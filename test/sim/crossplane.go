package sim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
)

// What Crossplane core (crossplane-runtime v2.2.0) and provider-opentelekomcloud (commit
// d711db8cf9730d4faf355ec690ede78eeb181969, upjet v2.1.0) write on a managed resource. The
// Terraform resources behind it are cited from terraform-provider-opentelekomcloud at commit
// 88f1cf1e0a9d85b2d9cb94c6722e16358ac3a983 (opentelekomcloud/services/{cce,vpc}/..., the
// latest read; the provider packages release 1.37.1), built on terraform-plugin-sdk v2.
const (
	// CrossplaneFinalizer is the managed-resource finalizer (crossplane-runtime v2.2.0
	// pkg/reconciler/managed/reconciler.go line 46, FinalizerName).
	CrossplaneFinalizer = "finalizer.managedresource.crossplane.io"
	// CrossplaneExternalNameAnnotation holds the external resource's identifier
	// (crossplane-runtime pkg/meta AnnotationKeyExternalName). Every kind played here is
	// config.IdentifierFromProvider in the provider (config/external_name.go lines 48, 50, 244,
	// 249), so upjet writes the OTC id here once the Terraform create returned it.
	CrossplaneExternalNameAnnotation = "crossplane.io/external-name"
	// CrossplaneExternalCreatePendingAnnotation and CrossplaneExternalCreateSucceededAnnotation
	// are written by the managed reconciler around external.Create (pkg/meta, reconciler.go
	// lines 1289-1386).
	CrossplaneExternalCreatePendingAnnotation   = "crossplane.io/external-create-pending"
	CrossplaneExternalCreateSucceededAnnotation = "crossplane.io/external-create-succeeded"
	// CrossplaneConnectionSecretType is the type of connection Secrets
	// (crossplane-runtime pkg/resource SecretTypeConnection).
	CrossplaneConnectionSecretType corev1.SecretType = "connection.crossplane.io/v1alpha1"
	// crossplaneRefResolverFieldManager owns the fields reference resolution writes back
	// (pkg/reconciler/managed/api.go line 42, fieldOwnerAPISimpleRefResolver).
	crossplaneRefResolverFieldManager = "managed.crossplane.io/api-simple-reference-resolver"

	// Condition types and reasons (crossplane-runtime v2.2.0 apis/common/condition.go lines
	// 32-65) and upjet's async one (upjet v2.1.0 pkg/resource/conditions.go lines 18-26).
	CrossplaneTypeReady              = "Ready"
	CrossplaneTypeSynced             = "Synced"
	CrossplaneTypeLastAsyncOperation = "LastAsyncOperation"
	CrossplaneReasonAvailable        = "Available"
	CrossplaneReasonCreating         = "Creating"
	CrossplaneReasonDeleting         = "Deleting"
	CrossplaneReasonReconcileSuccess = "ReconcileSuccess"
	CrossplaneReasonReconcileError   = "ReconcileError"
	CrossplaneReasonAsyncSuccess     = "Success"
	// CrossplaneReasonApplyFailure is LastAsyncOperation's reason when the Terraform CLI's apply
	// failed (upjet pkg/resource/conditions.go lines 21 and 43-50: tferrors.IsApplyFailed).
	CrossplaneReasonApplyFailure = "ApplyFailure"
	// CrossplaneTypeAsyncOperation is upjet's condition of a running asynchronous Terraform
	// operation: False Ongoing while it runs (pkg/controller/external.go lines 224-229), True
	// Finished after (lines 238-240, and the callback, pkg/controller/api.go lines 142-144;
	// pkg/resource/conditions.go lines 94-114).
	CrossplaneTypeAsyncOperation  = "AsyncOperation"
	CrossplaneReasonAsyncOngoing  = "Ongoing"
	CrossplaneReasonAsyncFinished = "Finished"

	// OTCNodePoolSoldOut is the phase CCE reports for a node pool whose flavor has no capacity,
	// which the Terraform resource copies into status (terraform-provider-opentelekomcloud
	// resource_opentelekomcloud_cce_node_pool_v3.go: d.Set("status", s.Status.Phase)); the
	// provider exposes it as status.atProvider.status.
	OTCNodePoolSoldOut = "SoldOut"
	// OTCNodePoolSoldOutCreateError is the error of the Terraform create of a node pool CCE
	// reports SoldOut: the create's wait (Pending [Synchronizing, Synchronized], Target [""],
	// resource_opentelekomcloud_cce_node_pool_v3.go lines 436-446) ends on the phase with
	// terraform-plugin-sdk's UnexpectedStateError (helper/retry/error.go lines 36-50: "unexpected
	// state '%s', wanted target '%s'. last error: %s", the target list joined, the nil last error
	// printed by %s), wrapped by the resource's createError (line 25) through fmterr.Errorf
	// (diag.FromErr: the whole text is the diagnostic's summary, its detail empty).
	OTCNodePoolSoldOutCreateError = "error creating Open Telekom Cloud CCE Node Pool: unexpected state 'SoldOut', wanted target ''. last error: %!s(<nil>)"
	// OTCNodePoolSoldOutApplyFailed is what upjet makes of it: the Terraform CLI's JSON log has
	// the diagnostic at level error (hashicorp/terraform internal/command/views/json_view.go,
	// Diagnostics), which tferrors.NewApplyFailed turns into "apply failed: <summary>: <detail>"
	// (upjet pkg/terraform/errors/errors.go lines 46-70 and 90-97; workspace.go ApplyAsync
	// lines 165-186).
	OTCNodePoolSoldOutApplyFailed = "apply failed: " + OTCNodePoolSoldOutCreateError + ": "
	// DefaultOTCEIPType is the publicip type the Terraform Read reports when the object names none
	// (the provider's example's type, examples-generated/namespaced/vpc/v1alpha1/eipv1.yaml).
	DefaultOTCEIPType = "5_bgp"
	// CrossplaneCreateFailedPrefix is how upjet's async callback wraps a failed create in the
	// Synced condition (pkg/controller/api.go lines 32 and 128-138: xpv1.ReconcileError of
	// errors.Wrap(err, "create failed")).
	CrossplaneCreateFailedPrefix = "create failed: "

	// DefaultCrossplaneReadyAfter is CrossplaneOTC.ReadyAfter when left zero.
	DefaultCrossplaneReadyAfter = time.Second
	// defaultCrossplaneInterval is CrossplaneOTC.Interval when left zero.
	defaultCrossplaneInterval = 300 * time.Millisecond
)

// CrossplaneOTC plays Crossplane core's managed reconciler together with provider-opentelekomcloud
// and the OTC API behind it, on a backend cluster carrying the provider's CRDs, for VpcV1,
// SubnetV1, EIPV1, ClusterV3 and NodePoolV3 in every namespace. There is no Crossplane and no OTC here,
// so Run does what they do to the objects, as their source does it:
//
//   - References are resolved first, never while the object is being deleted
//     (crossplane-runtime v2.2.0 reconciler.go lines 1059-1066; reference.APINamespacedResolver
//     returns early for a deleted object, pkg/reference/namespaced_reference.go line 175), and
//     only when the literal field is empty (or the policy says Always). What they resolve to is
//     the provider's generated resolvers (apis/namespaced/{vpc,cce}/v1alpha1/
//     zz_generated.resolvers.go) configured in config/namespaced/{vpc,cce}/config.go: SubnetV1
//     and ClusterV3 vpcIdRef -> the VpcV1's external name (reference.ExternalName()); ClusterV3
//     subnetIdRef and highwaySubnetIdRef -> the SubnetV1's observed network_id
//     (common.ExtractNetworkID, status.atProvider.networkId); NodePoolV3 clusterIdRef -> the
//     ClusterV3's external name. A resolved value is written back with a server-side apply by
//     the field manager managed.crossplane.io/api-simple-reference-resolver (api.go lines
//     236-262). While one does not resolve: Synced False, reason ReconcileError, message
//     "cannot resolve references: mg.Spec.ForProvider.VPCID: referenced field was empty
//     (referenced resource may not yet be ready)" (or "...: cannot get referenced resource:
//     <not found>"), and nothing else happens: no finalizer, no create.
//   - Then the finalizer finalizer.managedresource.crossplane.io is added and the external
//     resource created: Synced True ReconcileSuccess, Ready False Creating. upjet creates
//     asynchronously and the Terraform resources wait for OTC's target state, so only after
//     ReadyAfter does the object get its external name (the OTC id), status.atProvider (id,
//     status as OTC reports it: VPC "OK", subnet "ACTIVE" with networkId = id and its own
//     subnetId, cluster "Available" with certificateClusters/certificateUsers, node pool ""), Ready
//     True Available and LastAsyncOperation True Success. Conditions carry observedGeneration
//     (conditions.ObservedGenerationPropagationManager, reconciler.go line 875); the managed
//     reconciler does not set status.observedGeneration, so neither does this.
//   - The provider runs the Terraform CLI (tjcontroller.NewConnector with a workspace store,
//     internal/controller/namespaced/cce/nodepoolv3/zz_controller.go; Terraform 1.5.7 and the
//     Terraform provider 1.37.1, Makefile lines 7 and 13-15) and every kind played here is
//     UseAsync (config/namespaced/{vpc,cce}/config.go): while the apply runs, upjet's Observe
//     says AsyncOperation False Ongoing; after it, AsyncOperation True Finished.
//   - A NodePoolV3 for which SoldOut says true (asked when its create ends) is a FAILED CREATE,
//     as the provider leaves it, one step per reconcile:
//     1. upjet's callback (pkg/controller/api.go lines 116-162): LastAsyncOperation False
//     ApplyFailure OTCNodePoolSoldOutApplyFailed, Synced False ReconcileError
//     "create failed: "+that, AsyncOperation True Finished; Ready stays False Creating, no
//     external name, no status.atProvider (the create never returned a state to upjet).
//     2. The pool exists in CCE and Terraform keeps it in its state, tainted (the create set the
//     id, then failed: hashicorp/terraform internal/terraform/node_resource_apply_instance.go,
//     maybeTainted). upjet's next Observe refreshes it (external.go lines 218-263) and, the
//     critical annotations having changed, sets the external name (the OTC id) and returns
//     ResourceLateInitialized (lines 302-309): the managed reconciler updates the object, whose
//     reply resets the status it observed, and writes Synced True ReconcileSuccess
//     (crossplane-runtime reconciler.go lines 1413-1439).
//     3. The next Observe sets status.atProvider from the refreshed state (the Terraform Read
//     sets status to CCE's phase: SoldOut) and, not yet Available, marks it Available (lines
//     311-326): Ready True Available. From then on Plan finds it up to date (terraform plans a
//     tainted object as a synthetic replace, node_resource_abstract_instance.go, which its JSON
//     change summary counts as add and remove, never as change, internal/command/views/
//     operation.go OperationJSON.Plan; upjet reads UpToDate from the change count,
//     workspace.go lines 325-338), so nothing changes again:
//     LastAsyncOperation stays False, and the provider never retries the create. Only
//     deleting the NodePoolV3 (the Terraform destroy deletes the pool) ends it.
//   - EIPV1 is created like the others; after ReadyAfter its status.atProvider is what the
//     Terraform Read sets (resource_opentelekomcloud_vpc_eip_v1.go, resourceVpcEIPV1Read):
//     publicip [{type, ipAddress, portId, name}] and bandwidth [{name, size, shareType,
//     chargeMode}], the address allocated from 203.0.113.0/24 (documentation addresses, never
//     dialed). Binding it to a cluster's API server is CCE's business: portId is not played.
//   - ClusterV3 eipRef resolves to the EIPV1's observed address (common.ExtractEipAddress:
//     publicip[0].ip_address of the observation, config/common/common.go lines 124-149), first
//     of the cluster's references (zz_generated.resolvers.go lines 72-87). A cluster with an
//     eip reports what CCE's certificate API gives for a cluster with an EIP and the Terraform
//     Read copies (resource_opentelekomcloud_cce_cluster_v3.go lines 510-542 and 555-566):
//     atProvider.eip (the external endpoint's host), external https://<eip>:5443, and
//     certificateClusters internalCluster, externalCluster (insecure-skip-tls-verify in CCE's
//     answer, which the provider's schema cannot hold: no CA here) and
//     externalClusterTLSVerify (with the CA) (OTC's CCE API reference, obtaining cluster
//     certificates, Tables 5 and 6; cnrancher/cce-operator createCASecret for the verifying
//     entry's name). CCE does not document their order: internalCluster comes first here. A
//     cluster without an eip has internalCluster only (the provider's acceptance test,
//     resource_opentelekomcloud_cce_cluster_v3_test.go lines 46-49).
//   - ClusterV3 with spec.writeConnectionSecretToRef: the Secret is published on every
//     reconcile once references resolved, even before the create (reconciler.go line 1258),
//     with the connection details upjet derives: the Terraform resource
//     opentelekomcloud_cce_cluster_v3 has no sensitive attribute (config/schema.json; no
//     kube_config_raw) and the provider configures no AdditionalConnectionDetailsFn
//     (config/namespaced/cce/config.go), and GetConnectionDetailsMapping returns nil
//     (zz_clusterv3_terraformed.go line 23), so the Secret has no data at all: type
//     connection.crossplane.io/v1alpha1, controller owner reference to the ClusterV3
//     (resource.LocalConnectionSecretFor, APILocalSecretPublisher, api.go lines 158-187). The
//     credentials are in status.atProvider.certificateClusters / certificateUsers, as the
//     Terraform resource copies them from CCE's certificate API (base64 PEM, cluster
//     "internalCluster" at https://<the master's private IP>:5443, like the API reference's
//     https://192.168.1.7:5443, user "user").
//   - Deletion: once the object has a deletionTimestamp and no finalizer but Crossplane's (with
//     others it waits, reconciler.go lines 1168-1173), the external resource is deleted: Ready
//     False Deleting, Synced True; after ReadyAfter it is gone (deleting a CCE cluster deletes
//     its node pools with it), the finalizer is removed and "Kind/namespace/name" is appended to
//     Deleted. References are not resolved while deleting, so a node pool whose clusterIdRef
//     points at a vanished cluster is deleted all the same; one that never resolved never got
//     the finalizer and goes at once.
//
// ProviderConfig needs nothing: the real provider only tracks its users
// (ProviderConfigUsage), which this actor does not play.
type CrossplaneOTC struct {
	// Backend is the cluster holding the managed resources.
	Backend *rest.Config
	// ReadyAfter is how long OTC takes to create or delete anything; zero means
	// DefaultCrossplaneReadyAfter, negative means at once.
	ReadyAfter time.Duration
	// SoldOut says whether CCE finds no capacity for the node pool namespace/name of flavor in
	// zone (its forProvider.availabilityZone) when its create ends; nil means capacity
	// everywhere.
	SoldOut func(namespace, name, flavor, zone string) bool
	// Interval is how often every object is reconciled; zero means 300ms.
	Interval time.Duration

	mu       sync.Mutex
	external map[types.UID]*otcResource
	// eips counts the elastic IPs allocated, for their addresses.
	eips int
	// gone holds the OTC ids of resources deleted with their CCE cluster.
	gone    map[string]bool
	deleted []string
}

// otcResource is what OTC holds for one managed resource.
type otcResource struct {
	id, secondID string
	// clusterID is a node pool's cluster.
	clusterID  string
	createdAt  time.Time
	deletingAt time.Time
	// ca, cert and key are a ClusterV3's certificates.
	ca, cert, key []byte
	// address is an EIPV1's public address, or a ClusterV3's master's private one.
	address string
	// created is set once the create ended (ReadyAfter after createdAt); failed when it failed
	// (a sold-out node pool), and failedStep is how far the provider got in showing that.
	created, failed bool
	failedStep      int
}

// crossplaneKind is one kind played, in the order Run reconciles them.
type crossplaneKind struct {
	gvk schema.GroupVersionKind
	gvr schema.GroupVersionResource
}

var crossplaneKinds = []crossplaneKind{
	{otc.VPCGVK, otc.VPCGVR},
	{otc.SubnetGVK, otc.SubnetGVR},
	{otc.EIPGVK, otc.EIPGVR},
	{otc.ClusterGVK, otc.ClusterGVR},
	{otc.NodePoolGVK, otc.NodePoolGVR},
}

// crossplaneRef is one reference a generated ResolveReferences resolves, in its order.
type crossplaneRef struct {
	// field is the literal field (vpcId); its reference is field+"Ref".
	field string
	// goPath is how the resolver names it in errors (VPCID).
	goPath string
	to     schema.GroupVersionResource
	// extract reads the value from the referenced object.
	extract func(*unstructured.Unstructured) string
}

func externalName(u *unstructured.Unstructured) string {
	return u.GetAnnotations()[CrossplaneExternalNameAnnotation]
}

// observedEIPAddress is common.ExtractEipAddress: publicip[0].ip_address of the observation (the
// flat ip_address and address it tries next are no EIPV1 fields).
func observedEIPAddress(u *unstructured.Unstructured) string {
	ips, _, _ := unstructured.NestedSlice(u.Object, "status", "atProvider", "publicip")
	if len(ips) == 0 {
		return ""
	}
	m, _ := ips[0].(map[string]any)
	s, _ := m["ipAddress"].(string)
	return s
}

func observedNetworkID(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "networkId")
	return s
}

// crossplaneRefs are the references of each kind that the fixtures' schemas can hold, in the
// order of zz_generated.resolvers.go (forProvider first, then initProvider).
var crossplaneRefs = map[string][]crossplaneRef{
	otc.KindSubnet: {
		{"vpcId", "VPCID", otc.VPCGVR, externalName},
	},
	otc.KindCluster: {
		{"eip", "EIP", otc.EIPGVR, observedEIPAddress},
		{"highwaySubnetId", "HighwaySubnetID", otc.SubnetGVR, observedNetworkID},
		{"subnetId", "SubnetID", otc.SubnetGVR, observedNetworkID},
		{"vpcId", "VPCID", otc.VPCGVR, externalName},
	},
	otc.KindNodePool: {
		{"clusterId", "ClusterID", otc.ClusterGVR, externalName},
	},
}

// Deleted lists the managed resources whose deletion finished, as "Kind/namespace/name", in
// the order their finalizers were removed.
func (a *CrossplaneOTC) Deleted() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.deleted)
}

// Run reconciles every managed resource every Interval until ctx ends; it returns nil then.
// Errors of one pass (conflicts, mostly) are retried in the next.
func (a *CrossplaneOTC) Run(ctx context.Context) error {
	return runProviderLoop(ctx, a.Backend, a.Interval, crossplaneKinds, func(k crossplaneKind) schema.GroupVersionResource { return k.gvr }, a.reconcile)
}

func (a *CrossplaneOTC) delay() time.Duration {
	switch {
	case a.ReadyAfter == 0:
		return DefaultCrossplaneReadyAfter
	case a.ReadyAfter < 0:
		return 0
	}
	return a.ReadyAfter
}

func (a *CrossplaneOTC) reconcile(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, k crossplaneKind, mr *unstructured.Unstructured) error {
	client := dyn.Resource(k.gvr).Namespace(mr.GetNamespace())
	if mr.GetDeletionTimestamp() != nil {
		return a.reconcileDelete(ctx, client, k, mr)
	}

	// Resolve references (never while deleting).
	resolved, err := a.resolve(ctx, dyn, k, mr)
	if err != nil {
		return a.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, "cannot resolve references: "+err.Error()))
	}
	if len(resolved) > 0 {
		if mr, err = a.applyResolved(ctx, client, k, mr, resolved); err != nil {
			return err
		}
	}

	a.mu.Lock()
	ext := a.external[mr.GetUID()]
	if ext == nil && externalName(mr) != "" {
		// Created before this actor started: OTC has it, up and running.
		ext = &otcResource{id: externalName(mr), secondID: string(uuid.NewUUID())}
		a.remember(mr.GetUID(), ext)
	}
	a.mu.Unlock()
	if ext != nil && k.gvk.Kind == otc.KindCluster && ext.ca == nil {
		if ext.ca, ext.cert, ext.key, err = adminCredentials("user"); err != nil {
			return err
		}
	}

	if k.gvk.Kind == otc.KindCluster {
		if err := publishConnection(ctx, cs, mr); err != nil {
			return a.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, err.Error()))
		}
	}

	if !slices.Contains(mr.GetFinalizers(), CrossplaneFinalizer) {
		mr.SetFinalizers(append(mr.GetFinalizers(), CrossplaneFinalizer))
		if mr, err = client.Update(ctx, mr, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}

	if ext == nil {
		// external.Create: upjet starts the Terraform create and returns.
		now := time.Now()
		ext = &otcResource{id: string(uuid.NewUUID()), secondID: string(uuid.NewUUID()), createdAt: now}
		ext.clusterID, _, _ = unstructured.NestedString(mr.Object, "spec", "forProvider", "clusterId")
		if k.gvk.Kind == otc.KindCluster {
			if ext.ca, ext.cert, ext.key, err = adminCredentials("user"); err != nil {
				return err
			}
		}
		ann := mr.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[CrossplaneExternalCreatePendingAnnotation] = now.Format(time.RFC3339)
		ann[CrossplaneExternalCreateSucceededAnnotation] = now.Format(time.RFC3339)
		mr.SetAnnotations(ann)
		if mr, err = client.Update(ctx, mr, metav1.UpdateOptions{}); err != nil {
			return err
		}
		a.mu.Lock()
		a.remember(mr.GetUID(), ext)
		a.mu.Unlock()
	}

	synced := condition(CrossplaneTypeSynced, true, CrossplaneReasonReconcileSuccess, "")
	if !ext.created && time.Since(ext.createdAt) < a.delay() {
		return a.writeStatus(ctx, client, mr, nil, synced, condition(CrossplaneTypeReady, false, CrossplaneReasonCreating, ""),
			condition(CrossplaneTypeAsyncOperation, false, CrossplaneReasonAsyncOngoing, ""))
	}
	if !ext.created {
		// The Terraform create ended; CCE decides now whether the node pool found capacity.
		if k.gvk.Kind == otc.KindNodePool && a.SoldOut != nil {
			flavor, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", "flavor")
			zone, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", "availabilityZone")
			ext.failed = a.SoldOut(mr.GetNamespace(), mr.GetName(), flavor, zone)
		}
		ext.created = true
	}
	if ext.failed {
		return a.showFailedCreate(ctx, client, k, mr, ext)
	}

	// The Terraform create returned: upjet records the id as the external name.
	if externalName(mr) != ext.id {
		if mr, err = setExternalName(ctx, client, mr, ext.id); err != nil {
			return err
		}
	}
	return a.writeStatus(ctx, client, mr, a.atProvider(k.gvk.Kind, mr, ext), synced, condition(CrossplaneTypeReady, true, CrossplaneReasonAvailable, ""),
		condition(CrossplaneTypeLastAsyncOperation, true, CrossplaneReasonAsyncSuccess, ""),
		condition(CrossplaneTypeAsyncOperation, true, CrossplaneReasonAsyncFinished, ""))
}

// showFailedCreate shows a node pool whose Terraform create failed on CCE's SoldOut phase as the
// provider does, one step per reconcile (see CrossplaneOTC): the callback's conditions, then the
// external name of the refreshed (tainted) pool, then its observation and Ready True.
func (a *CrossplaneOTC) showFailedCreate(ctx context.Context, client dynamic.ResourceInterface, k crossplaneKind, mr *unstructured.Unstructured, ext *otcResource) error {
	var err error
	switch ext.failedStep {
	case 0:
		err = a.writeStatus(ctx, client, mr, nil,
			condition(CrossplaneTypeLastAsyncOperation, false, CrossplaneReasonApplyFailure, OTCNodePoolSoldOutApplyFailed),
			condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, CrossplaneCreateFailedPrefix+OTCNodePoolSoldOutApplyFailed),
			condition(CrossplaneTypeAsyncOperation, true, CrossplaneReasonAsyncFinished, ""))
	case 1:
		if mr, err = setExternalName(ctx, client, mr, ext.id); err == nil {
			err = a.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeSynced, true, CrossplaneReasonReconcileSuccess, ""))
		}
	default:
		return a.writeStatus(ctx, client, mr, a.atProvider(k.gvk.Kind, mr, ext),
			condition(CrossplaneTypeSynced, true, CrossplaneReasonReconcileSuccess, ""), condition(CrossplaneTypeReady, true, CrossplaneReasonAvailable, ""))
	}
	if err == nil {
		ext.failedStep++
	}
	return err
}

// setExternalName records id as mr's external name (the managed resource's metadata, written
// with an update as the managed reconciler does).
func setExternalName(ctx context.Context, client dynamic.ResourceInterface, mr *unstructured.Unstructured, id string) (*unstructured.Unstructured, error) {
	ann := mr.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[CrossplaneExternalNameAnnotation] = id
	mr.SetAnnotations(ann)
	return client.Update(ctx, mr, metav1.UpdateOptions{})
}

// remember records ext for uid; a.mu is held.
func (a *CrossplaneOTC) remember(uid types.UID, ext *otcResource) {
	if a.external == nil {
		a.external = map[types.UID]*otcResource{}
	}
	a.external[uid] = ext
}

func (a *CrossplaneOTC) reconcileDelete(ctx context.Context, client dynamic.ResourceInterface, k crossplaneKind, mr *unstructured.Unstructured) error {
	fins := mr.GetFinalizers()
	if !slices.Contains(fins, CrossplaneFinalizer) {
		return nil
	}
	if len(fins) > 1 {
		// Other controllers still hold it: Crossplane keeps the external resource until they let go.
		return nil
	}
	a.mu.Lock()
	ext := a.external[mr.GetUID()]
	if ext == nil && externalName(mr) != "" {
		ext = &otcResource{id: externalName(mr)}
		a.remember(mr.GetUID(), ext)
	}
	if ext != nil && a.gone[ext.id] {
		ext = nil // deleted by OTC with its cluster: Observe finds nothing
	}
	a.mu.Unlock()

	if ext != nil {
		if ext.deletingAt.IsZero() {
			a.mu.Lock()
			ext.deletingAt = time.Now()
			a.mu.Unlock()
		}
		if time.Since(ext.deletingAt) < a.delay() {
			return a.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeReady, false, CrossplaneReasonDeleting, ""),
				condition(CrossplaneTypeSynced, true, CrossplaneReasonReconcileSuccess, ""))
		}
	}
	// The external resource is gone (or never existed): unpublish (a no-op for local
	// Secrets, garbage collection removes them) and remove the finalizer.
	mr.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool { return f == CrossplaneFinalizer }))
	if _, err := client.Update(ctx, mr, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.external, mr.GetUID())
	if ext != nil && k.gvk.Kind == otc.KindCluster {
		// Deleting a CCE cluster deletes its node pools.
		for _, pool := range a.external {
			if pool.clusterID == ext.id {
				if a.gone == nil {
					a.gone = map[string]bool{}
				}
				a.gone[pool.id] = true
			}
		}
	}
	a.deleted = append(a.deleted, fmt.Sprintf("%s/%s/%s", k.gvk.Kind, mr.GetNamespace(), mr.GetName()))
	return nil
}

// resolve plays the generated ResolveReferences: for each reference whose literal is empty (or
// whose policy is Always), read the referenced object in the reference's namespace (default:
// the object's) and extract the value. It returns the values to write back as paths ->
// values, or the first error, named like the generated code.
func (a *CrossplaneOTC) resolve(ctx context.Context, dyn dynamic.Interface, k crossplaneKind, mr *unstructured.Unstructured) (map[string]string, error) {
	out := map[string]string{}
	for _, block := range []struct{ json, goName string }{{"forProvider", "ForProvider"}, {"initProvider", "InitProvider"}} {
		for _, r := range crossplaneRefs[k.gvk.Kind] {
			ref, found, _ := unstructured.NestedMap(mr.Object, "spec", block.json, r.field+"Ref")
			if !found {
				continue
			}
			current, _, _ := unstructured.NestedString(mr.Object, "spec", block.json, r.field)
			resolvePolicy, _, _ := unstructured.NestedString(ref, "policy", "resolve")
			resolution, _, _ := unstructured.NestedString(ref, "policy", "resolution")
			optional := resolution == "Optional"
			if current != "" && resolvePolicy != "Always" {
				continue
			}
			name, _, _ := unstructured.NestedString(ref, "name")
			ns, _, _ := unstructured.NestedString(ref, "namespace")
			if ns == "" {
				ns = mr.GetNamespace()
			}
			wrap := func(err error) error {
				return fmt.Errorf("mg.Spec.%s.%s: %w", block.goName, r.goPath, err)
			}
			to, err := dyn.Resource(r.to).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && optional {
					continue
				}
				return nil, wrap(fmt.Errorf("cannot get referenced resource: %w", err))
			}
			v := r.extract(to)
			if v == "" {
				if optional {
					continue
				}
				return nil, wrap(errors.New("referenced field was empty (referenced resource may not yet be ready)"))
			}
			if v != current {
				out[block.json+"."+r.field] = v
			}
		}
	}
	return out, nil
}

// applyResolved writes resolved values back as Crossplane does: a server-side apply of just
// those fields by the reference resolver's field manager, forcing ownership.
func (a *CrossplaneOTC) applyResolved(ctx context.Context, client dynamic.ResourceInterface, k crossplaneKind, mr *unstructured.Unstructured, resolved map[string]string) (*unstructured.Unstructured, error) {
	spec := map[string]any{}
	for path, v := range resolved {
		var block, field string
		for i := range path {
			if path[i] == '.' {
				block, field = path[:i], path[i+1:]
				break
			}
		}
		b, _ := spec[block].(map[string]any)
		if b == nil {
			b = map[string]any{}
			spec[block] = b
		}
		b[field] = v
	}
	patch, err := json.Marshal(map[string]any{
		"apiVersion": k.gvk.GroupVersion().String(),
		"kind":       k.gvk.Kind,
		"metadata":   map[string]any{"name": mr.GetName(), "namespace": mr.GetNamespace()},
		"spec":       spec,
	})
	if err != nil {
		return nil, err
	}
	return client.Patch(ctx, mr.GetName(), types.ApplyPatchType, patch, metav1.PatchOptions{FieldManager: crossplaneRefResolverFieldManager, Force: ptr.To(true)})
}

// atProvider is status.atProvider as upjet maps the Terraform state after the create (for a node
// pool whose create failed, after the refresh: its status is CCE's phase, SoldOut).
func (a *CrossplaneOTC) atProvider(kind string, mr *unstructured.Unstructured, ext *otcResource) map[string]any {
	fp, _, _ := unstructured.NestedMap(mr.Object, "spec", "forProvider")
	str := func(k string) string { s, _ := fp[k].(string); return s }
	obs := map[string]any{"id": ext.id}
	copyIf := func(keys ...string) {
		for _, k := range keys {
			if v, ok := fp[k]; ok {
				obs[k] = v
			}
		}
	}
	switch kind {
	case otc.KindVPC:
		copyIf("name", "cidr")
		obs["status"] = "OK"
	case otc.KindSubnet:
		copyIf("name", "cidr", "gatewayIp", "vpcId")
		obs["networkId"] = ext.id
		obs["subnetId"] = ext.secondID
		obs["status"] = "ACTIVE"
	case otc.KindEIP:
		a.mu.Lock()
		if ext.address == "" {
			a.eips++
			ext.address = fmt.Sprintf("203.0.113.%d", 10+a.eips%240)
		}
		a.mu.Unlock()
		ipType := DefaultOTCEIPType
		if ips, _ := fp["publicip"].([]any); len(ips) > 0 {
			if m, _ := ips[0].(map[string]any); m["type"] != nil {
				ipType, _ = m["type"].(string)
			}
		}
		obs["publicip"] = []any{map[string]any{"type": ipType, "ipAddress": ext.address, "portId": "", "name": ""}}
		if bws, _ := fp["bandwidth"].([]any); len(bws) > 0 {
			bw, _ := bws[0].(map[string]any)
			obs["bandwidth"] = []any{map[string]any{"name": bw["name"], "size": bw["size"], "shareType": bw["shareType"], "chargeMode": bw["chargeMode"]}}
		}
		copyIf("region")
	case otc.KindCluster:
		copyIf("name", "clusterVersion")
		a.mu.Lock()
		if ext.address == "" {
			ext.address = fmt.Sprintf("192.168.0.%d", 2+int(crc32.ChecksumIEEE([]byte(ext.id))%250))
		}
		a.mu.Unlock()
		internal := fmt.Sprintf("https://%s:5443", ext.address)
		obs["internal"] = internal
		obs["status"] = "Available"
		ca := base64.StdEncoding.EncodeToString(ext.ca)
		certs := []any{map[string]any{"name": "internalCluster", "server": internal, "certificateAuthorityData": ca}}
		if eip := str("eip"); eip != "" {
			external := fmt.Sprintf("https://%s:5443", eip)
			obs["eip"] = eip
			obs["external"] = external
			certs = append(certs,
				map[string]any{"name": "externalCluster", "server": external},
				map[string]any{"name": "externalClusterTLSVerify", "server": external, "certificateAuthorityData": ca})
		}
		obs["certificateClusters"] = certs
		obs["certificateUsers"] = []any{map[string]any{
			"name":                  "user",
			"clientCertificateData": base64.StdEncoding.EncodeToString(ext.cert),
			"clientKeyData":         base64.StdEncoding.EncodeToString(ext.key),
		}}
	case otc.KindNodePool:
		copyIf("name", "clusterId", "flavor", "initialNodeCount")
		obs["status"] = ""
		if ext.failed {
			obs["status"] = OTCNodePoolSoldOut
		}
	}
	return obs
}

// publishConnection writes the ClusterV3's connection Secret as APILocalSecretPublisher does
// with the (empty) connection details upjet reports for opentelekomcloud_cce_cluster_v3.
func publishConnection(ctx context.Context, cs kubernetes.Interface, mr *unstructured.Unstructured) error {
	name, found, _ := unstructured.NestedString(mr.Object, "spec", "writeConnectionSecretToRef", "name")
	if !found || name == "" {
		return nil
	}
	secrets := cs.CoreV1().Secrets(mr.GetNamespace())
	owner := metav1.OwnerReference{
		APIVersion: mr.GetAPIVersion(), Kind: mr.GetKind(), Name: mr.GetName(), UID: mr.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: mr.GetNamespace(), Name: name, OwnerReferences: []metav1.OwnerReference{owner}},
			Type:       CrossplaneConnectionSecretType,
			Data:       map[string][]byte{},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create or update connection secret: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("cannot create or update connection secret: %w", err)
	}
	// ConnectionSecretMustBeControllableBy: a Secret controlled by something else is refused.
	if c := metav1.GetControllerOf(s); c == nil || c.UID != mr.GetUID() {
		return fmt.Errorf("cannot create or update connection secret: existing object is not controlled by UID %q", mr.GetUID())
	}
	return nil // the data is identical (empty): no update
}

// condition builds a crossplane-runtime condition.
func condition(typ string, status bool, reason, message string) map[string]any {
	s := string(metav1.ConditionFalse)
	if status {
		s = string(metav1.ConditionTrue)
	}
	c := map[string]any{"type": typ, "status": s, "reason": reason}
	if message != "" {
		c["message"] = message
	}
	return c
}

func conditionIs(u *unstructured.Unstructured, typ string, status bool) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	want := string(metav1.ConditionFalse)
	if status {
		want = string(metav1.ConditionTrue)
	}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == want
		}
	}
	return false
}

// writeStatus sets status.atProvider to obs (unless nil) and conds as
// ConditionedStatus.SetConditions does (an unchanged condition keeps its lastTransitionTime;
// observedGeneration is the object's generation), and writes the status if anything changed.
func (a *CrossplaneOTC) writeStatus(ctx context.Context, client dynamic.ResourceInterface, mr *unstructured.Unstructured, obs map[string]any, conds ...map[string]any) error {
	return writeManagedStatus(ctx, client, mr, obs, conds...)
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
