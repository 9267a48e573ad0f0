package helm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/kubeopera/kubeopera/test/framework"
)

// helm3Install plays Helm 3.20's `helm install` of the test chart as release name in ns with
// values: what the Helm 3 code of this package left on every backend before it moved to Helm 4.
// From helm.sh/helm/v3@v3.20.2:
//   - pkg/action/install.go performInstall: the rendered objects, each annotated
//     meta.helm.sh/release-name and meta.helm.sh/release-namespace and labelled
//     app.kubernetes.io/managed-by=Helm (setMetadataVisitor), are created (KubeClient.Create);
//   - pkg/kube/client.go createResource: with a plain create (resource.Helper.Create) whose field
//     manager is getManagedFieldsManager(), the base name of os.Args[0]: client-side, so the
//     objects' managedFields hold an Update entry of that manager, none of operation Apply;
//   - pkg/storage/driver/secrets.go Create: the record, Secret sh.helm.release.v1.<name>.v1 of
//     type helm.sh/release.v1 with labels owner=helm, name, status, version, holding the release
//     (pkg/release/release.go: no apply method, Helm 3 has none) gzipped, base64-encoded.
//
// Rendering is Helm's template engine, which Helm 4 kept; the objects and the record are written
// here as Helm 3 wrote them. It returns the rendered manifest.
func helm3Install(t *testing.T, ns, name string, values map[string]any) string {
	t.Helper()
	ctx := context.Background()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	objs, manifest := framework.HelmTemplate(t, chartDir, name, ns, values)
	now := time.Now()

	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(kube.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	manager := filepath.Base(os.Args[0])
	for _, u := range objs {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["meta.helm.sh/release-name"], a["meta.helm.sh/release-namespace"] = name, ns
		u.SetAnnotations(a)
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["app.kubernetes.io/managed-by"] = "Helm"
		u.SetLabels(l)
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(m.Resource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldManager: manager}); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}

	rec := &release.Release{
		Name:      name,
		Namespace: ns,
		Version:   1,
		Info: &release.Info{
			FirstDeployed: now, LastDeployed: now,
			Status: rcommon.StatusDeployed, Description: "Install complete",
		},
		Chart:    &chart.Chart{Metadata: ch.Metadata, Templates: ch.Templates, Values: ch.Values, Schema: ch.Schema},
		Config:   values,
		Manifest: manifest,
		Labels:   map[string]string{valuesHashLabel: hashValues(values)},
	}
	if err := driver.NewSecrets(kube.CoreV1().Secrets(ns)).Create(fmt.Sprintf("sh.helm.release.v1.%s.v1", name), rec); err != nil {
		t.Fatal(err)
	}
	return manifest
}

// TestTakesOverAHelm3Release: a release Helm 3 installed is upgraded by the Helm 4 code in place,
// never reinstalled: the next revision is 2, the objects keep their UIDs, the fields Helm 3's
// client-side manager owned move to Helm 4's apply manager (so a label the new values drop is
// removed), an object the new values no longer render is pruned, and the new record says it was
// made with server-side apply.
func TestTakesOverAHelm3Release(t *testing.T) {
	ctx := context.Background()
	c, ns := setup(t)
	const name = "acme"
	rel := Release{Namespace: ns, Name: name}
	old := vclusterValues()
	helm3Install(t, ns, name, old)

	before, err := kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Helm 3 release's StatefulSet: %v", err)
	}
	if before.Labels["tenant"] != "acme" {
		t.Fatalf("the Helm 3 release's StatefulSet labels = %v, want tenant=acme", before.Labels)
	}
	if _, err := kube.CoreV1().LimitRanges(ns).Get(ctx, "vc-"+name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Helm 3 release's LimitRange: %v", err)
	}
	obs, err := c.Observe(ctx, rel, old)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Observation{Exists: true, UpToDate: true, State: StateDeployed, Revision: 1, ChartVersion: "0.21.0", Description: "Install complete"}); obs != want {
		t.Fatalf("Observe(the Helm 3 release) = %+v, want %+v", obs, want)
	}

	values := vclusterValues()
	setLabels(values, map[string]any{"team": "blue"})
	values["policies"].(map[string]any)["limitRange"] = map[string]any{"enabled": false}
	obs, err = c.InstallOrUpgrade(ctx, rel, values)
	if err != nil {
		t.Fatalf("upgrade of the Helm 3 release: %v", err)
	}
	if want := (Observation{Exists: true, UpToDate: true, State: StateDeployed, Revision: 2, ChartVersion: "0.21.0", Description: "Upgrade complete"}); obs != want {
		t.Errorf("upgrade = %+v, want %+v (an upgrade from revision 1, not a reinstall)", obs, want)
	}

	after, err := kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID {
		t.Errorf("the StatefulSet was recreated (UID %s, was %s)", after.UID, before.UID)
	}
	if _, ok := after.Labels["tenant"]; ok || after.Labels["team"] != "blue" {
		t.Errorf("StatefulSet labels = %v, want team=blue and no tenant label (dropped from the values)", after.Labels)
	}
	manager := filepath.Base(os.Args[0])
	var applied bool
	for _, f := range after.ManagedFields {
		if f.Manager != manager {
			continue
		}
		switch f.Operation {
		case metav1.ManagedFieldsOperationApply:
			applied = true
		case metav1.ManagedFieldsOperationUpdate:
			t.Errorf("the StatefulSet still has a client-side (Update) entry of %s: %s", manager, f.FieldsV1)
		}
	}
	if !applied {
		t.Errorf("the StatefulSet has no server-side apply entry of %s: %+v", manager, after.ManagedFields)
	}
	if _, err := kube.CoreV1().LimitRanges(ns).Get(ctx, "vc-"+name, metav1.GetOptions{}); err == nil {
		t.Error("the LimitRange the new values no longer render was not pruned")
	}

	cfg, err := c.configuration(rel)
	if err != nil {
		t.Fatal(err)
	}
	latest, revisions, err := history(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(revisions) != 2 || latest.Version != 2 || latest.ApplyMethod != string(release.ApplyMethodServerSideApply) {
		t.Errorf("history: %d revisions, latest %d made with %q; want 2, 2, %q", len(revisions), latest.Version, latest.ApplyMethod, release.ApplyMethodServerSideApply)
	}
	for _, r := range revisions {
		if r.Version == 1 && r.Info.Status != rcommon.StatusSuperseded {
			t.Errorf("revision 1 (Helm 3's) is %s, want superseded", r.Info.Status)
		}
	}

	// The release stays Helm 4's: a second upgrade applies over the first one's fields.
	setLabels(values, map[string]any{"team": "green"})
	if obs, err = c.InstallOrUpgrade(ctx, rel, values); err != nil || obs.Revision != 3 {
		t.Fatalf("second upgrade = %+v, %v; want revision 3", obs, err)
	}
	after, err = kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || after.Labels["team"] != "green" || after.UID != before.UID {
		t.Errorf("after the second upgrade: labels %v, UID %s (was %s), %v", after.Labels, after.UID, before.UID, err)
	}
}

// setLabels replaces the StatefulSet's labels in vclusterValues' values.
func setLabels(values map[string]any, labels map[string]any) {
	values["controlPlane"].(map[string]any)["statefulSet"].(map[string]any)["labels"] = labels
}
