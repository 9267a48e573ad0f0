package sim

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// What provider-upjet-aws v2.6.0 (github.com/crossplane-contrib/provider-upjet-aws, commit
// 857b535dd0eb9b8242ad9d7c4e54aaa3e4616d60; crossplane-runtime v2, upjet v2) writes on the
// namespaced managed resources the AWS Composition (config/crossplane/composition-aws.yaml)
// composes. File names are relative to that tree unless they name crossplane-runtime v2.2.0.
const (
	// The keys of a ClusterAuth's connection Secret (internal/controller/namespaced/eks/
	// clusterauth/eks.go lines 88-92; crossplane-runtime apis/common/resource.go lines 26, 34,
	// 42).
	ClusterAuthKubeconfigKey = "kubeconfig"
	ClusterAuthEndpointKey   = "endpoint"
	ClusterAuthCAKey         = "clusterCA"

	// awsAccountID is the account the played AWS resources live in.
	awsAccountID = "123456789012"
	// eksClusterActive is the status EKS reports for a running cluster, the one
	// ExternalNameIfClusterActive waits for (apis/namespaced/eks/v1beta1/reference.go line 21).
	eksClusterActive = "ACTIVE"
)

// The namespaced kinds the AWS Composition composes, as the provider's CRDs define them
// (test/fixtures/crossplane/aws).
var (
	AWSRoleGVR                 = schema.GroupVersionResource{Group: "iam.aws.m.upbound.io", Version: "v1beta1", Resource: "roles"}
	AWSRolePolicyAttachmentGVR = schema.GroupVersionResource{Group: "iam.aws.m.upbound.io", Version: "v1beta1", Resource: "rolepolicyattachments"}
	AWSClusterGVR              = schema.GroupVersionResource{Group: "eks.aws.m.upbound.io", Version: "v1beta1", Resource: "clusters"}
	AWSNodeGroupGVR            = schema.GroupVersionResource{Group: "eks.aws.m.upbound.io", Version: "v1beta1", Resource: "nodegroups"}
	AWSClusterAuthGVR          = schema.GroupVersionResource{Group: "eks.aws.m.upbound.io", Version: "v1beta1", Resource: "clusterauths"}
	AWSProviderConfigGVR       = schema.GroupVersionResource{Group: "aws.m.upbound.io", Version: "v1beta1", Resource: "providerconfigs"}
)

// InstallAWSProviderCRDs installs on a backend what installing provider-upjet-aws's family,
// eks and iam packages installs that the AWS Composition needs: the CRDs of its namespaced
// kinds (test/fixtures/crossplane/aws, from the provider's package/crds). root is the
// repository root.
func InstallAWSProviderCRDs(cfg *rest.Config, root string) error {
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join(root, "test", "fixtures", "crossplane", "aws")}})
	return err
}

// awsKind is a managed resource kind AWSProvider plays.
type awsKind struct {
	gvr  schema.GroupVersionResource
	kind string
	// refs are its references, in the order of its generated ResolveReferences
	// (apis/namespaced/{iam,eks}/v1beta1/zz_generated.resolvers.go), those the Composition uses.
	refs []awsRef
	// async: an upjet resource created and deleted by Terraform in the background (UseAsync:
	// config/namespaced/eks/config.go; upjet runs every resource's Terraform asynchronously
	// since v1), ready once AWS reports it done. Not async: ClusterAuth, the provider's own
	// controller (internal/controller/namespaced/eks/clusterauth/controller.go), which creates
	// in one call and whose Delete does nothing (line 214).
	async bool
	// identifierFromProvider: the external name is the Terraform id AWS returns after the
	// create (config/externalname.go line 1557, aws_iam_role_policy_attachment:
	// IdentifierFromProvider); otherwise it is metadata.name from the start (NameAsIdentifier:
	// aws_iam_role line 1552, aws_eks_cluster line 1303; aws_eks_node_group line 1310 takes
	// node_group_name from it), set by the managed reconciler's NameAsExternalName initializer.
	identifierFromProvider bool
}

