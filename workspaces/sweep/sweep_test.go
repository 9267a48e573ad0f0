package sweep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/workspaces"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/test/framework"
)

func TestConsistent(t *testing.T) {
	const lc, other = "1bg4baqdjkcw9lz4", "2xyzother0000000"
	fp := workspaces.Fingerprint(lc)
	ns := func(name, label, annotation string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
		if label != "" {
			n.Labels[workspaces.FingerprintLabel] = label
		}
		if annotation != "" {
			n.Annotations[workspaces.LogicalClusterAnnotation] = annotation
		}
		return n
	}
	tests := map[string]struct {
		ns   *corev1.Namespace
		want bool
	}{
		"main namespace":                {ns: ns(workspaces.Namespace(lc), fp, lc), want: true},
		"vCluster namespace":            {ns: ns(workspaces.VClusterNamespace(lc, "alice"), fp, lc), want: true},
		"shortened suffixed namespace":  {ns: ns(workspaces.SuffixedNamespace(lc, "vc-"+strings.Repeat("a", 60)), fp, lc), want: true},
		"name of another workspace":     {ns: ns(workspaces.Namespace(other), fp, lc), want: false},
		"label of another workspace":    {ns: ns(workspaces.Namespace(lc), workspaces.Fingerprint(other), lc), want: false},
		"annotation of another":         {ns: ns(workspaces.Namespace(lc), fp, other), want: false},
		"no annotation":                 {ns: ns(workspaces.Namespace(lc), fp, ""), want: false},
		"no label":                      {ns: ns(workspaces.Namespace(lc), "", lc), want: false},
		"fingerprint not a name prefix": {ns: ns(workspaces.Namespace(lc)+"x", fp, lc), want: false},
		"empty suffix":                  {ns: ns(workspaces.Namespace(lc)+"-", fp, lc), want: false},
		"not a kcp- name":               {ns: ns("tenant-"+fp, fp, lc), want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Consistent(tc.ns); got != tc.want {
				t.Errorf("Consistent(%s) = %v, want %v", tc.ns.Name, got, tc.want)
			}
		})
	}
}

