package apiexport

import (
	"testing"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	conditionsv1alpha1 "github.com/kcp-dev/sdk/apis/third_party/conditions/apis/conditions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cached binding keeps what engaging and disengaging read (its workspace, Ready, deletion)
// and none of its bound resources or claims.
func TestTrimBinding(t *testing.T) {
	now := metav1.Now()
	b := &apisv1alpha1.APIBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeopera.io", Annotations: map[string]string{"kcp.io/cluster": "2abc", "other": "x"}, Labels: map[string]string{"a": "b"}, DeletionTimestamp: &now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kcp"}}},
		Spec: apisv1alpha1.APIBindingSpec{Reference: apisv1alpha1.BindingReference{Export: &apisv1alpha1.ExportBindingReference{Path: "root:kubeopera", Name: "kubeopera.io"}}},
		Status: apisv1alpha1.APIBindingStatus{
			Phase:                   apisv1alpha1.APIBindingPhaseBound,
			Conditions:              conditionsv1alpha1.Conditions{{Type: "Ready", Status: corev1.ConditionTrue}},
			BoundResources:          []apisv1alpha1.BoundAPIResource{{Group: "kubeopera.io", Resource: "tenants", StorageVersions: []string{"v1alpha1"}}},
			AppliedPermissionClaims: []apisv1alpha1.PermissionClaim{{GroupResource: apisv1alpha1.GroupResource{Resource: "secrets"}}},
		},
	}
	got, err := trimBinding(b)
	if err != nil {
		t.Fatal(err)
	}
	out := got.(*apisv1alpha1.APIBinding)
	if out.Name != b.Name || out.Annotations["kcp.io/cluster"] != "2abc" || out.DeletionTimestamp == nil ||
		out.Status.Phase != apisv1alpha1.APIBindingPhaseBound || len(out.Status.Conditions) != 1 ||
		out.Status.Conditions[0].Type != "Ready" || out.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("trimmed binding lost what the provider reads: %+v", out)
	}
	if len(out.ManagedFields) != 0 || out.Spec.Reference.Export != nil || len(out.Status.BoundResources) != 0 || len(out.Status.AppliedPermissionClaims) != 0 ||
		len(out.Annotations) != 1 || len(out.Labels) != 0 || out.Status.Conditions[0].Message != "" {
		t.Errorf("trimmed binding keeps what no one reads: %+v", out)
	}
	if other, _ := trimBinding("not a binding"); other != "not a binding" {
		t.Errorf("an object of another type was changed: %v", other)
	}
}