// awsRef is one reference a generated ResolveReferences resolves.
type awsRef struct {
	// field is the literal field under spec.forProvider (roleArn); its reference and selector
	// are field+"Ref" and field+"Selector".
	field string
	// goName is how the resolver names it in errors (RoleArn).
	goName  string
	to      schema.GroupVersionResource
	extract func(*unstructured.Unstructured) string
}

// awsARN reads status.atProvider.arn (config/namespaced/common/common.go ARNExtractor).
func awsARN(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "arn")
	return s
}

// externalNameIfClusterActive is the external name of an EKS cluster once it is ACTIVE
// (apis/namespaced/eks/v1beta1/reference.go lines 15-26).
func externalNameIfClusterActive(u *unstructured.Unstructured) string {
	if s, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "status"); s != eksClusterActive {
		return ""
	}
	return externalName(u)
}

// awsKinds are the kinds played, in the order Run reconciles them.
var awsKinds = []awsKind{
	{gvr: AWSRoleGVR, kind: "Role", async: true},
	// config/namespaced/iam/config.go lines 49-57: role -> aws_iam_role (its external name).
	{gvr: AWSRolePolicyAttachmentGVR, kind: "RolePolicyAttachment", async: true, identifierFromProvider: true,
		refs: []awsRef{{"role", "Role", AWSRoleGVR, externalName}}},
	// config/namespaced/eks/config.go lines 15-33: role_arn -> aws_iam_role, ARNExtractor.
	{gvr: AWSClusterGVR, kind: "Cluster", async: true,
		refs: []awsRef{{"roleArn", "RoleArn", AWSRoleGVR, awsARN}}},
	// lines 34-44: cluster_name -> aws_eks_cluster, ExternalNameIfClusterActive(); node_role_arn
	// -> aws_iam_role, ARNExtractor.
	{gvr: AWSNodeGroupGVR, kind: "NodeGroup", async: true,
		refs: []awsRef{{"clusterName", "ClusterName", AWSClusterGVR, externalNameIfClusterActive}, {"nodeRoleArn", "NodeRoleArn", AWSRoleGVR, awsARN}}},
	// zz_generated.resolvers.go lines 451-480: clusterName -> Cluster, ExternalNameIfClusterActive().
	{gvr: AWSClusterAuthGVR, kind: "ClusterAuth",
		refs: []awsRef{{"clusterName", "ClusterName", AWSClusterGVR, externalNameIfClusterActive}}},
}

