package flavorcatalog

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// The one step of a copy: it is not a reconcile.Kind (a copy has no status to keep, so there is
// no phase and no flavorcatalog_status.go); Reconcile writes the copy and returns.

// Reconcile makes one workspace's copy of one flavor match the catalog: created or updated when
// the catalog has it, deleted when it does not. A flavor of the same name that is not a catalog
// copy is left alone.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	ctx, log := reconcile.RequestLogger(ctx, req, "ProviderMachineFlavor")
	ws, ok := r.Workspaces.Workspace(req.ClusterName)
	if !ok {
		return ctrl.Result{}, nil
	}
	want := &platformv1alpha1.ProviderMachineFlavor{}
	err := r.Catalog.Get(ctx, client.ObjectKey{Name: req.Name}, want)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to read the catalog: %w", err)
	}
	inCatalog := err == nil
	c := ws.Client()
	cur := &platformv1alpha1.ProviderMachineFlavor{}
	err = c.Get(ctx, client.ObjectKey{Name: req.Name}, cur)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	switch {
	case !inCatalog && exists && cur.Labels[CatalogLabel] == "true":
		log.Info("Flavor left the catalog; removing the workspace's copy")
		return ctrl.Result{}, client.IgnoreNotFound(c.Delete(ctx, cur))
	case !inCatalog:
		return ctrl.Result{}, nil
	case !exists:
		cp := &platformv1alpha1.ProviderMachineFlavor{
			ObjectMeta: metav1.ObjectMeta{Name: want.Name, Labels: copyLabels(want), Annotations: want.Annotations},
			Spec:       want.Spec,
		}
		log.V(1).Info("Publishing a catalog flavor to the workspace")
		err := c.Create(ctx, cp)
		if apierrors.IsMethodNotSupported(err) {
			// kcp refuses creates while the workspace is being deleted ("create not allowed
			// while custom resource definition is terminating"): nothing to publish to.
			log.V(1).Info("The workspace is being deleted; not publishing")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, client.IgnoreAlreadyExists(err)
	case cur.Labels[CatalogLabel] != "true":
		log.Info("A flavor of the catalog's name exists in the workspace and is not the catalog's; leaving it")
		return ctrl.Result{}, nil
	case equality.Semantic.DeepEqual(cur.Spec, want.Spec) && maps.Equal(cur.Labels, copyLabels(want)):
		return ctrl.Result{}, nil
	}
	before := cur.DeepCopy()
	cur.Spec, cur.Labels = want.Spec, copyLabels(want)
	log.V(1).Info("Updating the workspace's copy of a catalog flavor")
	return ctrl.Result{}, c.Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func copyLabels(f *platformv1alpha1.ProviderMachineFlavor) map[string]string {
	l := maps.Clone(f.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[CatalogLabel] = "true"
	return l
}
