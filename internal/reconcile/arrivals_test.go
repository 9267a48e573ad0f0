package reconcile_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/test/framework"
)

// A step waiting for a Secret another component writes is requeued when the Secret appears, by a
// watch of that one name; the watches are bounded, and a watch ends with its arrival.
func TestArrivals(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	arrived := make(chan mcreconcile.Request, 4)
	a := &reconcile.Arrivals{Client: c, Limit: 1, Done: func(req mcreconcile.Request) { arrived <- req }}
	go func() { _ = a.Start(ctx) }()
	// Another Secret of the namespace, there before any watch.
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unrelated"}}); err != nil {
		t.Fatal(err)
	}
	req := func(name string) mcreconcile.Request {
		return mcreconcile.Request{ClusterName: "ws", Request: ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}}}
	}
	framework.Eventually(t, 10*time.Second, "a watch for Secret kc", func() (bool, string) {
		return a.Await(req("tenant-a"), &corev1.SecretList{}, "default", "kc", ""), "Await refused (not started yet?)"
	})
	if !a.Await(req("tenant-a"), &corev1.SecretList{}, "default", "kc", "") {
		t.Error("a second Await of the same object is not told that its watch runs")
	}
	if a.Await(req("tenant-b"), &corev1.SecretList{}, "default", "other", "") {
		t.Error("a second watch started beyond Limit 1")
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kc"}}); err != nil {
		t.Fatal(err)
	}
	awaitArrival(t, arrived, req("tenant-a"), "the Secret's arrival requeued nothing")
	framework.Eventually(t, 10*time.Second, "the watch ended with the arrival", func() (bool, string) {
		return a.Watching() == 0, "a watch still runs"
	})
	// An object the step read and found wanting arrives when it changes after that version.
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kc"}, sec); err != nil {
		t.Fatal(err)
	}
	if !a.Await(req("tenant-a"), &corev1.SecretList{}, "default", "kc", sec.ResourceVersion) {
		t.Fatal("no watch for the version read")
	}
	sec.Data = map[string][]byte{"config": []byte("written")}
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	awaitArrival(t, arrived, req("tenant-a"), "the Secret's change requeued nothing")
	// The pass it requeues takes the object the watch saw, once, instead of reading it again.
	got, ok := a.Take(&corev1.SecretList{}, "default", "kc")
	if sec, isSecret := got.(*corev1.Secret); !ok || !isSecret || string(sec.Data["config"]) != "written" {
		t.Errorf("Take = %#v, %v; want the Secret as changed", got, ok)
	}
	if _, ok := a.Take(&corev1.SecretList{}, "default", "kc"); ok {
		t.Error("an arrival was taken twice")
	}
	if _, ok := a.Take(&corev1.SecretList{}, "default", "unrelated"); ok {
		t.Error("Take returned an object no watch saw arrive")
	}
	framework.Eventually(t, 10*time.Second, "the watch ended with the change", func() (bool, string) {
		return a.Watching() == 0, "a watch still runs"
	})
	// An object that is there already is an arrival at once.
	if !a.Await(req("tenant-c"), &corev1.SecretList{}, "default", "unrelated", "") {
		t.Fatal("no watch after the slot was freed")
	}
	awaitArrival(t, arrived, req("tenant-c"), "an object already there did not requeue its waiter")
}

// awaitArrival fails the test unless want is requeued within 30 s, saying what.
func awaitArrival(t *testing.T, arrived <-chan mcreconcile.Request, want mcreconcile.Request, what string) {
	t.Helper()
	select {
	case got := <-arrived:
		if got != want {
			t.Errorf("requeued %v, want %v", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
}