// AWSProvider plays provider-upjet-aws v2.6.0 (the managed reconciler of crossplane-runtime v2.2.0
// with upjet's and the provider's external clients) and the AWS API behind it, for the namespaced
// kinds the AWS Composition composes: iam Role and RolePolicyAttachment, eks Cluster, NodeGroup
// and ClusterAuth (awsKinds), in every namespace. Crossplane composes them (StartCrossplane);
// only what the provider does to them, which no process here can do, is played, as its source
// does it:
//
//   - References first, never while deleting (crossplane-runtime pkg/reference/
//     namespaced_reference.go Resolve, lines 173-214): a literal field already set is left
//     alone; a set ...Ref is read; else the ...Selector lists the kind in the namespace by its
//     matchLabels and, with matchControllerRef, keeps only objects controlled by the same
//     controller (the XR), taking the first. The value is extracted as the provider's
//     configuration says (awsKinds): an external name, status.atProvider.arn, or an EKS cluster's
//     external name only once it is ACTIVE. The value and the reference ({name, namespace}) are
//     written back with a server-side apply by managed.crossplane.io/api-simple-reference-resolver
//     (pkg/reconciler/managed/api.go lines 236-262). While one does not resolve: Synced False,
//     ReconcileError, "cannot resolve references: mg.Spec.ForProvider.ClusterName: referenced
//     field was empty (referenced resource may not yet be ready)" (or "...: no resources matched
//     selector"), and nothing else happens.
//   - Then the finalizer finalizer.managedresource.crossplane.io, the external name
//     (NameAsIdentifier kinds: metadata.name), and the create: Synced True ReconcileSuccess,
//     Ready False Creating. After ReadyAfter AWS reports the resource done: status.atProvider
//     (id and arn, and for a Cluster status ACTIVE, endpoint
//     https://<32 hex>.gr7.<region>.eks.amazonaws.com, version, certificateAuthority[0].data; for
//     a NodeGroup status ACTIVE and clusterName), the RolePolicyAttachment's external name
//     <role>-<26 digits> (its Terraform id), Ready True Available and upjet's LastAsyncOperation
//     True Success. Conditions carry observedGeneration.
//   - ClusterAuth (clusterauth/controller.go): once its clusterName resolved (the cluster is
//     ACTIVE) the managed reconciler publishes the connection Secret
//     spec.writeConnectionSecretToRef.name in the namespace, empty at first (crossplane-runtime
//     reconciler.go line 1258; resource.LocalConnectionSecretFor: type
//     connection.crossplane.io/v1alpha1, controller reference to the ClusterAuth with
//     blockOwnerDeletion), then Create describes the cluster and writes the details
//     GetConnectionDetails builds (eks.go lines 37-99): endpoint, clusterCA (the cluster's CA,
//     PEM) and kubeconfig (one cluster, context and user named after the EKS cluster, the
//     server its endpoint, the user's token "k8s-aws-v1." + base64url of a presigned STS
//     GetCallerIdentity URL; here the URL is not signed), with status.atProvider.lastRefreshTime
//     and Ready True Available. The token is not refreshed every refreshPeriod.
//   - Deletion (reconciler.go lines 1165-1240): nothing while other finalizers remain (e.g. the
//     garbage collector's foregroundDeletion); then Ready False Deleting and, for async kinds,
//     DeleteAfter for AWS to delete; then the finalizer goes and "Kind/namespace/name" is
//     appended to Deleted. The connection Secret is left to the garbage collector
//     (unpublishing a local Secret does nothing).
//
// What is not played: the aws.m.upbound.io ProviderConfig's controller (its in-use finalizer
// and ProviderConfigUsages: nothing here waits on a ProviderConfig's users), credentials (the
// ProviderConfig's Secret is never read), drift, updates of external resources after the
// create, late initialization of spec fields, token refresh, AWS's dependency errors (an EKS
// cluster with node groups cannot be deleted: here each resource goes after ReadyAfter), and
// every other kind.
type AWSProvider struct {
	// Backend is the cluster holding the managed resources.
	Backend *rest.Config
	// ReadyAfter is how long AWS takes to create a resource; zero means
	// DefaultCrossplaneReadyAfter, negative means at once.
	ReadyAfter time.Duration
	// DeleteAfter is how long AWS takes to delete one; zero means ReadyAfter.
	DeleteAfter time.Duration
	// Interval is how often everything is reconciled; zero means 300ms.
	Interval time.Duration

	mu       sync.Mutex
	external map[types.UID]*awsResource
	deleted  []string
}

// awsResource is what the played AWS holds for one managed resource.
type awsResource struct {
	createdAt  time.Time
	deletingAt time.Time
	// id is the Terraform id of an identifierFromProvider kind.
	id string
	// caPEM is an EKS cluster's certificate authority.
	caPEM []byte
}

// Deleted lists the managed resources whose deletion finished, as "Kind/namespace/name", in the
// order their finalizers were removed.
func (p *AWSProvider) Deleted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.deleted)
}

func (p *AWSProvider) delay() time.Duration {
	switch {
	case p.ReadyAfter == 0:
		return DefaultCrossplaneReadyAfter
	case p.ReadyAfter < 0:
		return 0
	}
	return p.ReadyAfter
}

