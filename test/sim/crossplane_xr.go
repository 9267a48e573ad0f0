package sim

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
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
)

// What Crossplane core v2.2.0 (github.com/crossplane/crossplane tag v2.2.0, commit
// b7aa9852801ca9959eefdad8233f95635df348c2, which uses crossplane-runtime v2.2.0) writes on
// CompositeResourceDefinitions, the CRDs it generates from them and namespaced composite
// resources, and what provider-upjet-aws v2.6.0 (commit
// 857b535dd0eb9b8242ad9d7c4e54aaa3e4616d60) writes into a ClusterAuth's connection Secret. File
// names below are relative to those trees; "composite/" and "definition/" are
// internal/controller/apiextensions/{composite,definition}/.
const (
	// CrossplaneXRDFinalizer is put on every XRD before its CRD is applied
	// (definition/reconciler.go line 64, added at line 462).
	CrossplaneXRDFinalizer = "defined.apiextensions.crossplane.io"
	// CrossplaneCompositeFinalizer is put on every XR before a Composition is selected
	// (composite/reconciler.go line 59, added at line 606) and removed on deletion (line 587).
	CrossplaneCompositeFinalizer = "composite.apiextensions.crossplane.io"
	// CrossplaneCompositeLabel is set on the XR to its own name (internal/xcrd/schemas.go line 32
	// LabelKeyNamePrefixForComposed; composite/api.go line 461, APINamingConfigurator).
	CrossplaneCompositeLabel = "crossplane.io/composite"
	// CrossplaneCategoryComposite is appended to the generated CRD's categories
	// (internal/xcrd/crd.go lines 42 and 82).
	CrossplaneCategoryComposite = "composite"

	// CrossplaneTypeEstablished and its reasons (apis/apiextensions/v1/conditions.go lines 32,
	// 48, 51): True once the XR's CRD is Established and its controller runs
	// (definition/reconciler.go line 649), False while the XRD is deleted (line 338). An XRD
	// without claimNames (every apiextensions.crossplane.io/v2 XRD) gets no Offered condition:
	// the claim controller only watches XRDs that offer a claim (offered/reconciler.go line 160).
	CrossplaneTypeEstablished            = "Established"
	CrossplaneReasonWatchingComposite    = "WatchingCompositeResource"
	CrossplaneReasonTerminatingComposite = "TerminatingCompositeResource"
	// CrossplaneTypeResponsive is marked True with reason WatchCircuitClosed at the start of
	// every XR reconcile while the watch circuit breaker is closed (conditions.go lines 43, 58,
	// 140-147; composite/reconciler.go line 565).
	CrossplaneTypeResponsive           = "Responsive"
	CrossplaneReasonWatchCircuitClosed = "WatchCircuitClosed"

	// CrossplaneMessageNoComposition is the XR's Synced False ReconcileError message when no
	// Composition matches compositionSelector and the XR's type (errSelectComp,
	// composite/reconciler.go lines 69 and 625, wrapping errNoCompatibleComposition,
	// composite/api.go lines 48 and 283).
	CrossplaneMessageNoComposition = "cannot select Composition: no compatible Compositions found"
	// CrossplaneMessageUnsyncedPrefix and CrossplaneMessageUnreadyPrefix start the XR's Synced
	// False and Ready False (Creating) messages while composed resources are not synced or not
	// ready, followed by their Composition resource names, sorted, three at most ("a, b, and 4
	// more": composite/reconciler.go lines 834-841, crossplane-runtime pkg/resource/resource.go
	// StableNAndSomeMore, DefaultFirstN 3).
	CrossplaneMessageUnsyncedPrefix = "Unsynced resources: "
	CrossplaneMessageUnreadyPrefix  = "Unready resources: "
	// crossplaneMessageFetchComposition prefixes the Synced message when compositionRef names a
	// Composition that does not exist (errFetchComp composite/reconciler.go lines 71 and 665,
	// errGetComposition composite/api.go lines 50 and 175).
	crossplaneMessageFetchComposition = "cannot fetch Composition: cannot get Composition: "

	// The keys of the connection Secret of provider-upjet-aws's ClusterAuth
	// (internal/controller/namespaced/eks/clusterauth/eks.go lines 88-92; crossplane-runtime
	// apis/common/resource.go lines 26, 34, 42).
	ClusterAuthKubeconfigKey = "kubeconfig"
	ClusterAuthEndpointKey   = "endpoint"
	ClusterAuthCAKey         = "clusterCA"

	// crossplanePTInput is the input of function-patch-and-transform v0.10.8, the only
	// function whose input this actor reads (input/v1beta1/resources.go).
	crossplanePTInputAPIVersion = "pt.fn.crossplane.io/v1beta1"
	crossplanePTInputKind       = "Resources"
	// crossplaneXRAccountID is the AWS account the played EKS clusters live in.
	crossplaneXRAccountID = "123456789012"
	// generateNameAlphabet is what the apiserver draws generateName suffixes from
	// (k8s.io/apimachinery pkg/util/rand alphanums); Crossplane v2 names composed resources
	// <XR name>-<5 of these>.
	generateNameAlphabet = "bcdfghjklmnpqrstvwxz2456789"
)

// Crossplane's kinds. Crossplane core reads XRDs as apiextensions.crossplane.io/v1, the storage
// version (its Go type, apis/apiextensions/v1), and so does this actor; v2 is served as well.
var (
	CrossplaneXRDGVR         = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositeresourcedefinitions"}
	CrossplaneCompositionGVR = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositions"}
	crossplaneXRDOwnerGVK    = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositeResourceDefinition"}
)

