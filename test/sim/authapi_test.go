package sim_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/reconcile"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/authapi"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

// TestAuthAPIBootstrapThroughTheServiceProxy: authapi.Bootstrap reaches the AuthAPI actor through
// a real kube-apiserver's service proxy, once per call, with the key read from the target, and
// every way it can fail is typed as the controller needs it.
func TestAuthAPIBootstrapThroughTheServiceProxy(t *testing.T) {
	b := framework.StartBackend(t)
	cs := kubernetes.NewForConfigOrDie(b.Config)
	ctx := t.Context()
	opts := authapi.DefaultOptions()
	password, err := authapi.GeneratePassword()
	if err != nil {
		t.Fatal(err)
	}
	admin := authapi.Admin{Email: "admin@acme.com", Username: "admin", Password: password}

	noSecret := func(stage string) {
		t.Helper()
		err := authapi.Bootstrap(ctx, cs, opts, admin)
		if !errors.Is(err, authapi.ErrNotInstalled) || !authapi.IsTransient(err) ||
			!strings.Contains(err.Error(), "authapi-secrets not found in namespace kubeopera (is the platform installed?)") {
			t.Errorf("%s: err = %v, want authapi-secrets not found, transient", stage, err)
		}
	}
	noSecret("no namespace")

	// What Flux applies from the tree.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeopera"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	noSecret("no Secret")
	if _, err := cs.CoreV1().Services("kubeopera").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "authapi"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "authapi"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromString("http")}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Secret without its key, then with a key before any Pod serves it.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "authapi-secrets", Namespace: "kubeopera"}, Data: map[string][]byte{"OTHER": []byte("x")}}
	if secret, err = cs.CoreV1().Secrets("kubeopera").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := authapi.Bootstrap(ctx, cs, opts, admin); !errors.Is(err, authapi.ErrNotInstalled) || !strings.Contains(err.Error(), "has no INTERNAL_API_KEY") {
		t.Errorf("no key: err = %v", err)
	}
	const presetKey = "preset-internal-key-0123456789"
	secret.Data["INTERNAL_API_KEY"] = []byte(presetKey)
	if _, err := cs.CoreV1().Secrets("kubeopera").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = authapi.Bootstrap(ctx, cs, opts, admin)
	if !errors.Is(err, authapi.ErrNotInstalled) || !authapi.IsTransient(err) || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("no endpoints: err = %v, want a transient 404 from the API server", err)
	}
	assertNoSecrets(t, err, password, presetKey)

	actor := &sim.AuthAPI{Target: b.Config}
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- actor.Run(runCtx) }()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("AuthAPI.Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-actor.Ready():
	case err := <-ran:
		t.Fatalf("AuthAPI.Run: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the AuthAPI actor is not ready after a minute")
	}
	if actor.Key() != presetKey {
		t.Errorf("the actor replaced the unsealed key")
	}
	if strings.HasPrefix(actor.Addr(), "127.") {
		t.Errorf("the actor serves on loopback %s", actor.Addr())
	}
	if os.Geteuid() == 0 && !strings.HasPrefix(actor.Addr(), "10.244.") {
		t.Errorf("as root the actor serves on %s, not on an address of the pod network (its own network namespace)", actor.Addr())
	}

	if err := authapi.Bootstrap(ctx, cs, opts, admin); err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	if n := actor.Calls(); n != 1 {
		t.Errorf("calls = %d after one Bootstrap, want 1", n)
	}
	if email, user := actor.Last(); email != "admin@acme.com" || user != "admin" {
		t.Errorf("last account = %s/%s", email, user)
	}
	if err := authapi.Bootstrap(ctx, cs, opts, admin); err != nil {
		t.Fatalf("second Bootstrap: %v", err)
	}
	if n := actor.Calls(); n != 2 {
		t.Errorf("calls = %d after two Bootstraps, want 2", n)
	}

	// authapi's own 4xx is terminal and carries its message.
	err = authapi.Bootstrap(ctx, cs, opts, authapi.Admin{Email: "not-an-email", Username: "admin", Password: password})
	if !reconcile.IsTerminal(err) || !strings.Contains(err.Error(), "HTTP 400") || !strings.Contains(err.Error(), "not an email address") {
		t.Errorf("bad email: err = %v, want a terminal 400 with authapi's message", err)
	}

	// A key that is not authapi's: refused, terminal, counted as refused and not as a call.
	secret, err = cs.CoreV1().Secrets("kubeopera").Get(ctx, "authapi-secrets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const wrongKey = "wrong-internal-key-9876543210"
	secret.Data["INTERNAL_API_KEY"] = []byte(wrongKey)
	if secret, err = cs.CoreV1().Secrets("kubeopera").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = authapi.Bootstrap(ctx, cs, opts, admin)
	if !errors.Is(err, authapi.ErrRefused) || !reconcile.IsTerminal(err) || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("wrong key: err = %v, want a terminal ErrRefused", err)
	}
	assertNoSecrets(t, err, password, wrongKey)
	if actor.Calls() != 2 || actor.Refused() != 1 {
		t.Errorf("calls = %d, refused = %d; want 2 and 1", actor.Calls(), actor.Refused())
	}

	// Options point elsewhere: nothing there.
	other := opts
	other.Namespace = "elsewhere"
	if err := authapi.Bootstrap(ctx, cs, other, admin); !errors.Is(err, authapi.ErrNotInstalled) || !strings.Contains(err.Error(), "namespace elsewhere") {
		t.Errorf("other namespace: err = %v", err)
	}

	// authapi's Pod stops answering (its Endpoints stay): the proxy cannot reach it, transient.
	secret.Data["INTERNAL_API_KEY"] = []byte(presetKey)
	if _, err := cs.CoreV1().Secrets("kubeopera").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop()
	err = authapi.Bootstrap(ctx, cs, opts, admin)
	if !authapi.IsTransient(err) || err == nil {
		t.Errorf("authapi down: err = %v, want transient", err)
	}
	t.Logf("authapi down: %v", err)
	assertNoSecrets(t, err, password, presetKey)
}

func assertNoSecrets(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q carries a secret", err)
		}
	}
}