func (p *AWSProvider) deleteDelay() time.Duration {
	if p.DeleteAfter == 0 {
		return p.delay()
	}
	return max(p.DeleteAfter, 0)
}

// Run reconciles every managed resource every Interval until ctx ends; it returns nil then.
// Errors of one pass (conflicts, mostly) are retried in the next.
func (p *AWSProvider) Run(ctx context.Context) error {
	return runProviderLoop(ctx, p.Backend, p.Interval, awsKinds, func(k awsKind) schema.GroupVersionResource { return k.gvr }, p.reconcile)
}

// state returns the played AWS resource of mr, nil when none was created.
func (p *AWSProvider) state(mr *unstructured.Unstructured) *awsResource {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.external[mr.GetUID()]
}

func (p *AWSProvider) reconcile(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, k awsKind, mr *unstructured.Unstructured) error {
	client := dyn.Resource(k.gvr).Namespace(mr.GetNamespace())
	if mr.GetDeletionTimestamp() != nil {
		return p.reconcileDelete(ctx, client, k, mr)
	}
	resolved, err := p.resolve(ctx, dyn, k, mr)
	if err != nil {
		return p.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, "cannot resolve references: "+err.Error()))
	}
	if len(resolved) > 0 {
		if mr, err = applyForProvider(ctx, client, mr, resolved); err != nil {
			return err
		}
	}
	if k.kind == "ClusterAuth" {
		if err := publishConnection(ctx, cs, mr); err != nil {
			return p.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, err.Error()))
		}
	}

	ext := p.state(mr)
	if ext == nil && conditionIs(mr, CrossplaneTypeReady, true) {
		// Created before this actor started: AWS has it, as status.atProvider says.
		ext = &awsResource{}
		ext.id, _, _ = unstructured.NestedString(mr.Object, "status", "atProvider", "id")
		if cas, _, _ := unstructured.NestedSlice(mr.Object, "status", "atProvider", "certificateAuthority"); len(cas) > 0 {
			data, _, _ := unstructured.NestedString(cas[0].(map[string]any), "data")
			ext.caPEM, _ = base64.StdEncoding.DecodeString(data)
		}
		p.remember(mr, ext)
	}
	// Finalizer and external name (NameAsExternalName), in one update.
	fins, ann := mr.GetFinalizers(), mr.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	changed := false
	if !slices.Contains(fins, CrossplaneFinalizer) {
		mr.SetFinalizers(append(fins, CrossplaneFinalizer))
		changed = true
	}
	if !k.identifierFromProvider && ann[CrossplaneExternalNameAnnotation] == "" {
		ann[CrossplaneExternalNameAnnotation] = mr.GetName()
		changed = true
	}
	if ext == nil {
		now := time.Now()
		ann[CrossplaneExternalCreatePendingAnnotation] = now.Format(time.RFC3339)
		ann[CrossplaneExternalCreateSucceededAnnotation] = now.Format(time.RFC3339)
		changed = true
	}
	if changed {
		mr.SetAnnotations(ann)
		if mr, err = client.Update(ctx, mr, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	synced := condition(CrossplaneTypeSynced, true, CrossplaneReasonReconcileSuccess, "")
	if ext == nil {
		ext = &awsResource{createdAt: time.Now()}
		if k.kind == "Cluster" {
			if ext.caPEM, err = eksClusterCA(); err != nil {
				return err
			}
		}
		p.remember(mr, ext)
	}

	if k.kind == "ClusterAuth" {
		return p.clusterAuth(ctx, dyn, cs, client, mr, synced)
	}
	if k.async && time.Since(ext.createdAt) < p.delay() {
		return p.writeStatus(ctx, client, mr, nil, synced, condition(CrossplaneTypeReady, false, CrossplaneReasonCreating, ""))
	}
	if k.identifierFromProvider && externalName(mr) == "" {
		// Terraform's resource.PrefixedUniqueId("<role>-"): the role and a 26-digit suffix.
		role, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", "role")
		sum := sha256.Sum256([]byte(mr.GetUID()))
		ext.id = fmt.Sprintf("%s-%s", role, new(big.Int).SetBytes(sum[:11]).Text(10))
		ann := mr.GetAnnotations()
		ann[CrossplaneExternalNameAnnotation] = ext.id
		mr.SetAnnotations(ann)
		if mr, err = client.Update(ctx, mr, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return p.writeStatus(ctx, client, mr, p.atProvider(k, mr, ext), synced, condition(CrossplaneTypeReady, true, CrossplaneReasonAvailable, ""),
		condition(CrossplaneTypeLastAsyncOperation, true, CrossplaneReasonAsyncSuccess, ""))
}

func (p *AWSProvider) remember(mr *unstructured.Unstructured, ext *awsResource) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.external == nil {
		p.external = map[types.UID]*awsResource{}
	}
	p.external[mr.GetUID()] = ext
}

// atProvider is status.atProvider as upjet maps the Terraform state after the create.
func (p *AWSProvider) atProvider(k awsKind, mr *unstructured.Unstructured, ext *awsResource) map[string]any {
	name := externalName(mr)
	region, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", "region")
	sum := sha256.Sum256([]byte(mr.GetUID()))
	obs := map[string]any{"id": name}
	switch k.kind {
	case "Role":
		obs["arn"] = fmt.Sprintf("arn:aws:iam::%s:role/%s", awsAccountID, name)
		obs["uniqueId"] = "AROA" + strings.ToUpper(hex.EncodeToString(sum[:8]))
	case "RolePolicyAttachment":
		obs["id"] = ext.id
		for _, f := range []string{"role", "policyArn"} {
			if v, ok, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", f); ok {
				obs[f] = v
			}
		}
	case "Cluster":
		version, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", "version")
		obs["arn"] = fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", region, awsAccountID, name)
		obs["endpoint"] = fmt.Sprintf("https://%s.gr7.%s.eks.amazonaws.com", strings.ToUpper(hex.EncodeToString(sum[:16])), region)
		obs["status"] = eksClusterActive
		obs["version"] = version
		obs["certificateAuthority"] = []any{map[string]any{"data": base64.StdEncoding.EncodeToString(ext.caPEM)}}
	case "NodeGroup":
		cluster, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", "clusterName")
		obs["id"] = cluster + ":" + name
		obs["arn"] = fmt.Sprintf("arn:aws:eks:%s:%s:nodegroup/%s/%s/%x-%x-%x-%x-%x", region, awsAccountID, cluster, name, sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
		obs["clusterName"] = cluster
		obs["status"] = eksClusterActive
	}
	return obs
}

// clusterAuth plays the ClusterAuth's external client: Create describes the cluster and returns
// the connection details, which the managed reconciler publishes (clusterauth/controller.go
// lines 137-176).
func (p *AWSProvider) clusterAuth(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, client dynamic.ResourceInterface, mr *unstructured.Unstructured, synced map[string]any) error {
	if conditionIs(mr, CrossplaneTypeReady, true) {
		return nil // Observe: up to date until refreshPeriod passed (not played)
	}
	clusterName, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", "clusterName")
	cluster, err := findCluster(ctx, dyn, mr.GetNamespace(), clusterName)
	if err != nil {
		return p.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, "cannot create external resource: cannot describe cluster: "+err.Error()))
	}
	ext := p.state(cluster)
	endpoint, _, _ := unstructured.NestedString(cluster.Object, "status", "atProvider", "endpoint")
	if ext == nil || endpoint == "" {
		return p.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, "cannot create external resource: ca data from the retrieved cluster is empty"))
	}
	region, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", "region")
	kc, err := eksKubeconfig(clusterName, endpoint, region, ext.caPEM)
	if err != nil {
		return err
	}
	name, _, _ := unstructured.NestedString(mr.Object, "spec", "writeConnectionSecretToRef", "name")
	if name != "" {
		secrets := cs.CoreV1().Secrets(mr.GetNamespace())
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data = map[string][]byte{ClusterAuthKubeconfigKey: kc, ClusterAuthEndpointKey: []byte(endpoint), ClusterAuthCAKey: ext.caPEM}
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("cannot publish connection details: %w", err)
		}
	}
	obs := map[string]any{"lastRefreshTime": time.Now().UTC().Format(time.RFC3339)}
	return p.writeStatus(ctx, client, mr, obs, synced, condition(CrossplaneTypeReady, true, CrossplaneReasonAvailable, ""))
}