// CrossplaneXR plays Crossplane v2 core's XRD ("definition") and composite resource
// controllers on a backend carrying Crossplane's CRDs (test/fixtures/crossplane/core), for
// every CompositeResourceDefinition and every XR of it in every namespace, together with what
// the composed resources of a cluster Composition publish. There is no Crossplane, no function
// and no provider here, so Run does what they do to the objects a client can see, as their
// source does it:
//
//   - XRDs: the finalizer defined.apiextensions.crossplane.io, then the XR's CRD generated as
//     internal/xcrd does it (crd.go ForCompositeResource lines 54-106, genCrdVersion lines
//     159-223, schemas.go lines 78-207, 295-345, 349-392): named like the XRD, controlled by it
//     (owner apiextensions.crossplane.io/v1 CompositeResourceDefinition), the XRD's group,
//     names (+ category composite) and scope; one version per XRD version (served as given,
//     storage = referenceable) with the XRD's schema, metadata.name at most 63 characters,
//     spec.crossplane {compositionRef, compositionSelector, compositionRevisionRef,
//     compositionRevisionSelector, compositionUpdatePolicy, resourceRefs} and status.conditions
//     added, the status subresource, and the printer columns SYNCED, READY, COMPOSITION,
//     COMPOSITIONREVISION, AGE after the XRD's. Once the CRD is Established the XRD gets
//     Established True WatchingCompositeResource and status.controllers.compositeResourceType,
//     and its XRs are reconciled. The CRD is rewritten when the XRD's generation changes.
//     Deleting an XRD: Established False TerminatingCompositeResource, every XR deleted (and
//     reconciled until gone), then the CRD, then the finalizer (definition/reconciler.go lines
//     337-459).
//   - XRs (composite/reconciler.go Reconcile, lines 540-870): Responsive True; the finalizer
//     composite.apiextensions.crossplane.io; a Composition selected when
//     spec.crossplane.compositionRef is empty, in Crossplane's order: the XRD's
//     enforcedCompositionRef (always wins), its defaultCompositionRef (only without ref and
//     selector), else the Compositions whose labels match spec.crossplane.compositionSelector
//     (all of them without a selector) and whose spec.compositeTypeRef is the XR's
//     apiVersion/kind, one of them at random (composite/api.go lines 250-291, 307-382). None:
//     Synced False ReconcileError CrossplaneMessageNoComposition, nothing else. A compositionRef
//     to a missing Composition: Synced False ReconcileError "cannot fetch Composition: cannot
//     get Composition: compositions.apiextensions.crossplane.io \"<name>\" not found". Then the
//     label crossplane.io/composite=<XR name>, Synced True ReconcileSuccess and, until
//     ReadyAfter has passed since the Composition was selected, Ready False Creating
//     "Unready resources: ..." naming the Composition's resources (those with a readiness check
//     of type None count as ready, as function-patch-and-transform's ready.go does). Conditions
//     carry observedGeneration (conditions.ObservedGenerationPropagationManager,
//     composite/reconciler.go line 498).
//   - After ReadyAfter the cluster is up. The Composition's function-patch-and-transform
//     resources are read: every resource whose spec.writeConnectionSecretToRef.name is set (in
//     its base, or patched FromCompositeFieldPath from an XR field, string Format transforms
//     applied) publishes a connection Secret of that name in the XR's namespace as
//     provider-upjet-aws's ClusterAuth does: first empty (the managed reconciler publishes once
//     references resolve, crossplane-runtime pkg/reconciler/managed/reconciler.go line 1258),
//     one Interval later with keys kubeconfig, endpoint, clusterCA (line 1386; clusterauth/
//     eks.go lines 63-92: one cluster/context/user named after the EKS cluster, bearer token
//     "k8s-aws-v1." + a base64url presigned STS GetCallerIdentity URL; here the URL is not
//     signed and the token is never refreshed), type connection.crossplane.io/v1alpha1. An
//     existing Secret with data is left as it is. Every ToCompositeFieldPath patch sets its XR
//     status field (string Format transforms applied) to a plausible value of the composed
//     resource's field: ...arn -> arn:aws:<service>:<region>:123456789012:<kind>/<cluster
//     name>, ...endpoint -> https://<32 hex>.gr7.<region>.eks.amazonaws.com (non-AWS:
//     https://<cluster name>.example:6443), ...id -> the cluster name on AWS, a UUID elsewhere.
//     Then Ready True Available. The cluster name is <XR name>-<5 characters>, fixed by the XR's
//     UID, so a restarted actor plays the same cluster.
//   - Fail[namespace/name] = <Composition resource name> makes that composed resource never
//     sync: Synced False ReconcileError CrossplaneMessageUnsyncedPrefix+name, Ready False
//     Creating, no Secret, no status fields, for as long as the entry is there. Set Fail before
//     Run; it is read without a lock.
//   - Deletion: Ready False Deleting; after ReadyAfter the connection Secrets the XR controls
//     are deleted, the finalizer removed and "namespace/name" appended to Deleted. Crossplane
//     itself removes its finalizer in the first reconcile after deletion (composite/
//     reconciler.go lines 582-601); the composed resources, which carry controller references
//     to the XR with blockOwnerDeletion (crossplane-runtime pkg/meta AsController), are deleted
//     by Kubernetes' garbage collector: after the XR is gone (background deletion, the
//     default) or before it (propagationPolicy Foreground, where the XR waits for them). The
//     delay here plays the latter: a client that must know the cloud resources are gone should
//     delete the XR with propagationPolicy Foreground on a real backend.
//
// What is not played, and not pretended: composed resources (spec.crossplane.resourceRefs stays
// empty, no managed resource or ProviderConfig exists), CompositionRevisions
// (compositionRevisionRef stays empty), functions other than function-patch-and-transform and
// every transform but string Format on the two patch kinds read, Usages, events, pausing, and
// XR connection Secrets (v2 XRs have none, internal/xcrd/schemas.go lines 322-324). The Secret
// the composed ClusterAuth would own is controlled by the XR here (controller reference,
// blockOwnerDeletion), the nearest object that exists; in Crossplane it is controlled by the
// ClusterAuth, which the XR controls. Clients must not rely on either.
type CrossplaneXR struct {
	// Backend is the cluster holding Crossplane's CRDs, the XRDs, Compositions and XRs.
	Backend *rest.Config
	// ReadyAfter is how long building or deleting a cluster takes; zero means
	// DefaultCrossplaneReadyAfter, negative means at once.
	ReadyAfter time.Duration
	// Interval is how often everything is reconciled; zero means 300ms.
	Interval time.Duration
	// Fail maps an XR's "namespace/name" to the name of the Composition resource that never
	// syncs; nil means nothing fails.
	Fail map[string]string

	mu sync.Mutex
	// applied is the generation of each XRD whose CRD was last written.
	applied map[types.UID]int64
	xrs     map[types.UID]*xrCluster
	deleted []string
}

// xrCluster is what the played cloud holds for one XR.
type xrCluster struct {
	composedAt time.Time
	deletingAt time.Time
	// name is the EKS cluster's name: <XR name>-<5 characters>.
	name     string
	id       string
	region   string
	endpoint string
	aws      bool
	// secrets are the connection Secrets published.
	secrets []string
}

// xrKind is one XRD's composite resource kind.
type xrKind struct {
	gvr schema.GroupVersionResource
	gvk schema.GroupVersionKind
	// enforced and defaulted are the XRD's enforcedCompositionRef and defaultCompositionRef.
	enforced, defaulted string
}

