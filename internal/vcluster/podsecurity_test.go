package vcluster

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/helm"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestHostNamespaceRefusesEscapingPods plays a tenant who is admin of their vCluster. The vCluster
// syncer copies the tenant's Pods into the host namespace on the backend as its own ServiceAccount
// vc-<release>, so the tenant chooses what that identity asks the backend for. On a real backend
// (kube-apiserver with its default admission plugins, PodSecurity among them; envtest starts it
// with --allow-privileged=true, so nothing else refuses a privileged Pod) and with the manager's
// shipped identity (config/rbac), the host namespace is made by the manager's own namespace code
// and the vCluster release installed with the manager's values, which creates the ServiceAccount
// and exactly the Role the chart grants it (vCluster's own chart 0.21.0, templates/role.yaml, as the 0.21
// chart renders it). Acting as that ServiceAccount (impersonated), a privileged Pod and the
// hostPID, hostNetwork, hostPath and added-capability variants are refused by Pod Security, while
// a baseline Pod created the same way is admitted: the refusals are PodSecurity's, not RBAC's.
// The chart's own control-plane Pod is admitted there and would be refused by "restricted", which
// is why host namespaces enforce baseline. A host namespace made before namespaces carried the
// labels admits a privileged Pod until the manager ensures it, then refuses it.
func TestHostNamespaceRefusesEscapingPods(t *testing.T) {
	ctx := t.Context()
	m := framework.StartBackendAsManager(t)
	b, id, admin, mgr := m.Backend, m.Identity, m.Admin, m.Manager
	backend := syncer.Backend{Client: mgr, Reader: mgr}
	hc, err := helm.New(id.Config, helm.Options{ChartRef: framework.VClusterChart(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const lc = "1bg4baqdjkcw9lz4"
	store := workspaces.Namespace(lc)

	// install makes tenantName's backend namespaces and installs its vCluster as the Tenant
	// controller does (backendNamespaces and release steps), and returns the host namespace, the
	// release and a client acting as the release's syncer ServiceAccount.
	install := func(t *testing.T, tenantName string) (string, string, client.Client) {
		t.Helper()
		tn := &kov1alpha1.Tenant{Spec: kov1alpha1.TenantSpec{
			TenantName: tenantName, CloudSpaceID: "c-" + tenantName,
			Quota: kov1alpha1.TenantQuota{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")},
		}}
		host, release := workspaces.VClusterNamespace(lc, tenantName), "vc-"+tenantName
		owner := "Tenant default/" + tenantName
		if err := backend.EnsureNamespaces(ctx, lc, syncer.NamespaceClaim{Name: store}, syncer.NamespaceClaim{Name: host, Owner: owner}); err != nil {
			t.Fatalf("EnsureNamespaces as the manager: %v", err)
		}
		rel := helm.Release{Namespace: host, Name: release, Storage: store}
		if obs, err := hc.InstallOrUpgrade(ctx, rel, Values(tn, release, host, "", Options{})); err != nil || obs.State != helm.StateDeployed {
			t.Fatalf("installing the vCluster release as the manager: %+v, %v", obs, err)
		}
		return host, release, asServiceAccount(t, b.Config, host, "vc-"+release)
	}

	host, release, vcs := install(t, "alice")

	t.Run("the host namespace enforces baseline", func(t *testing.T) {
		ns := &corev1.Namespace{}
		if err := admin.Get(ctx, client.ObjectKey{Name: host}, ns); err != nil {
			t.Fatal(err)
		}
		if ns.Labels[syncer.PodSecurityEnforceLabel] != "baseline" || ns.Labels[syncer.PodSecurityEnforceVersionLabel] != syncer.PodSecurityVersion {
			t.Errorf("host namespace labels = %v, want enforce baseline at %s", ns.Labels, syncer.PodSecurityVersion)
		}
	})

	t.Run("the syncer cannot create Pods that escape onto the node", func(t *testing.T) {
		for name, c := range escapingPods() {
			t.Run(name, func(t *testing.T) {
				pod := c.pod(host)
				err := vcs.Create(ctx, pod)
				refusedByPodSecurity(t, err, "baseline", c.check)
			})
		}
	})

	t.Run("the syncer creates a baseline Pod the same way", func(t *testing.T) {
		pod := basePod(host, "tenant-app")
		if err := vcs.Create(ctx, pod); err != nil {
			t.Fatalf("a baseline Pod created as the syncer was refused: %v", err)
		}
	})

	t.Run("the chart's own control-plane Pod fits baseline and not restricted", func(t *testing.T) {
		sts := &appsv1.StatefulSet{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: host, Name: release}, sts); err != nil {
			t.Fatal(err)
		}
		// The Pod the StatefulSet controller would create (no controller runs here).
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: host, Name: release + "-0", Labels: sts.Spec.Template.Labels}, Spec: sts.Spec.Template.Spec}
		// With the volume of each claim template, as the StatefulSet controller adds it
		// (k8s.io/kubernetes pkg/controller/statefulset/stateful_set_utils.go, updateStorage:
		// claim <template>-<set>-<ordinal>).
		for _, claim := range sts.Spec.VolumeClaimTemplates {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name + "-" + pod.Name}}})
		}
		if err := admin.Create(ctx, pod); err != nil {
			t.Fatalf("the vCluster's own Pod is refused in its host namespace: %v", err)
		}
		// In a restricted namespace the same Pod is refused: it runs as root (runAsUser 0), as
		// the 0.21 chart's defaults have it.
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: store, Name: release + "-0"}, Spec: *pod.Spec.DeepCopy()}
		refusedByPodSecurity(t, admin.Create(ctx, pod), "restricted", "runAsNonRoot")
	})

	t.Run("the platform namespace enforces restricted", func(t *testing.T) {
		refusedByPodSecurity(t, admin.Create(ctx, basePod(store, "anything")), "restricted", "allowPrivilegeEscalation")
	})

	t.Run("a host namespace made before the labels is labelled when next ensured", func(t *testing.T) {
		const tenantName = "bob"
		old := workspaces.VClusterNamespace(lc, tenantName)
		// As the manager created namespaces before they carried Pod Security labels.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        old,
			Labels:      map[string]string{workspaces.FingerprintLabel: workspaces.Fingerprint(lc)},
			Annotations: map[string]string{workspaces.LogicalClusterAnnotation: lc, syncer.OwnerAnnotation: "Tenant default/" + tenantName},
		}}
		if err := admin.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		// Nothing refuses a privileged Pod there yet: the labels are what refuse it.
		before := escapingPods()["privileged"].pod(old)
		before.Name = "privileged-before"
		if err := admin.Create(ctx, before); err != nil {
			t.Fatalf("a privileged Pod in an unlabelled namespace: %v; want it admitted (nothing else refuses it)", err)
		}
		_, _, vcs := install(t, tenantName)
		refusedByPodSecurity(t, vcs.Create(ctx, escapingPods()["privileged"].pod(old)), "baseline", "privileged")
		if err := vcs.Create(ctx, basePod(old, "tenant-app")); err != nil {
			t.Fatalf("a baseline Pod created as the syncer was refused: %v", err)
		}
	})
}