// findCluster is DescribeCluster: the Cluster of the namespace whose external name is name.
func findCluster(ctx context.Context, dyn dynamic.Interface, namespace, name string) (*unstructured.Unstructured, error) {
	list, err := dyn.Resource(AWSClusterGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if externalName(&list.Items[i]) == name {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("ResourceNotFoundException: No cluster found for name: %s.", name)
}

func (p *AWSProvider) reconcileDelete(ctx context.Context, client dynamic.ResourceInterface, k awsKind, mr *unstructured.Unstructured) error {
	fins := mr.GetFinalizers()
	if !slices.Contains(fins, CrossplaneFinalizer) || len(fins) > 1 {
		return nil
	}
	ext := p.state(mr)
	if ext != nil && k.async {
		p.mu.Lock()
		if ext.deletingAt.IsZero() {
			ext.deletingAt = time.Now()
		}
		since := time.Since(ext.deletingAt)
		p.mu.Unlock()
		if since < p.deleteDelay() {
			return p.writeStatus(ctx, client, mr, nil, condition(CrossplaneTypeReady, false, CrossplaneReasonDeleting, ""),
				condition(CrossplaneTypeSynced, true, CrossplaneReasonReconcileSuccess, ""))
		}
	}
	mr.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool { return f == CrossplaneFinalizer }))
	if _, err := client.Update(ctx, mr, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.external, mr.GetUID())
	p.deleted = append(p.deleted, fmt.Sprintf("%s/%s/%s", k.kind, mr.GetNamespace(), mr.GetName()))
	return nil
}

