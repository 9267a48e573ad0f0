package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// crossplaneXRDV2GVR is where config/crossplane's XRD (apiextensions.crossplane.io/v2) is created.
var crossplaneXRDV2GVR = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v2", Resource: "compositeresourcedefinitions"}

// ApplyCrossplaneConfig applies what a platform admin applies on a backend running Crossplane
// (StartCrossplane) and the providers' CRDs: the objects of config/crossplane, in its
// kustomization.yaml's order (an object already there is kept; `kubectl apply -k` would update
// it). root is the repository root. It returns once Crossplane established every XRD (the XR's
// CRD is served) and made a revision of every Composition.
func ApplyCrossplaneConfig(ctx context.Context, cfg *rest.Config, root string) error {
	cfg = rest.CopyConfig(cfg)
	// XRD v1 (the storage version read back) is deprecated: the apiserver warns at every read.
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "config", "crossplane")
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "kustomization.yaml"), err)
	}
	var applied []*unstructured.Unstructured
	for _, f := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			gvr := CrossplaneCompositionGVR
			if u.GetKind() == "CompositeResourceDefinition" {
				gvr = crossplaneXRDV2GVR
			}
			if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s %s from %s: %w", u.GetKind(), u.GetName(), f, err)
			}
			applied = append(applied, u)
		}
	}
	return waitCrossplaneConfig(ctx, dyn, applied)
}

// waitCrossplaneConfig waits until every XRD of objs is Established (definition/reconciler.go
// line 649) and every Composition has a CompositionRevision (labelled
// crossplane.io/composition-name: apis/apiextensions/v1 LabelCompositionName).
func waitCrossplaneConfig(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, o := range objs {
			switch o.GetKind() {
			case "CompositeResourceDefinition":
				xrd, err := dyn.Resource(CrossplaneXRDGVR).Get(ctx, o.GetName(), metav1.GetOptions{})
				if err != nil {
					last = err.Error()
					return false, nil
				}
				if !conditionTrue(xrd, CrossplaneTypeEstablished) {
					last = fmt.Sprintf("XRD %s is not Established: %v", o.GetName(), xrd.Object["status"])
					return false, nil
				}
			case "Composition":
				revs, err := dyn.Resource(crossplaneCompositionRevisionGVR).List(ctx, metav1.ListOptions{LabelSelector: "crossplane.io/composition-name=" + o.GetName()})
				if err != nil || len(revs.Items) == 0 {
					last = fmt.Sprintf("no CompositionRevision of %s yet (%v)", o.GetName(), err)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("Crossplane did not take config/crossplane: %w (%s)", err, last)
	}
	return nil
}

// conditionTrue tells whether u's status has condition typ True.
func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}
