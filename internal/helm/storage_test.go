package helm

import (
	"context"
	"fmt"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// These tests play a tenant who is admin of their vCluster and so acts on the backend as the
// vCluster syncer's ServiceAccount vc-<release>: the chart's Role (vCluster's own chart 0.21.0,
// templates/role.yaml, as loft-sh/vcluster 0.21 renders it) lets it create, update and delete
// Secrets in the host namespace, which is where Helm keeps a release's records by default.

// storageSetup returns a client, a release whose objects live in a fresh namespace and whose
// records live in another fresh namespace, and a third namespace with a Secret of someone else.
func storageSetup(t *testing.T, name string) (*SDKClient, Release, *corev1.Secret) {
	t.Helper()
	c, host := setup(t)
	store := newNamespace(t)
	victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(t), Name: "precious"}, StringData: map[string]string{"k": "v"}}
	victim, err := kube.CoreV1().Secrets(victim.Namespace).Create(context.Background(), victim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c, Release{Namespace: host, Name: name, Storage: store}, victim
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "helm-test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// asSyncer is a clientset that acts as the vCluster syncer's ServiceAccount of release name in
// namespace (the API server impersonates it: the chart's RoleBinding grants it the Role).
func asSyncer(t *testing.T, namespace, name string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":vc-" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// forgeRecord writes, as the syncer, a release record of name into namespace as Helm's secrets
// driver encodes one (driver.Secrets.Create: gzip, base64, labels owner=helm, name, status,
// version): a deployed revision whose manifest lists victim, so that an upgrade from it prunes
// victim and an uninstall of it deletes victim, with the Helm client's credentials.
func forgeRecord(t *testing.T, syncer kubernetes.Interface, namespace, name string, version int, victim *corev1.Secret) {
	t.Helper()
	manifest := fmt.Sprintf("---\n# Source: vcluster/templates/forged.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n", victim.Name, victim.Namespace)
	rel := &release.Release{
		Name:      name,
		Namespace: namespace,
		Version:   version,
		Info:      &release.Info{Status: rcommon.StatusDeployed, Description: "Upgrade complete"},
		Chart:     &chart.Chart{Metadata: &chart.Metadata{Name: "vcluster", Version: "0.21.0", APIVersion: "v2"}},
		Config:    map[string]any{},
		Manifest:  manifest,
		Labels:    map[string]string{valuesHashLabel: hashValues(nil)},
	}
	d := driver.NewSecrets(syncer.CoreV1().Secrets(namespace))
	if err := d.Create(fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version), rel); err != nil {
		t.Fatalf("the syncer's ServiceAccount could not write a release record in %s: %v", namespace, err)
	}
}

// expectIntact fails t unless victim still exists, unchanged (same UID).
func expectIntact(t *testing.T, what string, victim *corev1.Secret) {
	t.Helper()
	got, err := kube.CoreV1().Secrets(victim.Namespace).Get(context.Background(), victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: the Secret %s/%s listed by the forged record is gone: %v", what, victim.Namespace, victim.Name, err)
	}
	if got.UID != victim.UID {
		t.Fatalf("%s: the Secret %s/%s was recreated", what, victim.Namespace, victim.Name)
	}
}

// records returns the names of the release records of name in namespace.
func records(t *testing.T, namespace, name string) []string {
	t.Helper()
	list, err := kube.CoreV1().Secrets(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: recordSelector(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	return out
}

// TestForgedRecordInTheReleaseNamespaceIsNeverRead: a release keeps its records in its storage
// namespace. The tenant, as the vCluster syncer, writes a newer "deployed" record into the host
// namespace whose manifest lists a Secret of another namespace. An upgrade and an uninstall
// never read it: the other namespace's Secret survives both, the revisions follow the real
// history, and the forged record is deleted with the release.
func TestForgedRecordInTheReleaseNamespaceIsNeverRead(t *testing.T) {
	ctx := context.Background()
	c, rel, victim := storageSetup(t, "forged")
	values := vclusterValues()
	if _, err := c.InstallOrUpgrade(ctx, rel, values); err != nil {
		t.Fatalf("install: %v", err)
	}
	if got := records(t, rel.Namespace, rel.Name); len(got) != 0 {
		t.Errorf("release records in the host namespace %s: %v, want none", rel.Namespace, got)
	}
	if got := records(t, rel.Storage, rel.Name); len(got) != 1 {
		t.Errorf("release records in the storage namespace %s: %v, want revision 1", rel.Storage, got)
	}

	forgeRecord(t, asSyncer(t, rel.Namespace, rel.Name), rel.Namespace, rel.Name, 9, victim)
	if obs, err := c.Observe(ctx, rel, values); err != nil || obs.Revision != 1 || !obs.UpToDate {
		t.Errorf("Observe = %+v, %v; want revision 1, up to date (the forged revision 9 unread)", obs, err)
	}

	values["global"] = map[string]any{"labels": map[string]any{"tenant": "acme-2"}}
	obs, err := c.InstallOrUpgrade(ctx, rel, values)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if obs.Revision != 2 || obs.State != StateDeployed {
		t.Errorf("upgrade = %+v, want deployed revision 2 (from revision 1, not the forged 9)", obs)
	}
	expectIntact(t, "after the upgrade", victim)
	if got := records(t, rel.Namespace, rel.Name); len(got) != 0 {
		t.Errorf("release records left in the host namespace after the upgrade: %v, want the forged one deleted", got)
	}

	forgeRecord(t, asSyncer(t, rel.Namespace, rel.Name), rel.Namespace, rel.Name, 10, victim)
	if err := c.Uninstall(ctx, rel); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	expectIntact(t, "after the uninstall", victim)
	if _, err := kube.AppsV1().StatefulSets(rel.Namespace).Get(ctx, rel.Name, metav1.GetOptions{}); err == nil {
		t.Error("the release's StatefulSet survived the uninstall")
	}
	for _, ns := range []string{rel.Namespace, rel.Storage} {
		if got := records(t, ns, rel.Name); len(got) != 0 {
			t.Errorf("release records left in %s after the uninstall: %v", ns, got)
		}
	}
}

// TestReleaseRecordsMoveToTheStorageNamespace: a release installed with its records in its own
// namespace (as before Release.Storage) is carried over when next converged with a storage
// namespace: its objects are adopted in place (same UIDs: no reinstall, no second release
// fighting the first), also after an attempt that failed, its records move, and the old ones are
// deleted unread. A record the tenant
// forged there before the move (as the syncer, newer than the real ones, listing a Secret of
// another namespace) is never read either: that Secret survives the move and the uninstall.
func TestReleaseRecordsMoveToTheStorageNamespace(t *testing.T) {
	ctx := context.Background()
	c, rel, victim := storageSetup(t, "moved")
	values := vclusterValues()
	before := Release{Namespace: rel.Namespace, Name: rel.Name}
	for range 2 {
		if _, err := c.InstallOrUpgrade(ctx, before, values); err != nil {
			t.Fatalf("install in the old layout: %v", err)
		}
	}
	if got := records(t, rel.Namespace, rel.Name); len(got) != 2 {
		t.Fatalf("old layout: records in the host namespace = %v, want 2 revisions", got)
	}
	uids := objectUIDs(t, rel)
	forgeRecord(t, asSyncer(t, rel.Namespace, rel.Name), rel.Namespace, rel.Name, 7, victim)

	if obs, err := c.Observe(ctx, rel, values); err != nil || obs.Exists {
		t.Errorf("Observe(storage namespace) before the move = %+v, %v; want no release there yet", obs, err)
	}
	// A first attempt fails after Helm recorded it (the API server refuses "bogus" as a quota
	// resource name, before the StatefulSet is reached): the next attempt adopts the objects
	// again instead of uninstalling the failed release, which would delete them.
	bad := vclusterValues()
	bad["policies"].(map[string]any)["resourceQuota"] = map[string]any{"enabled": true, "quota": map[string]any{"bogus": "1"}}
	if _, err := c.InstallOrUpgrade(ctx, rel, bad); err == nil {
		t.Fatal("the install with an invalid quota succeeded")
	}
	if obs, err := c.Observe(ctx, rel, bad); err != nil || obs.State != StateFailed {
		t.Fatalf("Observe after the failed move = %+v, %v; want a failed revision", obs, err)
	}
	obs, err := c.InstallOrUpgrade(ctx, rel, values)
	if err != nil {
		t.Fatalf("carrying the release over: %v", err)
	}
	if obs.State != StateDeployed || !obs.UpToDate || obs.Revision != 1 {
		t.Errorf("carried over = %+v, want deployed, up to date, revision 1 in the storage namespace", obs)
	}
	for what, uid := range objectUIDs(t, rel) {
		if uids[what] != uid {
			t.Errorf("%s was recreated (UID %s, was %s); want it adopted in place", what, uid, uids[what])
		}
	}
	expectIntact(t, "after the move", victim)
	if got := records(t, rel.Namespace, rel.Name); len(got) != 0 {
		t.Errorf("records left in the host namespace after the move: %v, want none", got)
	}
	if got := records(t, rel.Storage, rel.Name); len(got) != 1 {
		t.Errorf("records in the storage namespace after the move: %v, want revision 1", got)
	}
	if obs, err := c.Observe(ctx, rel, values); err != nil || obs.Revision != 1 || !obs.UpToDate || obs.State != StateDeployed {
		t.Errorf("Observe after the move = %+v, %v; want deployed revision 1, up to date", obs, err)
	}

	if err := c.Uninstall(ctx, rel); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	expectIntact(t, "after the uninstall", victim)
	if _, err := kube.AppsV1().StatefulSets(rel.Namespace).Get(ctx, rel.Name, metav1.GetOptions{}); err == nil {
		t.Error("the release's StatefulSet survived the uninstall")
	}
}

// TestUninstallWithoutTheReleaseNamespace: once the release namespace is gone (deleted with its
// objects), Uninstall removes the records left in the storage namespace and nothing else; it does
// not fail on objects it can no longer reach.
func TestUninstallWithoutTheReleaseNamespace(t *testing.T) {
	ctx := context.Background()
	c, rel, _ := storageSetup(t, "orphaned")
	if _, err := c.InstallOrUpgrade(ctx, rel, nil); err != nil {
		t.Fatalf("install: %v", err)
	}
	// The same release as seen after its namespace went: this test server runs no namespace
	// controller to finish a namespace deletion, so a namespace that never existed plays one
	// that is gone (both answer NotFound).
	gone := Release{Namespace: rel.Namespace + "-gone", Name: rel.Name, Storage: rel.Storage}
	if err := c.Uninstall(ctx, gone); err != nil {
		t.Fatalf("Uninstall with the release namespace gone: %v", err)
	}
	if got := records(t, rel.Storage, rel.Name); len(got) != 0 {
		t.Errorf("records left in the storage namespace: %v, want none", got)
	}
	if obs, err := c.Observe(ctx, rel, nil); err != nil || obs.Exists {
		t.Errorf("Observe after the uninstall = %+v, %v; want no release", obs, err)
	}
}

// objectUIDs returns the UIDs of the release's StatefulSet, Service and ServiceAccount.
func objectUIDs(t *testing.T, rel Release) map[string]types.UID {
	t.Helper()
	ctx := context.Background()
	sts, err := kube.AppsV1().StatefulSets(rel.Namespace).Get(ctx, rel.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := kube.CoreV1().Services(rel.Namespace).Get(ctx, rel.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kube.CoreV1().ServiceAccounts(rel.Namespace).Get(ctx, "vc-"+rel.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]types.UID{"StatefulSet": sts.UID, "Service": svc.UID, "ServiceAccount": sa.UID}
}