// xrClients are the clients of one Run.
type xrClients struct {
	dyn dynamic.Interface
	cs  kubernetes.Interface
	ext apiextensionsclient.Interface
}

// Deleted lists the XRs whose deletion finished, as "namespace/name", in the order their
// finalizers were removed.
func (a *CrossplaneXR) Deleted() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.deleted)
}

// Run reconciles every XRD and XR every Interval until ctx ends; it returns nil then. Errors of
// one pass (conflicts, a kind not served yet) are retried in the next.
func (a *CrossplaneXR) Run(ctx context.Context) error {
	cfg := rest.CopyConfig(a.Backend)
	// XRD v1 is deprecated and Crossplane's finalizer names have no path: the apiserver warns.
	cfg.WarningHandler = rest.NoWarnings{}
	var c xrClients
	var err error
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.ext, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return err
	}
	interval := a.Interval
	if interval <= 0 {
		interval = defaultCrossplaneInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		a.pass(ctx, c)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (a *CrossplaneXR) delay() time.Duration {
	switch {
	case a.ReadyAfter == 0:
		return DefaultCrossplaneReadyAfter
	case a.ReadyAfter < 0:
		return 0
	}
	return a.ReadyAfter
}

func (a *CrossplaneXR) pass(ctx context.Context, c xrClients) {
	xrds, err := c.dyn.Resource(CrossplaneXRDGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	var comps []unstructured.Unstructured
	if list, err := c.dyn.Resource(CrossplaneCompositionGVR).List(ctx, metav1.ListOptions{}); err == nil {
		comps = list.Items
	}
	for i := range xrds.Items {
		k, ok := a.reconcileXRD(ctx, c, &xrds.Items[i])
		if !ok {
			continue
		}
		list, err := c.dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue // the kind is not served yet
		}
		for j := range list.Items {
			_ = a.reconcileXR(ctx, c, k, &list.Items[j], comps)
		}
	}
}

// xrdSpec is the part of an XRD's spec this actor reads (apis/apiextensions/v1/xrd_types.go).
type xrdSpec struct {
	Group    string                              `json:"group"`
	Names    extv1.CustomResourceDefinitionNames `json:"names"`
	Scope    string                              `json:"scope"`
	Metadata *struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Conversion                     *extv1.CustomResourceConversion `json:"conversion"`
	DefaultCompositionUpdatePolicy *string                         `json:"defaultCompositionUpdatePolicy"`
	DefaultCompositionRef          *struct {
		Name string `json:"name"`
	} `json:"defaultCompositionRef"`
	EnforcedCompositionRef *struct {
		Name string `json:"name"`
	} `json:"enforcedCompositionRef"`
	Versions []struct {
		Name                     string                                 `json:"name"`
		Served                   bool                                   `json:"served"`
		Referenceable            bool                                   `json:"referenceable"`
		Deprecated               *bool                                  `json:"deprecated"`
		DeprecationWarning       *string                                `json:"deprecationWarning"`
		AdditionalPrinterColumns []extv1.CustomResourceColumnDefinition `json:"additionalPrinterColumns"`
		Schema                   *struct {
			OpenAPIV3Schema *extv1.JSONSchemaProps `json:"openAPIV3Schema"`
		} `json:"schema"`
	} `json:"versions"`
}

func parseXRDSpec(xrd *unstructured.Unstructured) (*xrdSpec, error) {
	raw, err := json.Marshal(xrd.Object["spec"])
	if err != nil {
		return nil, err
	}
	s := &xrdSpec{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("cannot parse CompositeResourceDefinition %s: %w", xrd.GetName(), err)
	}
	if s.Scope == "" {
		s.Scope = "LegacyCluster" // the v1 default; v2 defaults to Namespaced at admission
	}
	return s, nil
}

func (s *xrdSpec) kind() (xrKind, error) {
	k := xrKind{}
	for _, v := range s.Versions {
		if v.Referenceable {
			k.gvr = schema.GroupVersionResource{Group: s.Group, Version: v.Name, Resource: s.Names.Plural}
			k.gvk = schema.GroupVersionKind{Group: s.Group, Version: v.Name, Kind: s.Names.Kind}
		}
	}
	if k.gvr.Version == "" {
		return k, errors.New("no referenceable version")
	}
	if s.EnforcedCompositionRef != nil {
		k.enforced = s.EnforcedCompositionRef.Name
	}
	if s.DefaultCompositionRef != nil {
		k.defaulted = s.DefaultCompositionRef.Name
	}
	return k, nil
}

// renderXRCRD generates the XR's CRD as internal/xcrd ForCompositeResource does.
func renderXRCRD(xrd *unstructured.Unstructured, s *xrdSpec) (*extv1.CustomResourceDefinition, error) {
	crd := &extv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   xrd.GetName(),
			Labels: maps.Clone(xrd.GetLabels()),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: crossplaneXRDOwnerGVK.GroupVersion().String(), Kind: crossplaneXRDOwnerGVK.Kind,
				Name: xrd.GetName(), UID: xrd.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group:      s.Group,
			Names:      s.Names,
			Conversion: s.Conversion,
			Scope:      extv1.ClusterScoped,
		},
	}
	if s.Metadata != nil {
		if len(s.Metadata.Labels) > 0 {
			if crd.Labels == nil {
				crd.Labels = map[string]string{}
			}
			maps.Copy(crd.Labels, s.Metadata.Labels)
		}
		crd.Annotations = s.Metadata.Annotations
	}
	if s.Scope == "Namespaced" {
		crd.Spec.Scope = extv1.NamespaceScoped
	}
	crd.Spec.Names.Categories = append(slices.Clone(crd.Spec.Names.Categories), CrossplaneCategoryComposite)
	const maxNameLength = 63 // the XR's name is a label value (crd.go line 86)
	for _, v := range s.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("version %s has no schema", v.Name)
		}
		xs := v.Schema.OpenAPIV3Schema
		root := xrBaseProps()
		root.Description = xs.Description
		root.XValidations = xs.XValidations
		nameLen := int64(maxNameLength)
		if old := xs.Properties["metadata"].Properties["name"].MaxLength; old != nil && *old < nameLen {
			nameLen = *old
		}
		root.Properties["metadata"] = extv1.JSONSchemaProps{Type: "object", Properties: map[string]extv1.JSONSchemaProps{
			"name": {Type: "string", MaxLength: ptr.To(nameLen)},
		}}

		xSpec, spec := xs.Properties["spec"], root.Properties["spec"]
		spec.Required = append(spec.Required, xSpec.Required...)
		spec.XPreserveUnknownFields = xSpec.XPreserveUnknownFields
		spec.XValidations = append(spec.XValidations, xSpec.XValidations...)
		spec.OneOf = append(spec.OneOf, xSpec.OneOf...)
		spec.Description = xSpec.Description
		maps.Copy(spec.Properties, xSpec.Properties)
		maps.Copy(spec.Properties, xrSpecProps(s.Scope, s.DefaultCompositionUpdatePolicy))
		root.Properties["spec"] = spec

		xStatus, status := xs.Properties["status"], root.Properties["status"]
		status.Required = xStatus.Required
		status.XValidations = xStatus.XValidations
		status.Description = xStatus.Description
		status.OneOf = xStatus.OneOf
		maps.Copy(status.Properties, xStatus.Properties)
		status.Properties["conditions"] = xrConditionsProps()
		root.Properties["status"] = status

		crd.Spec.Versions = append(crd.Spec.Versions, extv1.CustomResourceDefinitionVersion{
			Name:                     v.Name,
			Served:                   v.Served,
			Storage:                  v.Referenceable,
			Deprecated:               ptr.Deref(v.Deprecated, false),
			DeprecationWarning:       v.DeprecationWarning,
			AdditionalPrinterColumns: append(slices.Clone(v.AdditionalPrinterColumns), xrPrinterColumns(s.Scope)...),
			Schema:                   &extv1.CustomResourceValidation{OpenAPIV3Schema: root},
			Subresources:             &extv1.CustomResourceSubresources{Status: &extv1.CustomResourceSubresourceStatus{}},
		})
	}
	return crd, nil
}

