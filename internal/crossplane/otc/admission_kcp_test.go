package otc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestSecretRefNamespaceAdmissionOnRealKCP answers, on a real kcp v0.31.2, how a ProviderConfig
// whose spec.credentials.secretRef.namespace is not its own namespace can be refused at
// admission:
//
//	(a) a ValidatingAdmissionPolicy + Binding in the APIExport's workspace (apiexports/bootstrap/providerconfig-policy.yaml) is
//	    applied by kcp to the bound resource in every tenant workspace: works;
//	(b) a schema CEL rule comparing with metadata.namespace: impossible, kcp refuses the rule
//	    (CEL in schemas sees metadata.name and metadata.generateName only);
//	(c) a schema CEL rule forcing secretRef.namespace to be empty: works, but takes the field's
//	    freedom away (even the own namespace written out is refused).
func TestSecretRefNamespaceAdmissionOnRealKCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	kcp := framework.StartKCP(t)

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, apiextensionsv1.AddToScheme, platformv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	kc := func(path string) client.Client {
		t.Helper()
		c, err := client.New(workspaces.ClusterConfig(kcp.Config, path), client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	const platform = bootstrap.PlatformWorkspace
	if err := bootstrap.Bootstrap(ctx, kcp.Config, platform); err != nil {
		t.Fatal(err)
	}
	if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	tenants := []string{"acme", "beta"}
	for _, name := range tenants {
		if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root:orgs", name, workspaces.TenantWorkspaceTypeIn(platform)); err != nil {
			t.Fatal(err)
		}
	}
	acme := kc("root:orgs:acme")
	for _, ns := range []string{"team-a", "other"} {
		if err := acme.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	pc := func(name, namespace, secretNamespace string) *platformv1alpha1.ProviderConfig {
		return &platformv1alpha1.ProviderConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: platformv1alpha1.ProviderConfigSpec{Credentials: platformv1alpha1.ProviderCredentials{
				Source:    platformv1alpha1.CredentialsSourceSecret,
				SecretRef: &platformv1alpha1.SecretKeySelector{Namespace: secretNamespace, Name: "otc-creds", Key: "credentials"},
			}},
		}
	}

	// (a) The policy (apiexports/bootstrap/providerconfig-policy.yaml) is the platform
	// workspace's, applied by Bootstrap: every tenant workspace is guarded by it.
	const wantMsg = "spec.credentials.secretRef.namespace must be empty or team-a (the ProviderConfig's own namespace)"
	dryRun := []client.CreateOption{client.DryRunAll}
	refused := func(c client.Client, what string) {
		framework.Eventually(t, time.Minute, "the platform workspace's policy refusing a foreign secretRef.namespace in "+what, func() (bool, string) {
			err := c.Create(ctx, pc("foreign", "team-a", "other"), dryRun...)
			if err == nil {
				return false, "accepted"
			}
			return apierrors.IsInvalid(err) && strings.Contains(err.Error(), wantMsg), err.Error()
		})
	}
	for _, name := range tenants {
		c := kc("root:orgs:" + name)
		if name != "acme" {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
				t.Fatal(err)
			}
		}
		refused(c, "root:orgs:"+name)
	}

	// Without the policy's binding the schema lets a foreign namespace through (it is only
	// documented): a ProviderConfig made so is the "legacy" object of the ratcheting checks below.
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "apiexports", "bootstrap", "providerconfig-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	var binding *unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "ValidatingAdmissionPolicyBinding" {
			binding = obj
		}
	}
	if binding == nil {
		t.Fatal("the policy file has no binding")
	}
	if err := kc(platform).Delete(ctx, binding.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "a foreign secretRef.namespace accepted without the binding", func() (bool, string) {
		err := acme.Create(ctx, pc("legacy", "team-a", "other"))
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err.Error()
		}
		return true, ""
	})
	if err := kc(platform).Create(ctx, binding.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	refused(acme, "root:orgs:acme, the binding back")
	err = acme.Create(ctx, pc("foreign", "team-a", "kube-system"))
	t.Logf("kcp's answer to a foreign secretRef.namespace: %v", err)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'kubeopera-providerconfig-secret-namespace'") {
		t.Errorf("want the policy's refusal, got %v", err)
	}
	for name, ns := range map[string]string{"own": "team-a", "implicit": ""} {
		if err := acme.Create(ctx, pc(name, "team-a", ns)); err != nil {
			t.Errorf("ProviderConfig with secretRef.namespace %q refused: %v", ns, err)
		}
	}
	// UPDATE: moving a good object to a foreign namespace is refused; a stored foreign namespace
	// (created before the policy) may stay, so finalizers can still be removed, but not change.
	own := &platformv1alpha1.ProviderConfig{}
	if err := acme.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "own"}, own); err != nil {
		t.Fatal(err)
	}
	own.Spec.Credentials.SecretRef.Namespace = "other"
	if err := acme.Update(ctx, own); !apierrors.IsInvalid(err) {
		t.Errorf("update to a foreign namespace: want Invalid, got %v", err)
	}
	legacy := &platformv1alpha1.ProviderConfig{}
	if err := acme.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "legacy"}, legacy); err != nil {
		t.Fatal(err)
	}
	legacy.Finalizers = []string{"kubeopera.io/test"}
	if err := acme.Update(ctx, legacy); err != nil {
		t.Errorf("update keeping a stored foreign namespace refused: %v", err)
	}
	legacy.Finalizers = nil
	if err := acme.Update(ctx, legacy); err != nil {
		t.Errorf("finalizer removal on a stored foreign namespace refused: %v", err)
	}
	legacy.Spec.Credentials.SecretRef.Namespace = "kube-system"
	if err := acme.Update(ctx, legacy); !apierrors.IsInvalid(err) {
		t.Errorf("update changing a stored foreign namespace: want Invalid, got %v", err)
	}

	// (b) and (c): schema rules, tried on a CRD in a scratch workspace (same CEL code as an
	// APIResourceSchema: k8s.io/apiextensions-apiserver pkg/apiserver/schema/cel).
	if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root:orgs", "scratch", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	scratch := kc("root:orgs:scratch")
	err = scratch.Create(ctx, refCRD("metanamespaces", "self.spec.secretRef.namespace == self.metadata.namespace", false))
	t.Logf("(b) kcp's answer to a schema rule reading metadata.namespace: %v", err)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("(b) want the CRD refused for its rule, got %v", err)
	}
	if err := scratch.Create(ctx, refCRD("emptynamespaces", "!has(self.__namespace__) || self.__namespace__ == ''", true)); err != nil {
		t.Fatalf("(c) CRD with the empty-namespace rule refused: %v", err)
	}
	obj := func(name, ns string) *unstructured.Unstructured {
		ref := map[string]any{"name": "otc-creds"}
		if ns != "" {
			ref["namespace"] = ns
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.kubeopera.io/v1", "kind": "Emptynamespace",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec":     map[string]any{"secretRef": ref},
		}}
		return u
	}
	framework.Eventually(t, time.Minute, "(c) an object with an empty secretRef.namespace accepted", func() (bool, string) {
		if err := scratch.Create(ctx, obj("implicit", ""), dryRun...); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	for _, ns := range []string{"other", "default"} {
		err := scratch.Create(ctx, obj("explicit", ns), dryRun...)
		t.Logf("(c) secretRef.namespace %q: %v", ns, err)
		if !apierrors.IsInvalid(err) {
			t.Errorf("(c) secretRef.namespace %q: want Invalid, got %v", ns, err)
		}
	}
}

// refCRD is a namespaced CRD test.kubeopera.io/v1 <plural> whose spec.secretRef has an optional
// namespace; rule is a CEL rule on the root (onRef false) or on secretRef (onRef true).
func refCRD(plural, rule string, onRef bool) *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr(int64(63))}
	ref := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str, "namespace": str}}
	root := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"secretRef": ref}},
	}}
	rules := apiextensionsv1.ValidationRules{{Rule: rule, Message: "secretRef.namespace must be empty"}}
	if onRef {
		ref.XValidations = rules
		root.Properties["spec"].Properties["secretRef"] = ref
	} else {
		root.XValidations = rules
	}
	kind := strings.ToUpper(plural[:1]) + strings.TrimSuffix(plural[1:], "s")
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".test.kubeopera.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "test.kubeopera.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }
