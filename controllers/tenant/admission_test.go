package tenant

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

func tenantAt(name string, minute int, cpu string, admitted string) kov1alpha1.Tenant {
	t := kov1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 29, 12, minute, 0, 0, time.UTC))},
		Spec: kov1alpha1.TenantSpec{Quota: kov1alpha1.TenantQuota{CPU: resource.MustParse(cpu), Memory: resource.MustParse("1Gi")}},
	}
	if admitted != "" {
		status := metav1.ConditionTrue
		if admitted != kov1alpha1.SucceededReason {
			status = metav1.ConditionFalse
		}
		reconcile.SetCondition(&t, kov1alpha1.AdmittedCondition, status, admitted, "")
	}
	return t
}

func TestLimits(t *testing.T) {
	limits := Limits{MaxTenants: 3, MaxCPU: resource.MustParse("4")}
	tests := map[string]struct {
		self    kov1alpha1.Tenant
		others  []kov1alpha1.Tenant
		refused string // substring of the QuotaExceeded message, "" when admitted
	}{
		"first Tenant fits": {self: tenantAt("a", 1, "2", ""), refused: ""},
		"older Tenants count first": {
			self:    tenantAt("c", 3, "1", ""),
			others:  []kov1alpha1.Tenant{tenantAt("a", 1, "2", ""), tenantAt("b", 2, "2", "")},
			refused: "5 CPU in all, over the limit of 4",
		},
		"newer, not yet admitted Tenants do not count": {
			self:   tenantAt("a", 1, "2", ""),
			others: []kov1alpha1.Tenant{tenantAt("b", 2, "2", ""), tenantAt("c", 3, "2", "")},
		},
		"an admitted newer Tenant counts": {
			self:    tenantAt("a", 1, "2", ""),
			others:  []kov1alpha1.Tenant{tenantAt("b", 2, "3", kov1alpha1.SucceededReason)},
			refused: "over the limit of 4",
		},
		"a Tenant refused for the limits holds nothing": {
			self:   tenantAt("c", 3, "2", ""),
			others: []kov1alpha1.Tenant{tenantAt("a", 1, "2", kov1alpha1.SucceededReason), tenantAt("b", 2, "3", kov1alpha1.QuotaExceededReason)},
		},
		"the count limit": {
			self:    tenantAt("d", 4, "100m", ""),
			others:  []kov1alpha1.Tenant{tenantAt("a", 1, "100m", ""), tenantAt("b", 2, "100m", ""), tenantAt("c", 3, "100m", "")},
			refused: "at most 3 Tenants",
		},
		"Tenants being deleted do not count": {
			self: tenantAt("b", 2, "3", ""),
			others: func() []kov1alpha1.Tenant {
				gone := tenantAt("a", 1, "3", kov1alpha1.SucceededReason)
				gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				return []kov1alpha1.Tenant{gone}
			}(),
		},
		"a negative quota ahead does not make room": {
			self:    tenantAt("b", 2, "3", ""),
			others:  []kov1alpha1.Tenant{tenantAt("a", 1, "-1000", kov1alpha1.SucceededReason), tenantAt("c", 0, "2", kov1alpha1.SucceededReason)},
			refused: "5 CPU in all, over the limit of 4",
		},
		"same creation time: ordered by name": {
			self:    tenantAt("b", 1, "3", ""),
			others:  []kov1alpha1.Tenant{tenantAt("a", 1, "3", "")},
			refused: "over the limit",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			all := append([]kov1alpha1.Tenant{tc.self}, tc.others...)
			err := limits.Check(&tc.self, AdmittedBefore(&tc.self, all))
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			s, ok := reconcile.AsStalled(err)
			if !ok || s.Reason != kov1alpha1.QuotaExceededReason || !strings.Contains(s.Message, tc.refused) {
				t.Fatalf("want QuotaExceeded containing %q, got %v", tc.refused, err)
			}
		})
	}
	if err := (Limits{}).Check(ptr.To(tenantAt("a", 1, "1", "")), nil); err != nil {
		t.Errorf("zero limits refuse: %v", err)
	}
}

// A quota not greater than zero passed the schema before its CEL rule (and a client may skip
// nothing else): it is refused in the check too, with or without limits, naming the field.
func TestLimitsRefuseQuotasNotGreaterThanZero(t *testing.T) {
	for name, tc := range map[string]struct {
		cpu, memory string
		field       string
	}{
		"negative cpu":    {cpu: "-1000", memory: "1Gi", field: "spec.quota.cpu"},
		"zero cpu":        {cpu: "0", memory: "1Gi", field: "spec.quota.cpu"},
		"negative memory": {cpu: "1", memory: "-64Gi", field: "spec.quota.memory"},
	} {
		t.Run(name, func(t *testing.T) {
			tn := tenantAt("a", 1, tc.cpu, "")
			tn.Spec.Quota.Memory = resource.MustParse(tc.memory)
			for _, l := range []Limits{{}, {MaxTenants: 3, MaxCPU: resource.MustParse("4")}} {
				s, ok := reconcile.AsStalled(l.Check(&tn, nil))
				if !ok || s.Reason != kov1alpha1.InvalidSpecReason || !strings.Contains(s.Message, tc.field+" must be greater than zero") {
					t.Errorf("limits %+v: want InvalidSpec naming %s, got %v", l, tc.field, s)
				}
			}
		})
	}
}