// xrBaseProps is the schema every generated CRD starts from (schemas.go lines 48-74).
func xrBaseProps() *extv1.JSONSchemaProps {
	return &extv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"spec"},
		Properties: map[string]extv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec":       {Type: "object", Properties: map[string]extv1.JSONSchemaProps{}},
			"status":     {Type: "object", Properties: map[string]extv1.JSONSchemaProps{}},
		},
	}
}

// xrSpecProps is what Crossplane adds under spec (schemas.go lines 78-207): under
// spec.crossplane for Namespaced and Cluster XRs, directly under spec (with claimRef and
// writeConnectionSecretToRef) for LegacyCluster ones.
func xrSpecProps(scope string, defaultPolicy *string) map[string]extv1.JSONSchemaProps {
	ref := extv1.JSONSchemaProps{Type: "object", Required: []string{"name"}, Properties: map[string]extv1.JSONSchemaProps{"name": {Type: "string"}}}
	selector := extv1.JSONSchemaProps{Type: "object", Required: []string{"matchLabels"}, Properties: map[string]extv1.JSONSchemaProps{
		"matchLabels": {Type: "object", AdditionalProperties: &extv1.JSONSchemaPropsOrBool{Allows: true, Schema: &extv1.JSONSchemaProps{Type: "string"}}},
	}}
	policy := extv1.JSONSchemaProps{Type: "string", Enum: []extv1.JSON{{Raw: []byte(`"Automatic"`)}, {Raw: []byte(`"Manual"`)}}}
	if defaultPolicy != nil {
		policy.Default = &extv1.JSON{Raw: []byte(`"` + *defaultPolicy + `"`)}
	}
	refProps := map[string]extv1.JSONSchemaProps{"apiVersion": {Type: "string"}, "name": {Type: "string"}, "kind": {Type: "string"}}
	if scope != "Namespaced" {
		refProps["namespace"] = extv1.JSONSchemaProps{Type: "string"} // namespaced XRs compose only in their namespace
	}
	props := map[string]extv1.JSONSchemaProps{
		"compositionRef":              ref,
		"compositionSelector":         selector,
		"compositionRevisionRef":      *ref.DeepCopy(),
		"compositionRevisionSelector": *selector.DeepCopy(),
		"compositionUpdatePolicy":     policy,
		"resourceRefs": {
			Type:      "array",
			Items:     &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{Type: "object", Properties: refProps, Required: []string{"apiVersion", "kind"}}},
			XListType: ptr.To("atomic"),
		},
	}
	if scope == "LegacyCluster" {
		props["claimRef"] = extv1.JSONSchemaProps{Type: "object", Required: []string{"apiVersion", "kind", "namespace", "name"}, Properties: map[string]extv1.JSONSchemaProps{
			"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "namespace": {Type: "string"}, "name": {Type: "string"},
		}}
		props["writeConnectionSecretToRef"] = extv1.JSONSchemaProps{Type: "object", Required: []string{"name", "namespace"}, Properties: map[string]extv1.JSONSchemaProps{
			"name": {Type: "string"}, "namespace": {Type: "string"},
		}}
		return props
	}
	return map[string]extv1.JSONSchemaProps{"crossplane": {
		Type: "object", Description: "Configures how Crossplane will reconcile this composite resource", Properties: props,
	}}
}

// xrConditionsProps is status.conditions (schemas.go lines 295-319). The LegacyCluster extras
// (connectionDetails, claimConditionTypes) are not generated: kubeopera's XRD is Namespaced.
func xrConditionsProps() extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{
		Description:  "Conditions of the resource.",
		Type:         "array",
		XListMapKeys: []string{"type"},
		XListType:    ptr.To("map"),
		Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{
			Type:     "object",
			Required: []string{"lastTransitionTime", "reason", "status", "type"},
			Properties: map[string]extv1.JSONSchemaProps{
				"lastTransitionTime": {Type: "string", Format: "date-time"},
				"message":            {Type: "string"},
				"reason":             {Type: "string"},
				"status":             {Type: "string"},
				"type":               {Type: "string"},
				"observedGeneration": {Type: "integer", Format: "int64"},
			},
		}},
	}
}