// resolve plays the kind's generated ResolveReferences on spec.forProvider and returns the
// fields to write back (field -> value, field+"Ref" -> reference), or the first error, named
// like the generated code.
func (p *AWSProvider) resolve(ctx context.Context, dyn dynamic.Interface, k awsKind, mr *unstructured.Unstructured) (map[string]any, error) {
	out := map[string]any{}
	for _, r := range k.refs {
		current, _, _ := unstructured.NestedString(mr.Object, "spec", "forProvider", r.field)
		ref, hasRef, _ := unstructured.NestedMap(mr.Object, "spec", "forProvider", r.field+"Ref")
		sel, hasSel, _ := unstructured.NestedMap(mr.Object, "spec", "forProvider", r.field+"Selector")
		policy, _, _ := unstructured.NestedString(ref, "policy", "resolve")
		if (current != "" && policy != "Always") || (!hasRef && !hasSel) {
			continue // IsNoOp
		}
		wrap := func(err error) error { return fmt.Errorf("mg.Spec.ForProvider.%s: %w", r.goName, err) }
		var to *unstructured.Unstructured
		if hasRef {
			name, _, _ := unstructured.NestedString(ref, "name")
			ns, _, _ := unstructured.NestedString(ref, "namespace")
			if ns == "" {
				ns = mr.GetNamespace()
			}
			u, err := dyn.Resource(r.to).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, wrap(fmt.Errorf("cannot get referenced resource: %w", err))
			}
			to = u
		} else {
			matchLabels, _, _ := unstructured.NestedStringMap(sel, "matchLabels")
			matchController, _, _ := unstructured.NestedBool(sel, "matchControllerRef")
			ns, _, _ := unstructured.NestedString(sel, "namespace")
			if ns == "" {
				ns = mr.GetNamespace()
			}
			list, err := dyn.Resource(r.to).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(matchLabels).String()})
			if err != nil {
				return nil, wrap(fmt.Errorf("cannot list resources that match selector: %w", err))
			}
			for i := range list.Items {
				if matchController && !sameController(mr, &list.Items[i]) {
					continue
				}
				to = &list.Items[i]
				break
			}
			if to == nil {
				return nil, wrap(errors.New("no resources matched selector"))
			}
			out[r.field+"Ref"] = map[string]any{"name": to.GetName(), "namespace": ns}
		}
		v := r.extract(to)
		if v == "" {
			return nil, wrap(errors.New("referenced field was empty (referenced resource may not yet be ready)"))
		}
		if v != current {
			out[r.field] = v
		}
	}
	return out, nil
}

