package sim

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Crossplane core's own kinds, as v2.2.0 stores them (apiextensions.crossplane.io/v1: the XRD's
// storage version; v2 is served as well).
var (
	CrossplaneXRDGVR         = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositeresourcedefinitions"}
	CrossplaneCompositionGVR = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v1", Resource: "compositions"}
)

// CrossplaneTypeEstablished is the XRD's condition once its XR's CRD is served and watched
// (apis/apiextensions/v1/conditions.go line 32; internal/controller/apiextensions/definition/
// reconciler.go line 649).
const CrossplaneTypeEstablished = "Established"

// setCrossplaneConditions sets conds on u as crossplane-runtime's ConditionedStatus.SetConditions
// does: an equal condition (type, status, reason, message, observedGeneration) keeps its
// lastTransitionTime; observedGeneration is u's generation.
func setCrossplaneConditions(u *unstructured.Unstructured, conds ...map[string]any) {
	existing, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	now := time.Now().UTC().Format(time.RFC3339)
	for _, c := range conds {
		c["observedGeneration"] = u.GetGeneration()
		replaced := false
		for i, e := range existing {
			m, _ := e.(map[string]any)
			if m["type"] != c["type"] {
				continue
			}
			replaced = true
			if m["status"] == c["status"] && m["reason"] == c["reason"] && m["message"] == c["message"] && m["observedGeneration"] == c["observedGeneration"] {
				break
			}
			c["lastTransitionTime"] = now
			existing[i] = c
			break
		}
		if !replaced {
			c["lastTransitionTime"] = now
			existing = append(existing, c)
		}
	}
	_ = unstructured.SetNestedSlice(u.Object, existing, "status", "conditions")
}

// runProviderLoop is a provider's controllers as the actors play them: every interval (zero:
// defaultCrossplaneInterval) it lists each kind's managed resources (gvr of each) and reconciles
// each one, until ctx ends; it returns nil then. Errors of one pass (conflicts, mostly) are
// retried in the next. The apiserver warns that Crossplane's finalizer name has no path;
// Crossplane uses it anyway, so the warnings are dropped.
func runProviderLoop[K any](ctx context.Context, backend *rest.Config, interval time.Duration, kinds []K, gvr func(K) schema.GroupVersionResource,
	reconcile func(context.Context, dynamic.Interface, kubernetes.Interface, K, *unstructured.Unstructured) error) error {
	cfg := rest.CopyConfig(backend)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if interval <= 0 {
		interval = defaultCrossplaneInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, k := range kinds {
			list, err := dyn.Resource(gvr(k)).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range list.Items {
				_ = reconcile(ctx, dyn, cs, k, &list.Items[i])
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// writeManagedStatus sets a managed resource's status.atProvider to obs (unless nil) and conds
// as ConditionedStatus.SetConditions does (an unchanged condition keeps its lastTransitionTime;
// observedGeneration is the object's generation), and writes the status if anything changed.
func writeManagedStatus(ctx context.Context, client dynamic.ResourceInterface, mr *unstructured.Unstructured, obs map[string]any, conds ...map[string]any) error {
	before, _, _ := unstructured.NestedFieldCopy(mr.Object, "status")
	if obs != nil {
		if err := unstructured.SetNestedField(mr.Object, obs, "status", "atProvider"); err != nil {
			return err
		}
	}
	setCrossplaneConditions(mr, conds...)
	after, _, _ := unstructured.NestedFieldCopy(mr.Object, "status")
	if equalJSON(before, after) {
		return nil
	}
	_, err := client.UpdateStatus(ctx, mr, metav1.UpdateOptions{})
	return err
}
