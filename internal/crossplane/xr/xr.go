// Package xr builds the namespaced Crossplane v2 composite resource (XR) the KubernetesCluster
// controller writes for every provider type that has no implementation of its own (everything but
// OTC): a ManagedCluster (infra.kubeopera.io/v1alpha1) of the XRD in config/crossplane, in the
// workspace's backend namespace kcp-<fp>. Crossplane composes it with the Composition labelled
// for the provider (ProviderLabel: the lower-cased provider type), which the platform admin
// installs; a provider type without such a Composition is not supported.
//
// The object is built with crossplane-runtime's unstructured composite (SchemaModern: the
// Crossplane machinery lives under spec.crossplane), so the composition selector and the
// conditions Crossplane writes are read and written the way Crossplane itself does.
package xr

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

const (
	// Group, Version and Kind of the XR (config/crossplane/ defines its XRD).
	Group   = "infra.kubeopera.io"
	Version = "v1alpha1"
	Kind    = "ManagedCluster"
	// ProviderLabel selects the Composition of a provider: its value is the lower-cased provider
	// type, e.g. aws.
	ProviderLabel = "infra.kubeopera.io/provider"
	// KubeconfigKey is the key of the kubeconfig in the Secret the composition writes
	// (spec.kubeconfigSecretName).
	KubeconfigKey = "kubeconfig"
)

var (
	// GVK is the XR's kind.
	GVK = schema.GroupVersionKind{Group: Group, Version: Version, Kind: Kind}
	// CompositionGVK is Crossplane's Composition (apiextensions.crossplane.io/v1).
	CompositionGVK = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "Composition"}
)

// Params is everything the XR carries. Names are the caller's: nothing is invented here.
type Params struct {
	Name      string
	Namespace string
	Labels    map[string]string
	// Provider is the KubernetesCluster's spec.providerRef.type, e.g. AWS.
	Provider          string
	Region            string
	KubernetesVersion string
	AvailableZone     string
	NodeAvailableZone string
	NodeFlavor        string
	NodeCount         int32
	// NodeDiskSizeGiB is left out when zero (the composition's default applies).
	NodeDiskSizeGiB int64
	VPCID           string
	// SubnetIDs are the tenant's subnets (spec.subnetIDs); left out when empty.
	SubnetIDs []string
	KeyPair   string
	// CredentialsSecretName and CredentialsKey name the credentials Secret in Namespace.
	CredentialsSecretName string
	CredentialsKey        string
	// KubeconfigSecretName is the Secret in Namespace the composition writes the kubeconfig into.
	KubeconfigSecretName string
}

// SubnetIDs splits a KubernetesCluster's spec.subnetID (comma-separated subnets) into the XR's
// spec.subnetIDs, in order, without spaces or empty entries.
func SubnetIDs(subnetID string) []string {
	var out []string
	for _, id := range strings.Split(subnetID, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}

// ProviderValue is the ProviderLabel value of a provider type.
func ProviderValue(providerType string) string { return strings.ToLower(providerType) }

// New builds the XR.
func New(p Params) *composite.Unstructured {
	c := composite.New(composite.WithGroupVersionKind(GVK), composite.WithSchema(composite.SchemaModern))
	c.SetName(p.Name)
	c.SetNamespace(p.Namespace)
	c.SetLabels(p.Labels)
	spec := map[string]any{
		"provider":             p.Provider,
		"kubernetesVersion":    p.KubernetesVersion,
		"nodeFlavor":           p.NodeFlavor,
		"nodeCount":            int64(p.NodeCount),
		"credentialsSecretRef": map[string]any{"name": p.CredentialsSecretName, "key": p.CredentialsKey},
		"kubeconfigSecretName": p.KubeconfigSecretName,
	}
	for k, v := range map[string]string{"region": p.Region, "availableZone": p.AvailableZone, "nodeAvailableZone": p.NodeAvailableZone,
		"vpcID": p.VPCID, "keyPair": p.KeyPair} {
		if v != "" {
			spec[k] = v
		}
	}
	if len(p.SubnetIDs) > 0 {
		ids := make([]any, len(p.SubnetIDs))
		for i, id := range p.SubnetIDs {
			ids[i] = id
		}
		spec["subnetIDs"] = ids
	}
	if p.NodeDiskSizeGiB > 0 {
		spec["nodeDiskSizeGiB"] = p.NodeDiskSizeGiB
	}
	c.Object["spec"] = spec
	c.SetCompositionSelector(&metav1.LabelSelector{MatchLabels: map[string]string{ProviderLabel: ProviderValue(p.Provider)}})
	return c
}

// From wraps an XR read from the backend.
func From(u *unstructured.Unstructured) *composite.Unstructured {
	return &composite.Unstructured{Unstructured: *u, Schema: composite.SchemaModern}
}

// Status is what Crossplane says of an XR: whether it is Synced and Ready, and if not, why.
func Status(c *composite.Unstructured) (ready bool, reason, message string) {
	synced := c.GetCondition(xpv2.TypeSynced)
	rd := c.GetCondition(xpv2.TypeReady)
	what := Kind + " " + c.GetName()
	switch {
	case synced.Status == "False":
		return false, orDefault(string(synced.Reason), "NotSynced"), strings.TrimSuffix(what+" is not Synced ("+string(synced.Reason)+"): "+synced.Message, ": ")
	case synced.Status == "True" && rd.Status == "True":
		return true, "", ""
	case c.GetCompositionReference() == nil:
		return false, "Creating", "Waiting for Crossplane to select a Composition for " + what
	case rd.Status == "Unknown" || rd.Status == "":
		return false, "Creating", what + " has no Ready condition yet"
	default:
		return false, orDefault(string(rd.Reason), "Creating"), strings.TrimSuffix(what+" is not Ready ("+string(rd.Reason)+"): "+rd.Message, ": ")
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
