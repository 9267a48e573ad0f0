// Package crossplane is the platform's client of Crossplane on the backend: it applies the
// objects Crossplane acts on (managed resources, composite resources, provider configs) and names
// them. The builders of each provider's objects are in its subpackage (otc, xr).
package crossplane

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/crossplane/otc"
	"github.com/kubeopera/kubeopera/workspaces"
)

const (
	// FieldOwner is the field manager of every backend object the platform applies for
	// Crossplane. It is the name the first release applied with, kept so the objects applied
	// since have one manager and fields dropped from them are pruned.
	FieldOwner = "providerconfig-controller"
	// CredentialsKey is the key of the credentials in a ProviderConfig's backend Secret.
	CredentialsKey = otc.DefaultCredentialsKey
)

// Apply server-side applies u, taking ownership of every field it sets (the platform's objects
// are its own: a conflicting manager is overridden).
func Apply(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// ProviderConfigName is the name of a tenant's ProviderConfig's objects on the backend, in the
// workspace's backend namespace (the provider's ProviderConfig, and with "-credentials" its
// credentials Secret): derived from its namespace and name, never colliding within that namespace.
func ProviderConfigName(namespace, name string) string {
	return "pc-" + workspaces.ObjectName(namespace, name, 40)
}

// CredentialsSecretName is the backend Secret a tenant's ProviderConfig's credentials are copied
// into, under key CredentialsKey.
func CredentialsSecretName(namespace, name string) string {
	return ProviderConfigName(namespace, name) + "-credentials"
}

// ClusterName is the base name of a KubernetesCluster's objects on the backend (its network,
// cluster, node pool, composite resource and connection Secret add a suffix).
func ClusterName(namespace, name string) string {
	return "kc-" + workspaces.ObjectName(namespace, name, 40)
}
