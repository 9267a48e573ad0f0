package runner

import (
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

func TestSummarize(t *testing.T) {
	change := func(actions ...tfjson.Action) *tfjson.ResourceChange {
		return &tfjson.ResourceChange{Change: &tfjson.Change{Actions: actions}}
	}
	for name, tc := range map[string]struct {
		plan *tfjson.Plan
		want api.PlanSummary
	}{
		"no plan":    {plan: nil},
		"no changes": {plan: &tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{change(tfjson.ActionNoop), change(tfjson.ActionRead)}}},
		"a first build": {plan: &tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{change(tfjson.ActionCreate), change(tfjson.ActionCreate), change(tfjson.ActionCreate)}},
			want: api.PlanSummary{Add: 3}},
		"nodeCount 2 to 5, in place": {plan: &tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{change(tfjson.ActionNoop), change(tfjson.ActionUpdate)}},
			want: api.PlanSummary{Change: 1}},
		"replacements count as an add and a destroy, in either order": {plan: &tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{
			change(tfjson.ActionDelete, tfjson.ActionCreate), change(tfjson.ActionCreate, tfjson.ActionDelete), change(tfjson.ActionDelete), nil, {}}},
			want: api.PlanSummary{Add: 2, Destroy: 3}},
	} {
		if got := Summarize(tc.plan); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}