// xrPrinterColumns are appended to the XRD's own (schemas.go lines 349-392).
func xrPrinterColumns(scope string) []extv1.CustomResourceColumnDefinition {
	prefix := ".spec.crossplane."
	if scope == "LegacyCluster" {
		prefix = ".spec."
	}
	return []extv1.CustomResourceColumnDefinition{
		{Name: "SYNCED", Type: "string", JSONPath: ".status.conditions[?(@.type=='Synced')].status"},
		{Name: "READY", Type: "string", JSONPath: ".status.conditions[?(@.type=='Ready')].status"},
		{Name: "COMPOSITION", Type: "string", JSONPath: prefix + "compositionRef.name"},
		{Name: "COMPOSITIONREVISION", Type: "string", JSONPath: prefix + "compositionRevisionRef.name", Priority: 1},
		{Name: "AGE", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
}

// reconcileXRD plays the definition reconciler; it returns the XR kind once its XRs are to be
// reconciled (the CRD is Established, or the XRD is being deleted and its XRs still exist).
func (a *CrossplaneXR) reconcileXRD(ctx context.Context, c xrClients, xrd *unstructured.Unstructured) (xrKind, bool) {
	s, err := parseXRDSpec(xrd)
	if err != nil {
		return xrKind{}, false
	}
	k, err := s.kind()
	if err != nil {
		return xrKind{}, false
	}
	client := c.dyn.Resource(CrossplaneXRDGVR)
	if xrd.GetDeletionTimestamp() != nil {
		return k, a.deleteXRD(ctx, c, xrd, k) == nil && a.xrdHasXRs(ctx, c, k)
	}
	if !slices.Contains(xrd.GetFinalizers(), CrossplaneXRDFinalizer) {
		xrd.SetFinalizers(append(xrd.GetFinalizers(), CrossplaneXRDFinalizer))
		if xrd, err = client.Update(ctx, xrd, metav1.UpdateOptions{}); err != nil {
			return xrKind{}, false
		}
	}
	want, err := renderXRCRD(xrd, s)
	if err != nil {
		return xrKind{}, false
	}
	crds := c.ext.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if crd, err = crds.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return xrKind{}, false
		}
		a.remember(xrd.GetUID(), xrd.GetGeneration())
	case err != nil:
		return xrKind{}, false
	case !metav1.IsControlledBy(crd, xrd):
		return xrKind{}, false // resource.MustBeControllableBy refuses (definition/reconciler.go line 476)
	case a.appliedGeneration(xrd.GetUID()) != xrd.GetGeneration():
		crd.Labels, crd.Annotations, crd.OwnerReferences, crd.Spec = want.Labels, want.Annotations, want.OwnerReferences, want.Spec
		if crd, err = crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return xrKind{}, false
		}
		a.remember(xrd.GetUID(), xrd.GetGeneration())
	}
	established := false
	for _, cond := range crd.Status.Conditions {
		if cond.Type == extv1.Established {
			established = cond.Status == extv1.ConditionTrue
		}
	}
	if !established {
		return xrKind{}, false
	}
	before, _, _ := unstructured.NestedFieldCopy(xrd.Object, "status")
	_ = unstructured.SetNestedStringMap(xrd.Object, map[string]string{"apiVersion": k.gvk.GroupVersion().String(), "kind": k.gvk.Kind},
		"status", "controllers", "compositeResourceType")
	setCrossplaneConditions(xrd, condition(CrossplaneTypeEstablished, true, CrossplaneReasonWatchingComposite, ""))
	if after, _, _ := unstructured.NestedFieldCopy(xrd.Object, "status"); !equalJSON(before, after) {
		if _, err := client.UpdateStatus(ctx, xrd, metav1.UpdateOptions{}); err != nil {
			return xrKind{}, false
		}
	}
	return k, true
}

func (a *CrossplaneXR) remember(uid types.UID, generation int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.applied == nil {
		a.applied = map[types.UID]int64{}
	}
	a.applied[uid] = generation
}

func (a *CrossplaneXR) appliedGeneration(uid types.UID) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied[uid]
}

func (a *CrossplaneXR) xrdHasXRs(ctx context.Context, c xrClients, k xrKind) bool {
	list, err := c.dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{})
	return err == nil && len(list.Items) > 0
}

// deleteXRD plays the deletion branch of the definition reconciler (lines 337-459).
func (a *CrossplaneXR) deleteXRD(ctx context.Context, c xrClients, xrd *unstructured.Unstructured, k xrKind) error {
	client := c.dyn.Resource(CrossplaneXRDGVR)
	if !slices.Contains(xrd.GetFinalizers(), CrossplaneXRDFinalizer) {
		return nil
	}
	before, _, _ := unstructured.NestedFieldCopy(xrd.Object, "status")
	setCrossplaneConditions(xrd, condition(CrossplaneTypeEstablished, false, CrossplaneReasonTerminatingComposite, ""))
	if after, _, _ := unstructured.NestedFieldCopy(xrd.Object, "status"); !equalJSON(before, after) {
		updated, err := client.UpdateStatus(ctx, xrd, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		xrd = updated
	}
	crds := c.ext.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, xrd.GetName(), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) || !metav1.IsControlledBy(crd, xrd) {
		xrd.SetFinalizers(slices.DeleteFunc(xrd.GetFinalizers(), func(f string) bool { return f == CrossplaneXRDFinalizer }))
		_, err := client.Update(ctx, xrd, metav1.UpdateOptions{})
		if err == nil {
			a.mu.Lock()
			delete(a.applied, xrd.GetUID())
			a.mu.Unlock()
		}
		return err
	}
	list, err := c.dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, xr := range list.Items {
		if xr.GetDeletionTimestamp() == nil {
			_ = c.dyn.Resource(k.gvr).Namespace(xr.GetNamespace()).Delete(ctx, xr.GetName(), metav1.DeleteOptions{})
		}
	}
	if len(list.Items) > 0 {
		return nil // waiting for defined composite resources to be deleted
	}
	return crds.Delete(ctx, crd.Name, metav1.DeleteOptions{})
}

