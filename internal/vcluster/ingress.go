package vcluster

import (
	"context"
	"fmt"
	"maps"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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

// IngressParams are what the backend admission policy (config/policies/ingress-class.yaml) lets
// into the tenants' backend namespaces: Ingresses of Class, which vClusters sync from their
// tenants; and, with vCluster exposure through an ingress, the control-plane Ingresses of
// ControlPlaneClass that the chart renders, when written by ControlPlaneWriter (the manager's
// backend user name), so that no tenant can publish a TLS-passthrough route of that class.
type IngressParams struct {
	Class              string
	ControlPlaneClass  string
	ControlPlaneWriter string
}

// data is the parameter ConfigMap's data, nil when nothing is allowed.
func (p IngressParams) data() map[string]string {
	d := map[string]string{}
	if p.Class != "" {
		d[IngressClassKey] = p.Class
	}
	if p.ControlPlaneClass != "" && p.ControlPlaneWriter != "" {
		d[controlPlaneIngressClassKey] = p.ControlPlaneClass
		d[controlPlaneWriterKey] = p.ControlPlaneWriter
	}
	if len(d) == 0 {
		return nil
	}
	return d
}

const (
	// controlPlaneIngressClassKey and controlPlaneWriterKey are the parameter's keys of the
	// control-plane Ingresses' class and of the one user that may write them.
	controlPlaneIngressClassKey = "controlPlaneIngressClass"
	controlPlaneWriterKey       = "controlPlaneWriter"
)

// EnsureIngressParams writes the admission policy's parameter so the backend admits exactly the
// Ingresses p allows; with nothing allowed the parameter is deleted and the policy refuses every
// Ingress in the tenants' namespaces. It reads through r (uncached: it runs before the
// manager's caches start) and writes through c.
func EnsureIngressParams(ctx context.Context, r client.Reader, c client.Client, namespace string, p IngressParams) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: IngressClassParam}}
	want := p.data()
	if want == nil {
		if err := c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete ingress class parameter %s/%s: %w", namespace, IngressClassParam, err)
		}
		return nil
	}
	err := r.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Labels = map[string]string{kov1alpha1.ManagedByLabel: managedBy}
		cm.Data = want
		err = c.Create(ctx, cm)
	case err == nil && !maps.Equal(cm.Data, want):
		cm.Data = want
		err = c.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("failed to write ingress class parameter %s/%s: %w", namespace, IngressClassParam, err)
	}
	return nil
}

// Writer returns the user name the backend knows the caller by (a SelfSubjectReview): the
// IngressParams.ControlPlaneWriter of a manager writing through cfg.
func Writer(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to ask the backend who the manager is (SelfSubjectReview): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("the backend's SelfSubjectReview named no user")
	}
	return review.Status.UserInfo.Username, nil
}
