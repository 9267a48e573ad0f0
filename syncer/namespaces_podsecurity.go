package syncer

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubeopera/kubeopera/workspaces"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Pod Security Admission labels (k8s.io/pod-security-admission/api: EnforceLevelLabel and
// the others). The kube-apiserver's PodSecurity admission plugin, on by default since Kubernetes
// 1.25, enforces them on every Pod created in the namespace, whoever creates it.
const (
	PodSecurityEnforceLabel        = "pod-security.kubernetes.io/enforce"
	PodSecurityEnforceVersionLabel = "pod-security.kubernetes.io/enforce-version"
	PodSecurityWarnLabel           = "pod-security.kubernetes.io/warn"
	PodSecurityWarnVersionLabel    = "pod-security.kubernetes.io/warn-version"
	PodSecurityAuditLabel          = "pod-security.kubernetes.io/audit"
	PodSecurityAuditVersionLabel   = "pod-security.kubernetes.io/audit-version"
)

// Pod Security Standards levels.
const (
	// PodSecurityRestricted is the "restricted" level: baseline, and non-root, no privilege
	// escalation, every capability dropped (NET_BIND_SERVICE may be added back), a RuntimeDefault
	// or Localhost seccomp profile, and only configMap, csi, downwardAPI, emptyDir, ephemeral,
	// persistentVolumeClaim, projected and secret volumes.
	PodSecurityRestricted = "restricted"
	// PodSecurityBaseline is the "baseline" level: no privileged containers, no host namespaces
	// (hostNetwork, hostPID, hostIPC), no hostPath volumes, no host ports, no capabilities beyond
	// the runtime's defaults, no unsafe sysctls, no AppArmor, SELinux or /proc mount overrides.
	PodSecurityBaseline = "baseline"
)

// PodSecurityVersion pins the version of the Pod Security Standards the backend namespaces
// enforce, so a backend upgrade never changes what a tenant's Pods must meet without the
// platform choosing it (Kubernetes' advice for namespace labels). It is the Kubernetes version
// the project builds and tests with; a backend older than it evaluates its own newest checks
// (k8s.io/pod-security-admission policy/registry.go: EvaluatePod clamps a newer version to the
// newest it knows).
const PodSecurityVersion = "v1.35"

// vclusterNamespaceInfix follows kcp-<fp> in the names of vCluster host namespaces
// (VClusterNamespace); no other backend namespace of a workspace has it.
const vclusterNamespaceInfix = "-vc-"

// IsVClusterNamespace reports whether backend namespace name of logicalCluster is a vCluster
// host namespace, kcp-<fp>-vc-<tenantName> (VClusterNamespace; a shortened name keeps that
// prefix).
func IsVClusterNamespace(logicalCluster, name string) bool {
	return strings.HasPrefix(name, workspaces.Namespace(logicalCluster)+vclusterNamespaceInfix)
}

// PodSecurityLevel is the Pod Security Standards level backend namespace name of
// logicalCluster enforces.
//
// vCluster host namespaces enforce "baseline". They hold the Pods the vCluster syncer copies from
// the tenant's virtual cluster (the tenant is admin there, so those Pods are the tenant's choice)
// and the chart's own control plane, which "restricted" would refuse: the vCluster 0.21 chart
// (github.com/loft-sh/vcluster v0.21.0, chart/values.yaml controlPlane.statefulSet.security)
// runs the syncer container with containerSecurityContext {allowPrivilegeEscalation: false,
// runAsUser: 0, runAsGroup: 0} and an empty podSecurityContext, and the k3s init container
// (controlPlane.distro.k3s.securityContext) with none, so the StatefulSet's Pod runs as root
// without runAsNonRoot, a seccomp profile or dropped capabilities (templates/statefulset.yaml,
// securityContext of container "syncer"). Baseline admits that Pod, its emptyDir, Secret,
// ConfigMap and PVC volumes included, and refuses what would escape onto the backend's node:
// privileged containers, host namespaces, hostPath volumes, host ports, added capabilities.
//
// Every other namespace (kcp-<fp> and any other kcp-<fp>-<suffix>) holds only the platform's own
// objects and runs no Pods: it enforces "restricted".
func PodSecurityLevel(logicalCluster, name string) string {
	if IsVClusterNamespace(logicalCluster, name) {
		return PodSecurityBaseline
	}
	return PodSecurityRestricted
}

// PodSecurityLabels are the Pod Security Admission labels of backend namespace name of
// logicalCluster: it enforces PodSecurityLevel at PodSecurityVersion, warns at the same level
// (PodSecurity checks only Pods against enforce, but warns whoever creates a StatefulSet,
// Deployment or Job whose Pod template would be refused), and audits against "restricted" so the
// backend's audit log shows what falls short of it.
func PodSecurityLabels(logicalCluster, name string) map[string]string {
	level := PodSecurityLevel(logicalCluster, name)
	return map[string]string{
		PodSecurityEnforceLabel:        level,
		PodSecurityEnforceVersionLabel: PodSecurityVersion,
		PodSecurityWarnLabel:           level,
		PodSecurityWarnVersionLabel:    PodSecurityVersion,
		PodSecurityAuditLabel:          PodSecurityRestricted,
		PodSecurityAuditVersionLabel:   PodSecurityVersion,
	}
}

// ensurePodSecurity gives existing backend namespace ns of logicalCluster its Pod Security labels
// (PodSecurityLabels) when it lacks them, e.g. a namespace created before namespaces carried
// them, or one whose labels were changed. The patch carries ns's resourceVersion, so it applies
// only to the namespace that was checked as this workspace's. ns is updated in place.
func (b Backend) ensurePodSecurity(ctx context.Context, logicalCluster string, ns *corev1.Namespace) error {
	want := PodSecurityLabels(logicalCluster, ns.Name)
	missing := false
	for k, v := range want {
		if ns.Labels[k] != v {
			missing = true
			break
		}
	}
	if !missing {
		return nil
	}
	base := ns.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	for k, v := range want {
		ns.Labels[k] = v
	}
	if err := b.Client.Patch(ctx, ns, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to set the Pod Security labels of backend namespace %s: %w", ns.Name, err)
	}
	return nil
}