// reconcileXR plays the composite reconciler for one XR.
func (a *CrossplaneXR) reconcileXR(ctx context.Context, c xrClients, k xrKind, xr *unstructured.Unstructured, comps []unstructured.Unstructured) error {
	client := c.dyn.Resource(k.gvr).Namespace(xr.GetNamespace())
	responsive := condition(CrossplaneTypeResponsive, true, CrossplaneReasonWatchCircuitClosed, "")
	if xr.GetDeletionTimestamp() != nil {
		return a.deleteXR(ctx, c, client, xr, comps)
	}
	var err error
	if !slices.Contains(xr.GetFinalizers(), CrossplaneCompositeFinalizer) {
		xr.SetFinalizers(append(xr.GetFinalizers(), CrossplaneCompositeFinalizer))
		if xr, err = client.Update(ctx, xr, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}

	// Select a Composition: enforced, default, then by label (composite/api.go).
	ref, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRef", "name")
	selector, hasSelector, _ := unstructured.NestedStringMap(xr.Object, "spec", "crossplane", "compositionSelector", "matchLabels")
	selected := ""
	switch {
	case k.enforced != "" && ref != k.enforced:
		selected = k.enforced
	case ref != "":
	case !hasSelector && k.defaulted != "":
		selected = k.defaulted
	default:
		apiVersion, kind := k.gvk.ToAPIVersionAndKind()
		sel := labels.SelectorFromSet(selector)
		var candidates []string
		for _, comp := range comps {
			typeRef, _, _ := unstructured.NestedStringMap(comp.Object, "spec", "compositeTypeRef")
			if sel.Matches(labels.Set(comp.GetLabels())) && typeRef["apiVersion"] == apiVersion && typeRef["kind"] == kind {
				candidates = append(candidates, comp.GetName())
			}
		}
		if len(candidates) == 0 {
			return a.writeXRStatus(ctx, client, xr, nil, responsive,
				condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, CrossplaneMessageNoComposition))
		}
		selected = candidates[rand.IntN(len(candidates))] // as Crossplane does: any compatible one
	}
	if selected != "" {
		if err := unstructured.SetNestedField(xr.Object, selected, "spec", "crossplane", "compositionRef", "name"); err != nil {
			return err
		}
		if xr, err = client.Update(ctx, xr, metav1.UpdateOptions{}); err != nil {
			return err
		}
		ref = selected
	}

	// Fetch it.
	var comp *unstructured.Unstructured
	for i := range comps {
		if comps[i].GetName() == ref {
			comp = &comps[i]
		}
	}
	if comp == nil {
		notFound := apierrors.NewNotFound(CrossplaneCompositionGVR.GroupResource(), ref)
		return a.writeXRStatus(ctx, client, xr, nil, responsive,
			condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, crossplaneMessageFetchComposition+notFound.Error()))
	}

	// Configure: the composed resources' name prefix.
	if xr.GetLabels()[CrossplaneCompositeLabel] == "" {
		l := xr.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[CrossplaneCompositeLabel] = xr.GetName()
		xr.SetLabels(l)
		if xr, err = client.Update(ctx, xr, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}

	// Compose (played).
	plan, err := xrPlanOf(comp)
	if err != nil {
		return a.writeXRStatus(ctx, client, xr, nil, responsive,
			condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, "cannot compose resources: "+err.Error()))
	}
	st := a.cluster(xr, plan)
	creating := condition(CrossplaneTypeReady, false, CrossplaneReasonCreating, plan.unreadyMessage())
	if failing := a.Fail[xr.GetNamespace()+"/"+xr.GetName()]; failing != "" {
		return a.writeXRStatus(ctx, client, xr, nil, responsive,
			condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, CrossplaneMessageUnsyncedPrefix+failing), creating)
	}
	synced := condition(CrossplaneTypeSynced, true, CrossplaneReasonReconcileSuccess, "")
	if time.Since(st.composedAt) < a.delay() {
		return a.writeXRStatus(ctx, client, xr, nil, responsive, synced, creating)
	}

	// The cluster is up: the connection Secrets first, then the status patches.
	for _, t := range plan.templates {
		name, err := t.connectionSecretName(xr)
		if err != nil {
			return a.writeXRStatus(ctx, client, xr, nil, responsive,
				condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, "cannot compose resources: "+err.Error()))
		}
		if name == "" {
			continue
		}
		done, err := a.publishKubeconfig(ctx, c.cs, xr, st, name)
		if err != nil {
			// The composed resource cannot publish: it is not synced, so neither is the XR.
			return a.writeXRStatus(ctx, client, xr, nil, responsive,
				condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, CrossplaneMessageUnsyncedPrefix+t.name), creating)
		}
		if !done {
			return a.writeXRStatus(ctx, client, xr, nil, responsive, synced,
				condition(CrossplaneTypeReady, false, CrossplaneReasonCreating, CrossplaneMessageUnreadyPrefix+t.name))
		}
	}
	fields := map[string]string{}
	for _, t := range plan.templates {
		for _, p := range t.patches {
			if p.Type != "ToCompositeFieldPath" || !strings.HasPrefix(p.ToFieldPath, "status.") {
				continue
			}
			v, err := applyFormat(st.observed(t, p.FromFieldPath), p.Transforms)
			if err != nil {
				return a.writeXRStatus(ctx, client, xr, nil, responsive,
					condition(CrossplaneTypeSynced, false, CrossplaneReasonReconcileError, "cannot compose resources: "+err.Error()))
			}
			fields[p.ToFieldPath] = v
		}
	}
	return a.writeXRStatus(ctx, client, xr, fields, responsive, synced, condition(CrossplaneTypeReady, true, CrossplaneReasonAvailable, ""))
}

// cluster returns the played cluster of xr, starting it when the XR is seen composed for the
// first time (at once when it is Ready already: created before this actor started).
func (a *CrossplaneXR) cluster(xr *unstructured.Unstructured, plan *xrPlan) *xrCluster {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := a.xrs[xr.GetUID()]; st != nil {
		return st
	}
	sum := sha256.Sum256([]byte(xr.GetUID()))
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = generateNameAlphabet[int(sum[i])%len(generateNameAlphabet)]
	}
	st := &xrCluster{composedAt: time.Now(), name: xr.GetName() + "-" + string(suffix), aws: plan.aws}
	if conditionIs(xr, CrossplaneTypeReady, true) {
		st.composedAt = time.Time{}
	}
	st.id = fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
	st.region, _, _ = unstructured.NestedString(xr.Object, "spec", "region")
	if st.region == "" {
		st.region = "us-east-1"
	}
	st.endpoint = "https://" + st.name + ".example:6443"
	if st.aws {
		st.endpoint = fmt.Sprintf("https://%s.gr7.%s.eks.amazonaws.com", strings.ToUpper(hex.EncodeToString(sum[16:32])), st.region)
	}
	if a.xrs == nil {
		a.xrs = map[types.UID]*xrCluster{}
	}
	a.xrs[xr.GetUID()] = st
	return st
}

// observed is the value of fromFieldPath on the played composed resource t.
func (st *xrCluster) observed(t xrTemplate, fromFieldPath string) string {
	parts := strings.Split(fromFieldPath, ".")
	leaf := strings.ToLower(parts[len(parts)-1])
	group, _, _ := strings.Cut(t.apiVersion, "/")
	switch {
	case leaf == "arn":
		service, _, _ := strings.Cut(group, ".")
		return fmt.Sprintf("arn:aws:%s:%s:%s:%s/%s", service, st.region, crossplaneXRAccountID, strings.ToLower(t.kind), st.name)
	case leaf == "endpoint":
		return st.endpoint
	case (leaf == "id" || leaf == "clusterid") && !st.aws:
		return st.id
	}
	return st.name
}

