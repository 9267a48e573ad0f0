// Package workspaces maps kcp workspaces (logical clusters) onto the backend cluster: the
// fingerprint of a logical cluster, the names of its backend namespaces and objects, the creation
// of those namespaces with collision refusal, the bootstrap of the platform workspace, the
// workspace terminator and the orphan sweep.
package workspaces

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

const (
	// FingerprintLabel is put on every backend namespace of a workspace.
	FingerprintLabel = "kubeopera.io/workspace-fingerprint"
	// LogicalClusterAnnotation carries the full logical cluster name on every backend namespace.
	LogicalClusterAnnotation = "kubeopera.io/logical-cluster"
	// NamespacePrefix starts every backend namespace name.
	NamespacePrefix = "kcp-"
	// fingerprintLength is the number of hex characters of the fingerprint.
	fingerprintLength = 12
	// providerSeparator separates the provider name from the logical cluster name in the cluster
	// names the multi provider hands to reconcilers ("kubeopera.io#1bg4baqdjkcw9lz4").
	providerSeparator = "#"
)

// Fingerprint returns the first 12 hex characters of sha256(logicalCluster).
func Fingerprint(logicalCluster string) string {
	sum := sha256.Sum256([]byte(logicalCluster))
	return hex.EncodeToString(sum[:])[:fingerprintLength]
}

// LogicalCluster returns the kcp logical cluster name of a multicluster-runtime cluster name,
// stripping the provider prefix the multi provider adds. Both exports' providers therefore map a
// workspace to the same fingerprint.
func LogicalCluster(name multicluster.ClusterName) string {
	s := string(name)
	if i := strings.LastIndex(s, providerSeparator); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Namespace returns the workspace's main backend namespace, kcp-<fp>.
func Namespace(logicalCluster string) string {
	return NamespacePrefix + Fingerprint(logicalCluster)
}

// SuffixedNamespace returns kcp-<fp>-<suffix>, shortened with a hash when longer than a namespace
// name may be.
func SuffixedNamespace(logicalCluster, suffix string) string {
	return ShortName(Namespace(logicalCluster)+"-"+suffix, 63)
}

// VClusterNamespace returns the vCluster host namespace kcp-<fp>-vc-<tenantName>.
func VClusterNamespace(logicalCluster, tenantName string) string {
	return SuffixedNamespace(logicalCluster, "vc-"+tenantName)
}

// ObjectName derives a backend object name from a workspace object's namespace and name:
// <namespace>-<name>, shortened with a hash suffix when longer than max. When the namespace itself
// contains '-', the joined form would be ambiguous ("a-b"+"c" and "a"+"b-c"), so a hash of
// namespace/name is appended. Distinct inputs give distinct names; combined with the per-workspace
// backend namespace they never collide across workspaces.
func ObjectName(namespace, name string, max int) string {
	joined := namespace + "-" + name
	if strings.Contains(namespace, "-") {
		sum := sha256.Sum256([]byte(namespace + "/" + name))
		joined += "-" + hex.EncodeToString(sum[:])[:6]
	}
	return ShortName(joined, max)
}

// ShortName returns s when it fits in max characters, otherwise a prefix of s followed by '-' and
// 10 hex characters of sha256(s), max characters in all, with no trailing '-' or '.' before the
// hash.
func ShortName(s string, max int) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	prefix := strings.TrimRight(s[:max-len(h)-1], "-.")
	return prefix + "-" + h
}