// escapingPod is a Pod spec that would give its containers the node, and the Pod Security check
// (k8s.io/pod-security-admission policy, the check's ID) that refuses it at baseline.
type escapingPod struct {
	check string
	pod   func(namespace string) *corev1.Pod
}

func escapingPods() map[string]escapingPod {
	with := func(name string, mutate func(*corev1.Pod)) func(string) *corev1.Pod {
		return func(namespace string) *corev1.Pod {
			p := basePod(namespace, name)
			mutate(p)
			return p
		}
	}
	return map[string]escapingPod{
		"privileged": {"privileged", with("privileged", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		})},
		"hostPID": {"host namespaces", with("host-pid", func(p *corev1.Pod) { p.Spec.HostPID = true })},
		"hostNetwork": {"host namespaces", with("host-network", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
		})},
		"hostPath": {"hostPath volumes", with("host-path", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		})},
		"SYS_ADMIN": {"capabilities", with("sys-admin", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		})},
	}
}

// basePod is a Pod that meets baseline (and not restricted: it sets no security context).
func basePod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
}

// refusedByPodSecurity fails t unless err is the PodSecurity admission plugin refusing a Pod at
// level with check among the reasons: `pods "x" is forbidden: violates PodSecurity
// "<level>:<version>": <check> (...)` (k8s.io/pod-security-admission admission.go).
func refusedByPodSecurity(t *testing.T, err error, level, check string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want refused by Pod Security %s (%s)", level, check)
	}
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want Forbidden by Pod Security, got %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `violates PodSecurity "`+level+":"+syncer.PodSecurityVersion+`"`) || !strings.Contains(msg, check) {
		t.Fatalf("refused, but not by Pod Security %s for %s: %v", level, check, err)
	}
	t.Logf("refused: %v", err)
}

// asServiceAccount is a client acting as ServiceAccount namespace/name: the admin's credentials
// with impersonation, so the API server authorizes every request as that identity.
func asServiceAccount(t *testing.T, admin *rest.Config, namespace, name string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The identity holds what the chart's Role grants: it may list Pods in its namespace only.
	if err := c.List(context.Background(), &corev1.PodList{}, client.InNamespace(namespace)); err != nil {
		t.Fatalf("ServiceAccount %s/%s cannot list Pods in its namespace: %v", namespace, name, err)
	}
	if err := c.List(context.Background(), &corev1.PodList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Fatalf("ServiceAccount %s/%s listing Pods in default: %v; want Forbidden", namespace, name, err)
	}
	return c
}
