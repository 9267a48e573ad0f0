package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/workspaces"
)

// Every latency of the bench is the difference of two instants of this process's monotonic
// clock: when it sent a write, and when a watch of its own delivered the object that write led
// to. The watches run for the whole bench, started before the objects they time, and record only
// the first time they see each object; nothing is polled.

var (
	namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	tenantsGVR    = kov1alpha1.GroupVersion.WithResource("tenants")
)

// seen records the first time each key was observed and wakes whoever waits for it.
type seen struct {
	mu    sync.Mutex
	at    map[string]time.Time
	waits map[string]chan struct{}
}

func newSeen() *seen {
	return &seen{at: map[string]time.Time{}, waits: map[string]chan struct{}{}}
}

// mark records key at t unless it was seen before.
func (s *seen) mark(key string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[key]; ok {
		return
	}
	s.at[key] = t
	if ch, ok := s.waits[key]; ok {
		close(ch)
		delete(s.waits, key)
	}
}

// get returns when key was first seen.
func (s *seen) get(key string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[key]
	return t, ok
}

// wait returns when key was first seen, waiting for it until ctx ends.
func (s *seen) wait(ctx context.Context, key string) (time.Time, error) {
	s.mu.Lock()
	if t, ok := s.at[key]; ok {
		s.mu.Unlock()
		return t, nil
	}
	ch, ok := s.waits[key]
	if !ok {
		ch = make(chan struct{})
		s.waits[key] = ch
	}
	s.mu.Unlock()
	select {
	case <-ch:
		t, _ := s.get(key)
		return t, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("%s not seen: %w", key, ctx.Err())
	}
}

// eventStore is a cache.ReflectorStore that keeps nothing: it hands each object the reflector
// delivers to fn with the instant it arrived, listed saying whether it came from a (re)list rather
// than a watch event. A reflector gives list, watch, re-watch from the last resourceVersion and
// relist after an expired one without an informer's cache, whose ns/name keys would also merge
// the same-named Tenants of different workspaces.
type eventStore struct {
	fn     func(obj any, at time.Time, listed bool)
	synced chan struct{}
	once   sync.Once
}

func newEventStore(fn func(obj any, at time.Time, listed bool)) *eventStore {
	return &eventStore{fn: fn, synced: make(chan struct{})}
}

func (s *eventStore) Add(obj any) error    { s.fn(obj, time.Now(), false); return nil }
func (s *eventStore) Update(obj any) error { s.fn(obj, time.Now(), false); return nil }
func (s *eventStore) Delete(any) error     { return nil }
func (s *eventStore) Resync() error        { return nil }
func (s *eventStore) Replace(objs []any, _ string) error {
	now := time.Now()
	for _, o := range objs {
		s.fn(o, now, true)
	}
	s.once.Do(func() { close(s.synced) })
	return nil
}

// listWatch is a cache.ListWatch that declines the streaming watch-list: with it the reflector
// gathers the initial objects in a temporary store keyed by namespace/name, which would keep one
// of the same-named Tenants of different workspaces (seen through the wildcard view).
type listWatch struct{ *cache.ListWatch }

func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// runReflector runs a reflector of lw into store until ctx ends and returns once it listed.
func runReflector(ctx context.Context, name string, lw *cache.ListWatch, expected runtime.Object, store *eventStore) error {
	r := cache.NewReflectorWithOptions(listWatch{lw}, expected, store, cache.ReflectorOptions{Name: name})
	go r.RunWithContext(ctx)
	select {
	case <-store.synced:
		return nil
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("the %s watch did not list within 2m", name)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// metadataListWatch lists and watches the metadata of a resource in every namespace.
func metadataListWatch(c metadata.Interface, gvr schema.GroupVersionResource, labelSelector string) *cache.ListWatch {
	r := c.Resource(gvr)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = labelSelector
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = labelSelector
			return r.Watch(ctx, o)
		},
	}
}

// backendWatch times what the manager creates on the backend, with the admin's view.
type backendWatch struct {
	// namespaces: namespace name -> first seen.
	namespaces *seen
	// releases: <storage namespace>/<release> -> first storage Secret of the release seen (Helm writes
	// it, status pending-install, before it creates the chart's objects).
	releases *seen
	// deployed: <storage namespace>/<release> -> first storage Secret labelled status=deployed (Helm
	// marks the release deployed after it created the chart's objects).
	deployed *seen
}

// watchBackend starts the backend watches: one of namespaces, one of Helm's storage Secrets.
func watchBackend(ctx context.Context, admin *rest.Config) (*backendWatch, error) {
	mc, err := metadata.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	w := &backendWatch{namespaces: newSeen(), releases: newSeen(), deployed: newSeen()}
	nsStore := newEventStore(func(obj any, at time.Time, _ bool) {
		if m, ok := obj.(metav1.Object); ok {
			w.namespaces.mark(m.GetName(), at)
		}
	})
	if err := runReflector(ctx, "backend namespaces", metadataListWatch(mc, namespacesGVR, ""), &metav1.PartialObjectMetadata{}, nsStore); err != nil {
		return nil, err
	}
	// Helm's Secret storage driver labels every release record owner=helm, name=<release>,
	// status=<status>, version=<revision> (helm.sh/helm/v4 pkg/storage/driver/secrets.go).
	relStore := newEventStore(func(obj any, at time.Time, _ bool) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		key := m.GetNamespace() + "/" + m.GetLabels()["name"]
		w.releases.mark(key, at)
		if m.GetLabels()["status"] == "deployed" {
			w.deployed.mark(key, at)
		}
	})
	if err := runReflector(ctx, "Helm release Secrets", metadataListWatch(mc, secretsGVR, "owner=helm"), &metav1.PartialObjectMetadata{}, relStore); err != nil {
		return nil, err
	}
	return w, nil
}