// publishKubeconfig writes the connection Secret name as the ClusterAuth would: empty first,
// with the kubeconfig one pass later. It returns whether the kubeconfig is in it.
func (a *CrossplaneXR) publishKubeconfig(ctx context.Context, cs kubernetes.Interface, xr *unstructured.Unstructured, st *xrCluster, name string) (bool, error) {
	secrets := cs.CoreV1().Secrets(xr.GetNamespace())
	a.mu.Lock()
	if !slices.Contains(st.secrets, name) {
		st.secrets = append(st.secrets, name)
	}
	a.mu.Unlock()
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: xr.GetNamespace(), Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: xr.GetAPIVersion(), Kind: xr.GetKind(), Name: xr.GetName(), UID: xr.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}},
			Type: CrossplaneConnectionSecretType,
			Data: map[string][]byte{},
		}, metav1.CreateOptions{})
		return false, err
	}
	if err != nil {
		return false, err
	}
	// resource.ConnectionSecretMustBeControllableBy (crossplane-runtime pkg/resource/resource.go
	// lines 336-356).
	switch c := metav1.GetControllerOf(s); {
	case c == nil && s.Type != CrossplaneConnectionSecretType:
		return false, fmt.Errorf("refusing to modify uncontrolled secret of type %q", s.Type)
	case c != nil && c.UID != xr.GetUID():
		return false, fmt.Errorf("existing secret is not controlled by UID %q", xr.GetUID())
	}
	if len(s.Data[ClusterAuthKubeconfigKey]) > 0 {
		return true, nil
	}
	caPEM, _, _, err := adminCredentials("kubernetes")
	if err != nil {
		return false, err
	}
	kc, err := st.kubeconfig(caPEM)
	if err != nil {
		return false, err
	}
	s.Data = map[string][]byte{ClusterAuthKubeconfigKey: kc, ClusterAuthEndpointKey: []byte(st.endpoint), ClusterAuthCAKey: caPEM}
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	return err == nil, err
}

