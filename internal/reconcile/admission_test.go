package reconcile_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

func hostClusterAt(name string, minute int, admitted string) *kov1alpha1.HostCluster {
	hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name),
		CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 2, 12, minute, 0, 0, time.UTC))}}
	if admitted != "" {
		status := metav1.ConditionTrue
		if admitted != kov1alpha1.SucceededReason {
			status = metav1.ConditionFalse
		}
		reconcile.SetCondition(hc, kov1alpha1.AdmittedCondition, status, admitted, "")
	}
	return hc
}

func TestAheadAndCountLimit(t *testing.T) {
	limit := reconcile.CountLimit{Max: 2, Kind: "HostClusters"}
	deleting := hostClusterAt("gone", 0, kov1alpha1.SucceededReason)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for name, tc := range map[string]struct {
		self      *kov1alpha1.HostCluster
		others    []*kov1alpha1.HostCluster
		wantAhead []string
	}{
		"alone":                       {self: hostClusterAt("a", 1, "")},
		"older ones count":            {self: hostClusterAt("c", 3, ""), others: []*kov1alpha1.HostCluster{hostClusterAt("b", 2, ""), hostClusterAt("a", 1, "")}, wantAhead: []string{"a", "b"}},
		"newer unadmitted ones don't": {self: hostClusterAt("a", 1, ""), others: []*kov1alpha1.HostCluster{hostClusterAt("b", 2, ""), hostClusterAt("c", 3, "")}},
		"a newer admitted one counts": {self: hostClusterAt("a", 1, ""), others: []*kov1alpha1.HostCluster{hostClusterAt("b", 2, kov1alpha1.SucceededReason)}, wantAhead: []string{"b"}},
		"refused ones hold nothing": {self: hostClusterAt("c", 3, ""),
			others: []*kov1alpha1.HostCluster{hostClusterAt("a", 1, kov1alpha1.QuotaExceededReason), hostClusterAt("b", 2, kov1alpha1.SucceededReason)}, wantAhead: []string{"b"}},
		"refused for another reason still counts": {self: hostClusterAt("c", 3, ""),
			others: []*kov1alpha1.HostCluster{hostClusterAt("a", 1, kov1alpha1.InvalidSpecReason)}, wantAhead: []string{"a"}},
		"being deleted does not count": {self: hostClusterAt("c", 3, ""), others: []*kov1alpha1.HostCluster{deleting}},
		"ties by name":                 {self: hostClusterAt("b", 1, ""), others: []*kov1alpha1.HostCluster{hostClusterAt("a", 1, ""), hostClusterAt("c", 1, "")}, wantAhead: []string{"a"}},
	} {
		t.Run(name, func(t *testing.T) {
			all := append([]*kov1alpha1.HostCluster{tc.self}, tc.others...)
			var got []string
			for _, o := range reconcile.Ahead(tc.self, all, kov1alpha1.AdmittedCondition) {
				got = append(got, o.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.wantAhead, ",") {
				t.Fatalf("ahead = %v, want %v", got, tc.wantAhead)
			}
			err := limit.Check(len(got))
			if fits := len(got) < limit.Max; fits != (err == nil) {
				t.Fatalf("Check(%d) = %v with max %d", len(got), err, limit.Max)
			}
		})
	}
	s, ok := reconcile.AsStalled(limit.Check(2))
	if !ok || s.Reason != kov1alpha1.QuotaExceededReason || !strings.Contains(s.Message, "at most 2 HostClusters") || !strings.Contains(s.Message, "nothing was created") {
		t.Fatalf("over the cap: %v", s)
	}
	if err := (reconcile.CountLimit{Kind: "HostClusters"}).Check(1000); err != nil {
		t.Fatalf("no limit refused: %v", err)
	}
}
