package syncer

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/test/framework"
)

// TestCopyInAndDeliver runs against two real kube-apiservers: one plays the tenant's workspace,
// the other the backend.
func TestCopyInAndDeliver(t *testing.T) {
	ctx := context.Background()
	wsCluster := framework.StartCluster(t, framework.ClusterOptions{})
	backendCluster := framework.StartCluster(t, framework.ClusterOptions{})
	scheme := clientScheme(t)
	ws, err := client.New(wsCluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	backend, err := client.New(backendCluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if err := ws.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := backend.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcp-0123456789ab"}}); err != nil {
		t.Fatal(err)
	}
	// The same Secret name exists in two namespaces; only the CR's own may ever be read. Both are
	// shared with the platform; "private" is not.
	shared := map[string]string{AccessLabel: AccessLabelValue}
	for ns, v := range map[string]string{"team-a": "a-secret-value", "team-b": "b-secret-value"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds", Labels: shared}, Data: map[string][]byte{"credentials": []byte(v), "other": []byte("x")}}
		if err := ws.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	private := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "private"}, Data: map[string][]byte{"credentials": []byte("private-value")}}
	if err := ws.Create(ctx, private); err != nil {
		t.Fatal(err)
	}
	// The owner of delivered Secrets: the product uses the CR; any object does for syncer.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "t"}}
	if err := ws.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}

	t.Run("copy in reads only the CR's own namespace", func(t *testing.T) {
		if err := CopyIn(ctx, ws, backend, "lc-a", owner, "creds", "kcp-0123456789ab", "team-a-creds", "credentials"); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Secret{}
		if err := backend.Get(ctx, client.ObjectKey{Namespace: "kcp-0123456789ab", Name: "team-a-creds"}, got); err != nil {
			t.Fatal(err)
		}
		if string(got.Data["credentials"]) != "a-secret-value" || len(got.Data) != 1 {
			t.Errorf("copied data = %v, want only team-a's credentials", got.Data)
		}
		if got.Annotations[SourceNamespaceAnnotation] != "team-a" || got.Annotations[SourceClusterAnnotation] != "lc-a" {
			t.Errorf("origin annotations = %v", got.Annotations)
		}
	})

	t.Run("missing secret and missing key are clear errors without data", func(t *testing.T) {
		err := CopyIn(ctx, ws, backend, "lc-a", owner, "nope", "kcp-0123456789ab", "x")
		var missing *MissingSecretError
		if !errors.As(err, &missing) || err.Error() != "secret team-a/nope not found or not labelled kubeopera.io/platform-access=true; add the label so the platform may read it" {
			t.Fatalf("got %v", err)
		}
		err = CopyIn(ctx, ws, backend, "lc-a", owner, "creds", "kcp-0123456789ab", "x", "kubeconfig")
		if !errors.As(err, &missing) || !strings.Contains(err.Error(), `has no key "kubeconfig"`) || strings.Contains(err.Error(), "a-secret-value") {
			t.Fatalf("got %v", err)
		}
	})

	// Through kcp's virtual workspace an unlabelled Secret is hidden (a MissingSecretError, see
	// claims_kcp_test.go); where it is visible (a matchAll binding, a plain apiserver) it is refused.
	t.Run("an unlabelled secret is not read", func(t *testing.T) {
		err := CopyIn(ctx, ws, backend, "lc-a", owner, "private", "kcp-0123456789ab", "private")
		var unshared *UnsharedSecretError
		if !errors.As(err, &unshared) || strings.Contains(err.Error(), "private-value") {
			t.Fatalf("got %v", err)
		}
		if err := backend.Get(ctx, client.ObjectKey{Namespace: "kcp-0123456789ab", Name: "private"}, &corev1.Secret{}); err == nil {
			t.Fatal("an unlabelled Secret was copied to the backend")
		}
	})

	t.Run("deliver is owner-referenced, updates in place and undeliver removes it", func(t *testing.T) {
		gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
		labels := map[string]string{"app.kubernetes.io/managed-by": "tenant-controller"}
		if err := Deliver(ctx, ws, owner, gvk, "result", labels, map[string][]byte{"kubeconfig": []byte("v1")}); err != nil {
			t.Fatal(err)
		}
		if err := Deliver(ctx, ws, owner, gvk, "result", labels, map[string][]byte{"kubeconfig": []byte("v2")}); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Secret{}
		if err := ws.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "result"}, got); err != nil {
			t.Fatal(err)
		}
		if string(got.Data["kubeconfig"]) != "v2" || !metav1.IsControlledBy(got, owner) || got.Labels["app.kubernetes.io/managed-by"] != "tenant-controller" || !Shared(got) {
			t.Errorf("delivered secret = %+v", got.ObjectMeta)
		}
		if _, ok := labels[AccessLabel]; ok {
			t.Error("Deliver changed the caller's labels map")
		}
		// A Secret the tenant made themselves is never overwritten.
		err := Deliver(ctx, ws, owner, gvk, "creds", labels, map[string][]byte{"kubeconfig": []byte("v1")})
		var conflict *DeliveryConflictError
		if !errors.As(err, &conflict) || conflict.Unshared || err.Error() != "secret team-a/creds already exists and is not owned by ConfigMap team-a/t; refusing to overwrite it" {
			t.Errorf("want a refusal to overwrite a foreign Secret, got %v", err)
		}
		// Also when the delivery is a first one (created before it is read).
		err = DeliverNew(ctx, ws, owner, gvk, "creds", labels, map[string][]byte{"kubeconfig": []byte("v1")})
		if !errors.As(err, &conflict) || conflict.Unshared {
			t.Errorf("first delivery: want a refusal to overwrite a foreign Secret, got %v", err)
		}
		creds := &corev1.Secret{}
		if err := ws.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "creds"}, creds); err != nil || string(creds.Data["kubeconfig"]) == "v1" {
			t.Errorf("the tenant's own Secret was overwritten: %v", err)
		}
		if err := Undeliver(ctx, ws, owner, "result"); err != nil {
			t.Fatal(err)
		}
		if err := Undeliver(ctx, ws, owner, "creds"); err != nil {
			t.Fatal(err)
		}
		if err := ws.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "creds"}, &corev1.Secret{}); err != nil {
			t.Errorf("undeliver removed a Secret it does not own: %v", err)
		}
		if err := ws.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "result"}, &corev1.Secret{}); err == nil {
			t.Error("delivered Secret still there")
		}
	})
}
