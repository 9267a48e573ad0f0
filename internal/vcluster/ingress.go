package vcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
)

const (
	// IngressClassParam is the parameter ConfigMap of the backend admission policy
	// config/policies/ingress-class.yaml, in the claims namespace.
	IngressClassParam = "kubeopera-ingress-class"
	// IngressClassKey is its key holding the one allowed ingress class.
	IngressClassKey = "ingressClass"
	// managedBy is the parameter's managed-by label: the Tenant controller, whose vClusters it is
	// for (the value it was first written with).
	managedBy = "tenant-controller"
)

// EnsureIngressClassParam writes the admission policy's parameter so the backend admits exactly the
// Ingresses the vClusters are allowed to sync: the class when one is allowed, none when ingressClass
// is empty (the parameter is deleted and the policy refuses every tenant Ingress). It reads through
// r (uncached: it runs before the manager's caches start) and writes through c.
func EnsureIngressClassParam(ctx context.Context, r client.Reader, c client.Client, namespace, ingressClass string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: IngressClassParam}}
	if ingressClass == "" {
		if err := c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete ingress class parameter %s/%s: %w", namespace, IngressClassParam, err)
		}
		return nil
	}
	err := r.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Labels = map[string]string{kov1alpha1.ManagedByLabel: managedBy}
		cm.Data = map[string]string{IngressClassKey: ingressClass}
		err = c.Create(ctx, cm)
	case err == nil && cm.Data[IngressClassKey] != ingressClass:
		cm.Data = map[string]string{IngressClassKey: ingressClass}
		err = c.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("failed to write ingress class parameter %s/%s: %w", namespace, IngressClassParam, err)
	}
	return nil
}