// sameController is crossplane-runtime's meta.HaveSameController: both have a controller
// reference with the same UID.
func sameController(a, b metav1.Object) bool {
	ca, cb := metav1.GetControllerOf(a), metav1.GetControllerOf(b)
	return ca != nil && cb != nil && ca.UID == cb.UID
}

// applyForProvider writes resolved fields back as Crossplane does: a server-side apply of just
// those spec.forProvider fields by the reference resolver's field manager, forcing ownership.
func applyForProvider(ctx context.Context, client dynamic.ResourceInterface, mr *unstructured.Unstructured, fields map[string]any) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(map[string]any{
		"apiVersion": mr.GetAPIVersion(),
		"kind":       mr.GetKind(),
		"metadata":   map[string]any{"name": mr.GetName(), "namespace": mr.GetNamespace()},
		"spec":       map[string]any{"forProvider": fields},
	})
	if err != nil {
		return nil, err
	}
	return client.Patch(ctx, mr.GetName(), types.ApplyPatchType, patch, metav1.PatchOptions{FieldManager: crossplaneRefResolverFieldManager, Force: ptr.To(true)})
}

// writeStatus sets status.atProvider to obs (unless nil) and conds, and writes the status if
// anything changed.
func (p *AWSProvider) writeStatus(ctx context.Context, client dynamic.ResourceInterface, mr *unstructured.Unstructured, obs map[string]any, conds ...map[string]any) error {
	return writeManagedStatus(ctx, client, mr, obs, conds...)
}

// eksClusterCA makes an EKS cluster's certificate authority: a self-signed RSA CA named
// "kubernetes", as EKS's control plane has.
func eksClusterCA() ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// eksKubeconfig is the kubeconfig GetConnectionDetails builds (clusterauth/eks.go lines 54-87).
func eksKubeconfig(cluster, endpoint, region string, caPEM []byte) ([]byte, error) {
	now := time.Now().UTC()
	sig := sha256.Sum256([]byte(cluster + now.String()))
	presigned := fmt.Sprintf("https://sts.%s.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15"+
		"&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLEEXAMPLE%%2F%s%%2F%s%%2Fsts%%2Faws4_request"+
		"&X-Amz-Date=%s&X-Amz-Expires=900&X-Amz-SignedHeaders=host%%3Bx-k8s-aws-id&X-Amz-Signature=%x",
		region, now.Format("20060102"), region, now.Format("20060102T150405Z"), sig)
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{cluster: {Server: endpoint, CertificateAuthorityData: caPEM}},
		Contexts:       map[string]*clientcmdapi.Context{cluster: {Cluster: cluster, AuthInfo: cluster}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{cluster: {Token: "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte(presigned))}},
		CurrentContext: cluster,
	})
}

// AWSProviderForTest runs an AWSProvider on backend, with the given create and delete times,
// until test t ends.
func AWSProviderForTest(t testing.TB, backend *rest.Config, readyAfter, deleteAfter time.Duration) *AWSProvider {
	t.Helper()
	p := &AWSProvider{Backend: backend, ReadyAfter: readyAfter, DeleteAfter: deleteAfter}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the AWS provider actor stopped: %v", err)
		}
	})
	return p
}
