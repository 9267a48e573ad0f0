package machinecapabilities

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/wait"

	commonv1alpha1 "github.com/kubeopera/kubeopera/apis/common/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/flavors"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// match lists every satisfying flavor of every provider of the workspace's catalog.
func match(ctx context.Context, s *scope) error {
	catalog := &platformv1alpha1.ProviderMachineFlavorList{}
	if err := s.Workspace.List(ctx, catalog); err != nil {
		return fmt.Errorf("failed to read the flavor catalog: %w", err)
	}
	var providers []string
	for _, f := range catalog.Items {
		if p := strings.ToUpper(f.Spec.ProviderRef.Type); p != "" && !slices.Contains(providers, p) {
			providers = append(providers, p)
		}
	}
	slices.Sort(providers)
	var matching, missing []string
	for _, p := range providers {
		res := flavors.Match(catalog.Items, flavors.Request{Provider: p, Capabilities: s.mc.Spec})
		matching = append(matching, res.Matching...)
		if res.Best == nil {
			missing = append(missing, res.Missing)
		}
	}
	s.mc.Status.MatchingFlavors = matching
	if len(matching) == 0 {
		msg := "The platform's catalog has no flavors"
		if len(missing) > 0 {
			msg = strings.Join(missing, "; ")
		}
		return reconcile.Waiting(platformv1alpha1.NoMatchingFlavorReason, msg, wait.Jitter(noMatchRecheck, 0.2))
	}
	reconcile.MarkTrue(s.mc, platformv1alpha1.FlavorMatchedCondition, commonv1alpha1.SucceededReason,
		fmt.Sprintf("Best per provider first: %s", strings.Join(matching, ", ")))
	return nil
}
