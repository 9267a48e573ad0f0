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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubeopera/kubeopera/internal/crossplane/xr"
)

// crossplaneXRDV2GVR is where config/crossplane's XRD (apiextensions.crossplane.io/v2) is created.
var crossplaneXRDV2GVR = schema.GroupVersionResource{Group: "apiextensions.crossplane.io", Version: "v2", Resource: "compositeresourcedefinitions"}

// ApplyCrossplaneConfig applies what a platform admin applies on a backend running Crossplane
// (StartCrossplane) and the providers' CRDs: the objects of config/crossplane, in its
// kustomization.yaml's order (an object already there is kept; `kubectl apply -k` would update
// it). root is the repository root. It returns once Crossplane established every XRD (the XR's
// CRD is served) and made a revision of every Composition, and kube-controller-manager's garbage
// collector watches the XR's kind (awaitGarbageCollector).
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
	if err := waitCrossplaneConfig(ctx, dyn, applied); err != nil {
		return err
	}
	return awaitGarbageCollector(ctx, dyn)
}

// awaitGarbageCollector returns once kube-controller-manager's garbage collector watches the
// XR's kind, and with it every kind served before it: the providers' CRDs, installed first.
//
// A Crossplane XR is deleted in the foreground by the KubernetesCluster controller: it is gone
// only once what Crossplane composed for it is, because each composed resource names it as its
// controller with blockOwnerDeletion (crossplane composite/composition_render.go,
// meta.AsController). The garbage collector honours that only for the kinds it watches, and it
// looks for new kinds in discovery once every 30 s (kube-controller-manager core.go,
// GarbageCollector.Sync in pkg/controller/garbagecollector/garbagecollector.go): an XR deleted
// within that window of its provider's install goes at once, its composed resources after it.
// On a platform the providers are installed long before a tenant composes anything; here they
// are installed a moment before the tests compose, so this waits for what a platform has.
//
// The probe is a paused XR (Crossplane neither composes it nor gives it a finalizer: the pause
// is checked first, composite/reconciler.go) whose owner does not exist: the garbage collector
// deletes it as soon as it watches its kind.
func awaitGarbageCollector(ctx context.Context, dyn dynamic.Interface) error {
	probe := xr.New(xr.Params{Name: "gc-probe-" + rand.String(5), Namespace: metav1.NamespaceDefault, Provider: "Probe",
		KubernetesVersion: "1.31", NodeFlavor: "probe", NodeCount: 1, CredentialsSecretName: "none", CredentialsKey: "none", KubeconfigSecretName: "none"}).GetUnstructured()
	probe.SetAnnotations(map[string]string{"crossplane.io/paused": "true"})
	probe.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: probe.GetName(), UID: types.UID("no-such-owner-" + rand.String(16))}})
	gvr := schema.GroupVersionResource{Group: xr.Group, Version: xr.Version, Resource: "managedclusters"}
	if _, err := dyn.Resource(gvr).Namespace(probe.GetNamespace()).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the garbage collector's probe: %w", err)
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = dyn.Resource(gvr).Namespace(probe.GetNamespace()).Get(ctx, probe.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(last), nil
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager's garbage collector never deleted %s %s/%s, whose owner does not exist: it does not watch the XR's kind (%v)", xr.Kind, probe.GetNamespace(), probe.GetName(), last)
	}
	return nil
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