// tenantKey names a Tenant across workspaces: <logical cluster>/<namespace>/<name>.
func tenantKey(logicalCluster, namespace, name string) string {
	return logicalCluster + "/" + namespace + "/" + name
}

// clusterAnnotation is where kcp names an object's logical cluster in a wildcard view.
const clusterAnnotation = "kcp.io/cluster"

// tenantWatch times Tenants in kcp: a watch of every workspace's Tenants through the kubeopera.io
// export's virtual workspace wildcard view, the way the manager watches them.
type tenantWatch struct {
	// ready: tenantKey -> first seen with condition Ready=True.
	ready *seen
	mu    sync.Mutex
	// state: tenantKey -> the last phase and message seen, to say why a Tenant is not Ready.
	state map[string]string
}

// wildcardTenants returns the list-watch of Tenants of every workspace behind one virtual
// workspace URL of the export.
func wildcardTenants(cfg *rest.Config, vwURL string) (*cache.ListWatch, error) {
	c := rest.CopyConfig(cfg)
	c.Host = strings.TrimRight(vwURL, "/") + "/clusters/*"
	dc, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	r := dc.Resource(tenantsGVR)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return r.Watch(ctx, o)
		},
	}, nil
}

// watchTenants starts one wildcard Tenant watch per virtual workspace URL of the export.
func watchTenants(ctx context.Context, kcpAdmin *rest.Config, vwURLs []string) (*tenantWatch, error) {
	w := &tenantWatch{ready: newSeen(), state: map[string]string{}}
	for i, u := range vwURLs {
		lw, err := wildcardTenants(kcpAdmin, u)
		if err != nil {
			return nil, err
		}
		store := newEventStore(func(obj any, at time.Time, _ bool) {
			t, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return
			}
			key := tenantKey(t.GetAnnotations()[clusterAnnotation], t.GetNamespace(), t.GetName())
			phase, _, _ := unstructured.NestedString(t.Object, "status", "phase")
			msg, _, _ := unstructured.NestedString(t.Object, "status", "message")
			w.mu.Lock()
			w.state[key] = fmt.Sprintf("phase %q: %s", phase, msg)
			w.mu.Unlock()
			if readyTrue(t) {
				w.ready.mark(key, at)
			}
		})
		if err := runReflector(ctx, fmt.Sprintf("kcp Tenants (%d)", i), lw, &unstructured.Unstructured{}, store); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (w *tenantWatch) stateOf(key string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.state[key]; ok {
		return s
	}
	return "never seen"
}

// readyTrue reports whether a Tenant's condition Ready is True.
func readyTrue(t *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(t.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == kov1alpha1.ReadyCondition && m["status"] == string(metav1.ConditionTrue) {
			return true
		}
	}
	return false
}

// floorClient is the floor: the least any controller can do for a Tenant. It runs beside the
// manager, on the same Tenants at the same time (the same rate, load, window and sample size):
// it watches Tenants the way the manager does (the export's wildcard view, one watch per
// virtual workspace URL) and, for each new Tenant, creates one backend namespace of its own
// (floorNamespace: named apart from the manager's, labelled and annotated as the manager's are)
// with one request, right away and concurrently, as the manager's backend identity and with
// the manager's backend rate limits. Nothing else: no admission, no cache, no Helm.
type floorClient struct {
	backend kubernetes.Interface
	mu      sync.Mutex
	done    map[string]bool
	errs    []error
	wg      sync.WaitGroup
}

// floorNamespace is the floor's namespace for Tenant tenantName of workspace lc.
func floorNamespace(lc, tenantName string) string {
	return workspaces.Namespace(lc) + "-floor-" + tenantName
}

// startFloorClient starts the floor client; it stops when ctx ends. backend is the manager's
// backend identity with its rate limits.
func startFloorClient(ctx context.Context, kcpAdmin, backend *rest.Config, vwURLs []string) (*floorClient, error) {
	cs, err := kubernetes.NewForConfig(backend)
	if err != nil {
		return nil, err
	}
	f := &floorClient{backend: cs, done: map[string]bool{}}
	for i, u := range vwURLs {
		lw, err := wildcardTenants(kcpAdmin, u)
		if err != nil {
			return nil, err
		}
		store := newEventStore(func(obj any, _ time.Time, _ bool) {
			if t, ok := obj.(*unstructured.Unstructured); ok {
				f.handle(ctx, t)
			}
		})
		if err := runReflector(ctx, fmt.Sprintf("floor Tenants (%d)", i), lw, &unstructured.Unstructured{}, store); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// handle creates t's backend namespace once, in its own goroutine so the watch never waits.
func (f *floorClient) handle(ctx context.Context, t *unstructured.Unstructured) {
	tenantName, _, _ := unstructured.NestedString(t.Object, "spec", "tenantName")
	lc := t.GetAnnotations()[clusterAnnotation]
	name := floorNamespace(lc, tenantName)
	f.mu.Lock()
	if f.done[name] {
		f.mu.Unlock()
		return
	}
	f.done[name] = true
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{workspaces.FingerprintLabel: workspaces.Fingerprint(lc)},
			Annotations: map[string]string{workspaces.LogicalClusterAnnotation: lc},
		}}
		if _, err := f.backend.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			f.mu.Lock()
			f.errs = append(f.errs, fmt.Errorf("floor client failed to create namespace %s: %w", name, err))
			f.mu.Unlock()
		}
	}()
}

// wait waits for the namespace creations started so far and returns their errors.
func (f *floorClient) wait() []error {
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs
}
