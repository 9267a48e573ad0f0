package flux

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/readlimit"
)

// maxFluxDeployments caps the Deployments CheckHealth lists: Flux has six controllers at most
// (source, kustomize, helm, notification, image-reflector, image-automation).
const maxFluxDeployments = 50

// Health is what CheckHealth found.
type Health struct {
	// Healthy is true when every Flux controller in Namespace is Available.
	Healthy bool
	// Message names the controllers and what is wrong with them, e.g. "source-controller,
	// kustomize-controller Available" or "kustomize-controller: Deployment not Available
	// (MinimumReplicasUnavailable)".
	Message string
}

// CheckHealth reports whether Flux runs in Namespace: the Deployments SourceController and
// KustomizeController must exist, and they and every other Flux Deployment there (found by
// PartOfLabel=PartOfValue, e.g. helm-controller when installed) must be available. Only a failed
// API call is an error; a missing or unavailable controller is an unhealthy Health.
//
// A Deployment is available as kstatus (which `flux check` uses) counts a Deployment Current
// (fluxcd/cli-utils v1.2.3, pkg/kstatus/status/core.go, deploymentConditions): its generation
// observed, condition Available=True, no ProgressDeadlineExceeded, and every replica of the
// current template updated, available and ready.
//
// The list asks for at most maxFluxDeployments; more (a continue token, or a server that ignored
// the limit) is a *readlimit.Error: no Flux has that many controllers.
func CheckHealth(ctx context.Context, c client.Client) (Health, error) {
	list := &appsv1.DeploymentList{}
	if err := c.List(ctx, list, client.InNamespace(Namespace), client.MatchingLabels{PartOfLabel: PartOfValue}, client.Limit(maxFluxDeployments)); err != nil {
		return Health{}, fmt.Errorf("failed to list Flux's Deployments in %s: %w", Namespace, err)
	}
	if list.Continue != "" || len(list.Items) > maxFluxDeployments {
		return Health{}, &readlimit.Error{Subject: "Flux Deployment list in " + Namespace, Limit: fmt.Sprintf("%d items", maxFluxDeployments)}
	}
	byName := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var problems []string
	for _, name := range []string{SourceController, KustomizeController} {
		if byName[name] != nil {
			continue
		}
		// Found by name too, should a Flux install not label it.
		d := &appsv1.Deployment{}
		err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, d)
		switch {
		case apierrors.IsNotFound(err):
			problems = append(problems, name+": Deployment not found")
		case err != nil:
			return Health{}, fmt.Errorf("failed to read Deployment %s/%s: %w", Namespace, name, err)
		default:
			byName[name] = d
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Slice(names, func(a, b int) bool { return controllerOrder(names[a], names[b]) })
	for _, name := range names {
		if ok, why := deploymentAvailable(byName[name]); !ok {
			problems = append(problems, name+": "+why)
		}
	}
	if len(problems) > 0 {
		return Health{Message: strings.Join(problems, "; ")}, nil
	}
	return Health{Healthy: true, Message: strings.Join(names, ", ") + " Available"}, nil
}

// controllerOrder sorts source-controller and kustomize-controller first, then by name.
func controllerOrder(a, b string) bool {
	rank := func(n string) int {
		switch n {
		case SourceController:
			return 0
		case KustomizeController:
			return 1
		}
		return 2
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra < rb
	}
	return a < b
}

// deploymentAvailable reports whether d is available (see CheckHealth) and, if not, why.
func deploymentAvailable(d *appsv1.Deployment) (bool, string) {
	if d.DeletionTimestamp != nil {
		return false, "Deployment is being deleted"
	}
	var available *appsv1.DeploymentCondition
	for i := range d.Status.Conditions {
		switch c := &d.Status.Conditions[i]; c.Type {
		case appsv1.DeploymentAvailable:
			available = c
		case appsv1.DeploymentProgressing:
			if c.Reason == "ProgressDeadlineExceeded" {
				return false, fmt.Sprintf("Deployment rollout failed (ProgressDeadlineExceeded: %s)", c.Message)
			}
		}
	}
	switch {
	case available == nil:
		return false, "Deployment not Available (no Available condition yet)"
	case available.Status != corev1.ConditionTrue:
		return false, fmt.Sprintf("Deployment not Available (%s)", available.Reason)
	case d.Status.ObservedGeneration < d.Generation:
		return false, fmt.Sprintf("Deployment generation %d not observed yet (observed %d)", d.Generation, d.Status.ObservedGeneration)
	}
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.UpdatedReplicas < replicas:
		return false, fmt.Sprintf("Deployment rollout in progress (updated %d/%d)", st.UpdatedReplicas, replicas)
	case st.Replicas > replicas:
		return false, fmt.Sprintf("Deployment rollout in progress (%d old replicas terminating)", st.Replicas-replicas)
	case st.AvailableReplicas < st.UpdatedReplicas:
		return false, fmt.Sprintf("Deployment not Available (available %d/%d)", st.AvailableReplicas, st.UpdatedReplicas)
	case st.ReadyReplicas < replicas:
		return false, fmt.Sprintf("Deployment not Available (ready %d/%d)", st.ReadyReplicas, replicas)
	}
	return true, ""
}
