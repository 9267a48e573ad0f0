package workspaces

import (
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// ClusterName returns the multicluster-runtime cluster name under which the multi provider serves
// logicalCluster for the named provider (export): "<provider>#<logical cluster>". LogicalCluster
// is its inverse.
func ClusterName(provider, logicalCluster string) multicluster.ClusterName {
	return multicluster.ClusterName(provider + providerSeparator + logicalCluster)
}