// TestOrphanSweepRules runs the sweep against a real backend (kube-apiserver, etcd and the
// namespace controller) with a workspace lookup that answers from a table, so each rule is seen on
// its own: report-only by default, nothing deleted on a first sighting or before MinAge, the
// per-sweep cap, namespaces whose name/label/annotation disagree never touched, ownerless
// namespaces reported and kept, and a failed lookup kept.
func TestOrphanSweepRules(t *testing.T) {
	ctx := context.Background()
	be := framework.StartBackend(t)
	c, err := client.New(be.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backend := syncer.Backend{Client: c, Reader: c}

	const live, unknown = "live000000000001", "unknown000000001"
	var gone []string
	for i := range 7 {
		gone = append(gone, fmt.Sprintf("gone00000000000%d", i))
	}
	lookup := func(_ context.Context, lc string) (WorkspaceState, error) {
		switch {
		case lc == live:
			return WorkspaceLive, nil
		case slices.Contains(gone, lc):
			return WorkspaceGone, nil
		default:
			return 0, errors.New("forbidden: cannot tell")
		}
	}
	owners := func(_ context.Context, lc, owner string) (bool, error) {
		if lc != live {
			return false, fmt.Errorf("owner looked up in a workspace that is not live: %s", lc)
		}
		return owner == "Tenant default/alice", nil
	}
	create := func(name string, labels, annotations map[string]string) {
		t.Helper()
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}); err != nil {
			t.Fatal(err)
		}
	}
	meta := func(lc string) (map[string]string, map[string]string) {
		return map[string]string{workspaces.FingerprintLabel: workspaces.Fingerprint(lc)}, map[string]string{workspaces.LogicalClusterAnnotation: lc}
	}
	var orphans []string
	for _, lc := range gone {
		l, a := meta(lc)
		create(workspaces.Namespace(lc), l, a)
		orphans = append(orphans, workspaces.Namespace(lc))
	}
	l, a := meta(live)
	create(workspaces.Namespace(live), l, a)
	create(workspaces.VClusterNamespace(live, "alice"), l, map[string]string{workspaces.LogicalClusterAnnotation: live, syncer.OwnerAnnotation: "Tenant default/alice"})
	create(workspaces.VClusterNamespace(live, "ghost"), l, map[string]string{workspaces.LogicalClusterAnnotation: live, syncer.OwnerAnnotation: "Tenant default/ghost"})
	l, a = meta(unknown)
	create(workspaces.Namespace(unknown), l, a)
	// Each of these names a gone workspace somewhere, so only the agreement rule keeps them.
	inconsistent := map[string]func(){
		// named after gone[0], annotated and labelled for gone[1]
		workspaces.Namespace(gone[0]) + "-x": func() { l, a := meta(gone[1]); create(workspaces.Namespace(gone[0])+"-x", l, a) },
		// name and annotation agree, the label names another workspace
		workspaces.Namespace(gone[2]) + "-y": func() {
			create(workspaces.Namespace(gone[2])+"-y", map[string]string{workspaces.FingerprintLabel: workspaces.Fingerprint(live)}, map[string]string{workspaces.LogicalClusterAnnotation: gone[2]})
		},
		// labelled, not annotated
		workspaces.Namespace(gone[3]) + "-z": func() {
			create(workspaces.Namespace(gone[3])+"-z", map[string]string{workspaces.FingerprintLabel: workspaces.Fingerprint(gone[3])}, nil)
		},
		// not a kcp-<fp> name at all
		"someone-elses": func() { l, a := meta(gone[4]); create("someone-elses", l, a) },
	}
	for _, mk := range inconsistent {
		mk()
	}
	// A namespace that is nobody's: ignored altogether.
	create("unrelated", nil, nil)

	deleting := func() []string {
		t.Helper()
		var out []string
		list := &corev1.NamespaceList{}
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for _, ns := range list.Items {
			if ns.DeletionTimestamp != nil {
				out = append(out, ns.Name)
			}
		}
		for _, name := range orphans {
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); client.IgnoreNotFound(err) == nil && err != nil && !slices.Contains(out, name) {
				out = append(out, name) // already gone
			}
		}
		return out
	}

	t.Run("reports and deletes nothing by default", func(t *testing.T) {
		// Two namespaces a page: the sweep reads every page.
		s := &OrphanSweep{Backend: backend, Workspaces: lookup, OwnerExists: owners, MaxDeletions: 100, PageSize: 2}
		for range 3 {
			r, err := s.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !sameSet(r.Orphans, orphans) || len(r.Deleted) != 0 {
				t.Fatalf("orphans = %v, deleted = %v; want %v and none", r.Orphans, r.Deleted, orphans)
			}
			if !sameSet(r.Inconsistent, keys(inconsistent)) {
				t.Errorf("inconsistent = %v, want %v", r.Inconsistent, keys(inconsistent))
			}
			if !sameSet(r.Ownerless, []string{workspaces.VClusterNamespace(live, "ghost")}) {
				t.Errorf("ownerless = %v", r.Ownerless)
			}
			if !sameSet(r.Unverified, []string{workspaces.Namespace(unknown)}) {
				t.Errorf("unverified = %v", r.Unverified)
			}
		}
		if d := deleting(); len(d) != 0 {
			t.Fatalf("a report-only sweep deleted %v", d)
		}
		for gauge, want := range map[string]float64{"orphan": 7, "inconsistent": 4, "ownerless": 1, "unverified": 1} {
			g := map[string]float64{
				"orphan": gaugeValue(t, orphanNamespaces), "inconsistent": gaugeValue(t, inconsistentNamespaces),
				"ownerless": gaugeValue(t, ownerlessNamespaces), "unverified": gaugeValue(t, unverifiedNamespaces),
			}[gauge]
			if g != want {
				t.Errorf("%s gauge = %v, want %v", gauge, g, want)
			}
		}
	})

	t.Run("deletes nothing before an orphan was seen MinAge ago on an earlier sweep", func(t *testing.T) {
		s := &OrphanSweep{Backend: backend, Workspaces: lookup, Delete: true, MaxDeletions: 100, MinAge: time.Hour}
		for range 2 {
			if r, err := s.Sweep(ctx); err != nil || len(r.Deleted) != 0 {
				t.Fatalf("deleted = %v, %v", r, err)
			}
		}
		if d := deleting(); len(d) != 0 {
			t.Fatalf("deleted before MinAge: %v", d)
		}
	})

	t.Run("deletes confirmed orphans, at most MaxDeletions per sweep, and nothing else", func(t *testing.T) {
		s := &OrphanSweep{Backend: backend, Workspaces: lookup, Delete: true, MaxDeletions: 5}
		r, err := s.Sweep(ctx)
		if err != nil || len(r.Deleted) != 0 {
			t.Fatalf("first sighting deleted %v (%v)", r, err)
		}
		r, err = s.Sweep(ctx)
		if err != nil || len(r.Deleted) != 5 {
			t.Fatalf("second sweep deleted %v, want 5 (%v)", r, err)
		}
		r, err = s.Sweep(ctx)
		if err != nil || len(r.Deleted) != 2 {
			t.Fatalf("third sweep deleted %v, want the last 2 (%v)", r, err)
		}
		if d := deleting(); !sameSet(d, orphans) {
			t.Fatalf("deleted %v, want exactly %v", d, orphans)
		}
	})
}

func keys(m map[string]func()) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := g.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