// kubeconfig is the kubeconfig ClusterAuth builds (clusterauth/eks.go lines 54-87).
func (st *xrCluster) kubeconfig(caPEM []byte) ([]byte, error) {
	now := time.Now().UTC()
	sig := sha256.Sum256([]byte(st.name + now.String()))
	presigned := fmt.Sprintf("https://sts.%s.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15"+
		"&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLEEXAMPLE%%2F%s%%2F%s%%2Fsts%%2Faws4_request"+
		"&X-Amz-Date=%s&X-Amz-Expires=900&X-Amz-SignedHeaders=host%%3Bx-k8s-aws-id&X-Amz-Signature=%x",
		st.region, now.Format("20060102"), st.region, now.Format("20060102T150405Z"), sig)
	return clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{st.name: {Server: st.endpoint, CertificateAuthorityData: caPEM}},
		Contexts:       map[string]*clientcmdapi.Context{st.name: {Cluster: st.name, AuthInfo: st.name}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{st.name: {Token: "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte(presigned))}},
		CurrentContext: st.name,
	})
}

// deleteXR plays the deletion of an XR and its composed resources.
func (a *CrossplaneXR) deleteXR(ctx context.Context, c xrClients, client dynamic.ResourceInterface, xr *unstructured.Unstructured, comps []unstructured.Unstructured) error {
	if !slices.Contains(xr.GetFinalizers(), CrossplaneCompositeFinalizer) {
		return nil
	}
	a.mu.Lock()
	st := a.xrs[xr.GetUID()]
	if st == nil {
		st = &xrCluster{}
		if a.xrs == nil {
			a.xrs = map[types.UID]*xrCluster{}
		}
		a.xrs[xr.GetUID()] = st
	}
	if st.deletingAt.IsZero() {
		st.deletingAt = time.Now()
	}
	names := slices.Clone(st.secrets)
	a.mu.Unlock()
	if time.Since(st.deletingAt) < a.delay() {
		return a.writeXRStatus(ctx, client, xr, nil, condition(CrossplaneTypeResponsive, true, CrossplaneReasonWatchCircuitClosed, ""),
			condition(CrossplaneTypeReady, false, CrossplaneReasonDeleting, ""))
	}

	// The composed resources are gone, and with the ClusterAuth its Secret (garbage collection).
	ref, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRef", "name")
	for i := range comps {
		if comps[i].GetName() != ref {
			continue
		}
		if plan, err := xrPlanOf(&comps[i]); err == nil {
			for _, t := range plan.templates {
				if n, err := t.connectionSecretName(xr); err == nil && n != "" && !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	secrets := c.cs.CoreV1().Secrets(xr.GetNamespace())
	for _, n := range names {
		s, err := secrets.Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if owner := metav1.GetControllerOf(s); owner != nil && owner.UID == xr.GetUID() {
			if err := secrets.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	xr.SetFinalizers(slices.DeleteFunc(xr.GetFinalizers(), func(f string) bool { return f == CrossplaneCompositeFinalizer }))
	if _, err := client.Update(ctx, xr, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.xrs, xr.GetUID())
	a.deleted = append(a.deleted, xr.GetNamespace()+"/"+xr.GetName())
	return nil
}

// setCrossplaneConditions sets conds on u as crossplane-runtime's ConditionedStatus.SetConditions does:
// an equal condition (type, status, reason, message, observedGeneration) keeps its
// lastTransitionTime; observedGeneration is u's generation.
func setCrossplaneConditions(u *unstructured.Unstructured, conds ...map[string]any) {
	existing, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	now := time.Now().UTC().Format(time.RFC3339)
	for _, c := range conds {
		c["observedGeneration"] = u.GetGeneration()
		replaced := false
		for i, e := range existing {
			m, _ := e.(map[string]any)
			if m["type"] != c["type"] {
				continue
			}
			replaced = true
			if m["status"] == c["status"] && m["reason"] == c["reason"] && m["message"] == c["message"] && m["observedGeneration"] == c["observedGeneration"] {
				break
			}
			c["lastTransitionTime"] = now
			existing[i] = c
			break
		}
		if !replaced {
			c["lastTransitionTime"] = now
			existing = append(existing, c)
		}
	}
	_ = unstructured.SetNestedSlice(u.Object, existing, "status", "conditions")
}

// writeXRStatus sets the status fields (dotted paths from the Composition's
// ToCompositeFieldPath patches) and conds, and writes the status if anything changed.
func (a *CrossplaneXR) writeXRStatus(ctx context.Context, client dynamic.ResourceInterface, xr *unstructured.Unstructured, fields map[string]string, conds ...map[string]any) error {
	before, _, _ := unstructured.NestedFieldCopy(xr.Object, "status")
	for path, v := range fields {
		if err := unstructured.SetNestedField(xr.Object, v, strings.Split(path, ".")...); err != nil {
			return err
		}
	}
	setCrossplaneConditions(xr, conds...)
	if after, _, _ := unstructured.NestedFieldCopy(xr.Object, "status"); equalJSON(before, after) {
		return nil
	}
	_, err := client.UpdateStatus(ctx, xr, metav1.UpdateOptions{})
	return err
}

// The function-patch-and-transform input this actor reads (v0.10.8 input/v1beta1).
type ptTransform struct {
	Type   string `json:"type"`
	String *struct {
		Type string  `json:"type"`
		Fmt  *string `json:"fmt"`
	} `json:"string"`
}

type ptPatch struct {
	Type          string        `json:"type"`
	FromFieldPath string        `json:"fromFieldPath"`
	ToFieldPath   string        `json:"toFieldPath"`
	PatchSetName  string        `json:"patchSetName"`
	Transforms    []ptTransform `json:"transforms"`
}

type ptResources struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	PatchSets  []struct {
		Name    string    `json:"name"`
		Patches []ptPatch `json:"patches"`
	} `json:"patchSets"`
	Resources []struct {
		Name            string         `json:"name"`
		Base            map[string]any `json:"base"`
		Patches         []ptPatch      `json:"patches"`
		ReadinessChecks []struct {
			Type string `json:"type"`
		} `json:"readinessChecks"`
	} `json:"resources"`
}

// xrTemplate is one composed resource of a Composition.
type xrTemplate struct {
	name, apiVersion, kind string
	// alwaysReady: its only readiness check is None.
	alwaysReady bool
	// patches, PatchSets expanded.
	patches []ptPatch
	// baseSecretName is spec.writeConnectionSecretToRef.name in the base.
	baseSecretName string
}

// xrPlan is what a Composition composes.
type xrPlan struct {
	templates []xrTemplate
	// aws: it composes provider-upjet-aws resources.
	aws bool
}

// xrPlanOf reads the function-patch-and-transform steps of a Composition.
func xrPlanOf(comp *unstructured.Unstructured) (*xrPlan, error) {
	steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
	plan := &xrPlan{}
	for _, s := range steps {
		step, _ := s.(map[string]any)
		input, _, _ := unstructured.NestedMap(step, "input")
		if input["apiVersion"] != crossplanePTInputAPIVersion || input["kind"] != crossplanePTInputKind {
			continue
		}
		raw, err := json.Marshal(input)
		if err != nil {
			return nil, err
		}
		var in ptResources
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("cannot parse function-patch-and-transform input of Composition %s: %w", comp.GetName(), err)
		}
		sets := map[string][]ptPatch{}
		for _, ps := range in.PatchSets {
			sets[ps.Name] = ps.Patches
		}
		for _, r := range in.Resources {
			base := &unstructured.Unstructured{Object: r.Base}
			t := xrTemplate{name: r.Name, apiVersion: base.GetAPIVersion(), kind: base.GetKind()}
			t.alwaysReady = len(r.ReadinessChecks) > 0 && !slices.ContainsFunc(r.ReadinessChecks, func(c struct {
				Type string `json:"type"`
			}) bool {
				return c.Type != "None"
			})
			t.baseSecretName, _, _ = unstructured.NestedString(r.Base, "spec", "writeConnectionSecretToRef", "name")
			for _, p := range r.Patches {
				if p.Type == "PatchSet" {
					set, ok := sets[p.PatchSetName]
					if !ok {
						return nil, fmt.Errorf("cannot find PatchSet %q", p.PatchSetName)
					}
					t.patches = append(t.patches, set...)
					continue
				}
				t.patches = append(t.patches, p)
			}
			group, _, _ := strings.Cut(t.apiVersion, "/")
			if strings.HasSuffix(group, "aws.m.upbound.io") || strings.HasSuffix(group, "aws.upbound.io") {
				plan.aws = true
			}
			plan.templates = append(plan.templates, t)
		}
	}
	return plan, nil
}

// unreadyMessage is Ready False Creating's message while nothing composed is ready yet.
func (p *xrPlan) unreadyMessage() string {
	var names []string
	for _, t := range p.templates {
		if !t.alwaysReady {
			names = append(names, t.name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	const n = 3 // resource.DefaultFirstN
	switch {
	case len(names) > n:
		return fmt.Sprintf("%s%s, and %d more", CrossplaneMessageUnreadyPrefix, strings.Join(names[:n], ", "), len(names)-n)
	case len(names) == n:
		return fmt.Sprintf("%s%s, and %s", CrossplaneMessageUnreadyPrefix, strings.Join(names[:n-1], ", "), names[n-1])
	}
	return CrossplaneMessageUnreadyPrefix + strings.Join(names, ", ")
}

// connectionSecretName is the spec.writeConnectionSecretToRef.name t ends up with for xr: its
// base's, replaced by every FromCompositeFieldPath patch to it whose XR field is set.
func (t xrTemplate) connectionSecretName(xr *unstructured.Unstructured) (string, error) {
	name := t.baseSecretName
	for _, p := range t.patches {
		if (p.Type != "" && p.Type != "FromCompositeFieldPath") || p.ToFieldPath != "spec.writeConnectionSecretToRef.name" {
			continue
		}
		v, found, err := unstructured.NestedFieldNoCopy(xr.Object, strings.Split(p.FromFieldPath, ".")...)
		if err != nil || !found {
			continue // an optional patch from a missing field is skipped (fn.go lines 219-248)
		}
		s, err := applyFormat(fmt.Sprint(v), p.Transforms)
		if err != nil {
			return "", err
		}
		name = s
	}
	return name, nil
}

// applyFormat applies string Format transforms; the actor plays no other transform.
func applyFormat(v string, transforms []ptTransform) (string, error) {
	for _, tr := range transforms {
		if tr.Type != "string" || tr.String == nil || (tr.String.Type != "" && tr.String.Type != "Format") || tr.String.Fmt == nil {
			return "", fmt.Errorf("the CrossplaneXR test actor plays only string Format transforms on patches to writeConnectionSecretToRef.name and status, not %+v", tr)
		}
		v = fmt.Sprintf(*tr.String.Fmt, v)
	}
	return v, nil
}
