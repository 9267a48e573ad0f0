package helm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOneOperationPerNamespace: 16 goroutines install, observe and uninstall
// releases, most of them in one namespace, some in two others. An
// instrumented hook proves that no two operations ever ran at once in one
// namespace, Uninstall included (it used to drop the namespace's lock while
// others waited on it), and the lock set is empty at the end.
func TestOneOperationPerNamespace(t *testing.T) {
	c, busy := setup(t)
	namespaces := []string{busy}
	for range 2 {
		ns, err := kube.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "helm-test-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		namespaces = append(namespaces, ns.Name)
	}

	var mu sync.Mutex
	active := map[string]*atomic.Int32{}
	for _, ns := range namespaces {
		active[ns] = new(atomic.Int32)
	}
	var overlaps, ops atomic.Int32
	c.inNamespace = func(namespace string) func() {
		mu.Lock()
		n := active[namespace]
		mu.Unlock()
		if n.Add(1) != 1 {
			overlaps.Add(1)
		}
		ops.Add(1)
		time.Sleep(time.Millisecond) // widen the window an overlap would show in
		return func() { n.Add(-1) }
	}

	const goroutines, rounds = 16, 2
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := busy // 12 of 16 in one namespace
			if g >= 12 {
				ns = namespaces[1+g%2]
			}
			name := fmt.Sprintf("r%d", g%3) // releases shared between goroutines
			for range rounds {
				if _, err := c.InstallOrUpgrade(ctx, Release{Namespace: ns, Name: name}, nil); err != nil {
					t.Errorf("InstallOrUpgrade %s/%s: %v", ns, name, err)
				}
				if _, err := c.Observe(ctx, Release{Namespace: ns, Name: name}, nil); err != nil {
					t.Errorf("Observe %s/%s: %v", ns, name, err)
				}
				if err := c.Uninstall(ctx, Release{Namespace: ns, Name: name}); err != nil {
					t.Errorf("Uninstall %s/%s: %v", ns, name, err)
				}
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d operations ran while another held the same namespace", n)
	}
	if n := ops.Load(); n != goroutines*rounds*3 {
		t.Errorf("%d operations ran, want %d", n, goroutines*rounds*3)
	}
	if n := c.namespaces.len(); n != 0 {
		t.Errorf("%d namespace locks left, want none", n)
	}

	// Every operation's Helm clients share one connection pool.
	a, _ := c.getter.forNamespace(namespaces[0]).ToRESTConfig()
	b, _ := c.getter.forNamespace(namespaces[1]).ToRESTConfig()
	if a.Transport == nil || a.Transport != b.Transport {
		t.Error("namespaces do not share the backend's transport")
	}
}
