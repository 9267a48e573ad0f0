package syncer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/workspaces/bootstrap"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/workspaces"
)

// TestClaimsOnRealKCP proves on a real kcp what the exports' permission claims let the manager's
// identity (kcp's unprivileged "user" with the manager role) reach in a new kubeopera-tenant
// workspace through an export's virtual workspace: the default bindings accept the secrets claim
// with the platform-access label selector; labelled Secrets can be read, created, updated and
// deleted; unlabelled ones are invisible and untouchable; Secrets the manager creates get the
// label; only the verbs syncer and the event recorder use are allowed; and syncer's errors say
// what to do.
func TestClaimsOnRealKCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kcp := framework.StartKCP(t)
	platform := bootstrap.PlatformWorkspace
	if err := bootstrap.Bootstrap(ctx, kcp.Config, platform); err != nil {
		t.Fatal(err)
	}
	if _, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root", "orgs", workspaces.WorkspaceType{}); err != nil {
		t.Fatal(err)
	}
	if err := bootstrap.BindManagerRole(ctx, kcp.Config, platform, "user"); err != nil {
		t.Fatal(err)
	}
	lc, err := workspaces.EnsureWorkspace(ctx, kcp.Config, "root:orgs", "acme", workspaces.TenantWorkspaceTypeIn(platform))
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apisv1alpha2.AddToScheme(scheme)
	tenant, err := client.New(workspaces.ClusterConfig(kcp.Config, "root:orgs:acme"), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	wantSelector := apisv1alpha2.PermissionClaimSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}}}
	wantVerbs := map[string][]string{
		"secrets":              {"get", "create", "update", "delete"},
		"events":               {"create", "patch"},
		"events.events.k8s.io": {"create", "patch"},
		"namespaces":           {"get"},
	}
	t.Run("the default bindings accept the claims with the label selector on secrets", func(t *testing.T) {
		for _, export := range []string{"kubeopera.io", "platform.edgeconnect.eu"} {
			b := boundBinding(ctx, t, tenant, export)
			got := map[string][]string{}
			for _, pc := range b.Spec.PermissionClaims {
				got[pc.String()] = pc.Verbs
				if pc.State != apisv1alpha2.ClaimAccepted {
					t.Errorf("%s: claim %s is %s, want Accepted", export, pc, pc.State)
				}
				want := apisv1alpha2.PermissionClaimSelector{MatchAll: true}
				if pc.Resource == "secrets" {
					want = wantSelector
				}
				if fmt.Sprint(pc.Selector) != fmt.Sprint(want) {
					t.Errorf("%s: claim %s has selector %+v, want %+v", export, pc, pc.Selector, want)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(wantVerbs) {
				t.Errorf("%s: claims %v, want %v", export, got, wantVerbs)
			}
		}
	})

	// The tenant's side: a shared Secret, a private one, and an object that owns what the manager
	// delivers (the product uses the CR; any object of the workspace does for kcp).
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shared", Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}}, Data: map[string][]byte{"credentials": []byte("shared-value")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "private"}, Data: map[string][]byte{"credentials": []byte("private-value")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "owner"}},
	} {
		if err := tenant.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	owner := &corev1.ConfigMap{}
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "owner"}, owner); err != nil {
		t.Fatal(err)
	}
	ownerGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")

	userCfg, err := kcp.ContextConfig("user")
	if err != nil {
		t.Fatal(err)
	}
	vwCfg := virtualWorkspaceConfig(ctx, t, workspaces.ClusterConfig(userCfg, platform), "kubeopera.io", lc)
	vw, err := client.NewWithWatch(vwCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: "team-a", Name: name} }

	t.Run("a labelled secret can be read, created, updated and deleted", func(t *testing.T) {
		s := &corev1.Secret{}
		eventually(t, "shared Secret visible through the virtual workspace", func() error { return vw.Get(ctx, key("shared"), s) })
		s.Data["credentials"] = []byte("rotated")
		if err := vw.Update(ctx, s); err != nil {
			t.Fatalf("update: %v", err)
		}
		c := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "made-by-manager", Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}}}
		if err := vw.Create(ctx, c); err != nil {
			t.Fatalf("create: %v", err)
		}
		if err := vw.Delete(ctx, c); err != nil {
			t.Fatalf("delete: %v", err)
		}
	})

	t.Run("an unlabelled secret can not be read, listed, updated or deleted", func(t *testing.T) {
		err := vw.Get(ctx, key("private"), &corev1.Secret{})
		logStatus(t, "get unlabelled", err)
		if !apierrors.IsNotFound(err) {
			t.Errorf("get: want NotFound, got %v", err)
		}
		cur := &corev1.Secret{}
		if err := tenant.Get(ctx, key("private"), cur); err != nil {
			t.Fatal(err)
		}
		for _, labelled := range []bool{false, true} {
			u := cur.DeepCopy()
			u.Data = map[string][]byte{"credentials": []byte("overwritten")}
			if labelled {
				u.Labels = map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}
			}
			err := vw.Update(ctx, u)
			logStatus(t, fmt.Sprintf("update unlabelled (sending the label: %v)", labelled), err)
			if !apierrors.IsNotFound(err) {
				t.Errorf("update (sending the label: %v): want NotFound, got %v", labelled, err)
			}
		}
		err = vw.Delete(ctx, cur.DeepCopy())
		logStatus(t, "delete unlabelled", err)
		if err == nil {
			t.Error("delete of an unlabelled Secret succeeded")
		}
		err = vw.List(ctx, &corev1.SecretList{}, client.InNamespace("team-a"))
		logStatus(t, "list secrets", err)
		if !apierrors.IsForbidden(err) {
			t.Errorf("list: want Forbidden (no list verb), got %v", err)
		}
		after := &corev1.Secret{}
		if err := tenant.Get(ctx, key("private"), after); err != nil || string(after.Data["credentials"]) != "private-value" || after.Labels[syncer.AccessLabel] != "" {
			t.Errorf("the private Secret changed: %v %v", err, after.Labels)
		}
	})

	t.Run("verbs the manager does not use are refused", func(t *testing.T) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shared"}}
		err := vw.Patch(ctx, s, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`)))
		logStatus(t, "patch labelled secret", err)
		if !apierrors.IsForbidden(err) {
			t.Errorf("patch secret: want Forbidden, got %v", err)
		}
		w, err := vw.Watch(ctx, &corev1.SecretList{}, client.InNamespace("team-a"))
		if w != nil {
			w.Stop()
		}
		logStatus(t, "watch secrets", err)
		if !apierrors.IsForbidden(err) {
			t.Errorf("watch secrets: want Forbidden, got %v", err)
		}
		if err := vw.Get(ctx, client.ObjectKey{Name: "team-a"}, &corev1.Namespace{}); err != nil {
			t.Errorf("get namespace: %v", err)
		}
		err = vw.List(ctx, &corev1.NamespaceList{})
		logStatus(t, "list namespaces", err)
		if !apierrors.IsForbidden(err) {
			t.Errorf("list namespaces: want Forbidden, got %v", err)
		}
	})

	t.Run("a secret created without the label gets it; another value is refused", func(t *testing.T) {
		c := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "created-unlabelled"}}
		err := vw.Create(ctx, c)
		logStatus(t, "create without the label", err)
		if err != nil {
			t.Fatal(err)
		}
		got := &corev1.Secret{}
		if err := tenant.Get(ctx, key("created-unlabelled"), got); err != nil || !syncer.Shared(got) {
			t.Errorf("created Secret labels = %v (%v), want the access label added by kcp", got.Labels, err)
		}
		bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "created-false", Labels: map[string]string{syncer.AccessLabel: "false"}}}
		err = vw.Create(ctx, bad)
		logStatus(t, "create with the label set to false", err)
		if !apierrors.IsForbidden(err) {
			t.Errorf("want Forbidden, got %v", err)
		}
	})

	t.Run("syncer tells a hidden secret and a hidden delivery target apart from success", func(t *testing.T) {
		if s, err := syncer.ReadReferencedSecret(ctx, vw, owner, "shared"); err != nil || string(s.Data["credentials"]) != "rotated" {
			t.Fatalf("read shared: %v", err)
		}
		_, err := syncer.ReadReferencedSecret(ctx, vw, owner, "private")
		var missing *syncer.MissingSecretError
		if !errors.As(err, &missing) {
			t.Fatalf("read private: want a MissingSecretError, got %v", err)
		}
		t.Logf("ReadReferencedSecret(private): %v", err)
		// What Deliver's create meets: kcp refuses it, the hidden Secret is not overwritten.
		err = vw.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "private", Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}}})
		logStatus(t, "create over the unlabelled Secret", err)
		if !apierrors.IsAlreadyExists(err) {
			t.Errorf("create over the unlabelled Secret: want AlreadyExists, got %v", err)
		}
		err = syncer.Deliver(ctx, vw, owner, ownerGVK, "private", nil, map[string][]byte{"kubeconfig": []byte("x")})
		var conflict *syncer.DeliveryConflictError
		if !errors.As(err, &conflict) || !conflict.Unshared {
			t.Fatalf("deliver over the private Secret: want an unshared DeliveryConflictError, got %v", err)
		}
		t.Logf("Deliver(private): %v", err)
		// A first delivery creates before it reads: kcp's AlreadyExists, then a read that finds
		// nothing, say the same.
		err = syncer.DeliverNew(ctx, vw, owner, ownerGVK, "private", nil, map[string][]byte{"kubeconfig": []byte("x")})
		if !errors.As(err, &conflict) || !conflict.Unshared {
			t.Fatalf("first delivery over the private Secret: want an unshared DeliveryConflictError, got %v", err)
		}
		after := &corev1.Secret{}
		if err := tenant.Get(ctx, key("private"), after); err != nil || string(after.Data["credentials"]) != "private-value" {
			t.Errorf("the private Secret changed: %v", err)
		}
	})

	t.Run("delivery works with exactly the claimed verbs", func(t *testing.T) {
		labels := map[string]string{"app.kubernetes.io/managed-by": "kubeopera"}
		// A first delivery (create first), one over it, and a first delivery that finds its own.
		for i, v := range []string{"v1", "v2", "v3"} {
			deliver := syncer.Deliver
			if i != 1 {
				deliver = syncer.DeliverNew
			}
			if err := deliver(ctx, vw, owner, ownerGVK, "result", labels, map[string][]byte{"kubeconfig": []byte(v)}); err != nil {
				t.Fatalf("deliver %s: %v", v, err)
			}
		}
		got := &corev1.Secret{}
		if err := tenant.Get(ctx, key("result"), got); err != nil {
			t.Fatal(err)
		}
		if string(got.Data["kubeconfig"]) != "v3" || !syncer.Shared(got) || !metav1.IsControlledBy(got, owner) {
			t.Errorf("delivered Secret = %+v", got.ObjectMeta)
		}
		if err := syncer.Undeliver(ctx, vw, owner, "result"); err != nil {
			t.Fatal(err)
		}
		if err := tenant.Get(ctx, key("result"), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("undelivered Secret still there: %v", err)
		}
	})

	t.Run("the event recorder's calls are allowed, reading events is not", func(t *testing.T) {
		sink := &events.EventSinkImpl{Interface: eventsv1client.NewForConfigOrDie(vwCfg)}
		now := metav1.NowMicro()
		ev := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: "team-a", Name: "owner.kubeopera-test"},
			EventTime:           now,
			ReportingController: "kubeopera.io/test",
			ReportingInstance:   "kubeopera.io/test-1",
			Action:              "Test",
			Reason:              "Testing",
			Note:                "claims test",
			Type:                corev1.EventTypeNormal,
			Regarding:           corev1.ObjectReference{Kind: "ConfigMap", Namespace: "team-a", Name: "owner", UID: owner.UID, APIVersion: "v1"},
		}
		if _, err := sink.Create(ctx, ev); err != nil {
			t.Fatalf("create events.k8s.io event: %v", err)
		}
		// What tools/events sends for a series.
		if _, err := sink.Patch(ctx, ev, []byte(fmt.Sprintf(`{"series":{"count":2,"lastObservedTime":%q}}`, now.Format(metav1.RFC3339Micro)))); err != nil {
			t.Fatalf("patch events.k8s.io event: %v", err)
		}
		core := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", Name: "owner.kubeopera-core"},
			InvolvedObject: ev.Regarding, Reason: "Testing", Message: "claims test", Type: corev1.EventTypeNormal,
		}
		if err := vw.Create(ctx, core); err != nil {
			t.Fatalf("create core event: %v", err)
		}
		err := vw.Get(ctx, key("owner.kubeopera-core"), &corev1.Event{})
		logStatus(t, "get event", err)
		if !apierrors.IsForbidden(err) {
			t.Errorf("get event: want Forbidden, got %v", err)
		}
		got := &eventsv1.Event{}
		if err := tenant.Get(ctx, key("owner.kubeopera-test"), got); err != nil || got.Series == nil || got.Series.Count != 2 {
			t.Errorf("the tenant's view of the event: %+v, %v", got.Series, err)
		}
	})

	t.Run("the other export's virtual workspace sees the same", func(t *testing.T) {
		cfg := virtualWorkspaceConfig(ctx, t, workspaces.ClusterConfig(userCfg, platform), "platform.edgeconnect.eu", lc)
		other, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "shared Secret through platform.edgeconnect.eu", func() error { return other.Get(ctx, key("shared"), &corev1.Secret{}) })
		if err := other.Get(ctx, key("private"), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("get private: want NotFound, got %v", err)
		}
	})

	t.Run("labelling a secret later shares it", func(t *testing.T) {
		cur := &corev1.Secret{}
		if err := tenant.Get(ctx, key("private"), cur); err != nil {
			t.Fatal(err)
		}
		cur.Labels = map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}
		if err := tenant.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the newly labelled Secret readable by the platform", func() error {
			_, err := syncer.ReadReferencedSecret(ctx, vw, owner, "private")
			return err
		})
	})
}

// boundBinding waits for the workspace's APIBinding to export to be Bound.
func boundBinding(ctx context.Context, t *testing.T, c client.Client, export string) *apisv1alpha2.APIBinding {
	t.Helper()
	var found *apisv1alpha2.APIBinding
	eventually(t, "a bound APIBinding to "+export, func() error {
		list := &apisv1alpha2.APIBindingList{}
		if err := c.List(ctx, list); err != nil {
			return err
		}
		for i := range list.Items {
			b := &list.Items[i]
			if b.Spec.Reference.Export != nil && b.Spec.Reference.Export.Name == export && b.Status.Phase == apisv1alpha2.APIBindingPhaseBound {
				found = b
				return nil
			}
		}
		return fmt.Errorf("none bound among %d", len(list.Items))
	})
	return found
}

// virtualWorkspaceConfig returns platformCfg's identity pointed at logicalCluster through the
// virtual workspace of export (its endpoint slice has the export's name).
func virtualWorkspaceConfig(ctx context.Context, t *testing.T, platformCfg *rest.Config, export, logicalCluster string) *rest.Config {
	t.Helper()
	c, err := client.New(platformCfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var url string
	eventually(t, "an endpoint of "+export, func() error {
		es := &unstructured.Unstructured{}
		es.SetAPIVersion("apis.kcp.io/v1alpha1")
		es.SetKind("APIExportEndpointSlice")
		if err := c.Get(ctx, client.ObjectKey{Name: export}, es); err != nil {
			return err
		}
		eps, _, _ := unstructured.NestedSlice(es.Object, "status", "endpoints")
		if len(eps) == 0 {
			return errors.New("no endpoints yet")
		}
		url, _, _ = unstructured.NestedString(eps[0].(map[string]any), "url")
		return nil
	})
	cfg := rest.CopyConfig(platformCfg)
	cfg.Host = url + "/clusters/" + logicalCluster
	return cfg
}

// eventually waits up to a minute for f to return nil; on timeout it reports f's last error.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	framework.Eventually(t, time.Minute, what, func() (bool, string) {
		if err := f(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// logStatus records what kcp answered, with the HTTP code and reason.
func logStatus(t *testing.T, what string, err error) {
	t.Helper()
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		st := s.Status()
		t.Logf("%s: %d %s: %s", what, st.Code, st.Reason, st.Message)
		return
	}
	t.Logf("%s: %v", what, err)
}
