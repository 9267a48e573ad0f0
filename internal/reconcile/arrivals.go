package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/kubeopera/kubeopera/workspaces/apiexport"
)

// DefaultArrivalTimeout bounds one watch for an arrival: a vCluster writes its kubeconfig
// Secret 10 to 60 s after its release is deployed.
const DefaultArrivalTimeout = 5 * time.Minute

// Arrivals watches for single backend objects a step waits for (an object some other component
// writes: a vCluster's kubeconfig Secret), so the object is reconciled the moment one appears
// instead of at its next poll. Each watch is as narrow as the manager's backend RBAC lets it be:
// one namespace, a field selector on the one name. At most Limit run at once; a step that finds
// no slot free polls as before, which stays the fallback in any case (a watch that ends, a
// manager restart). A step uses it as:
//
//	if not there yet { arrivals.Await(s.Request, &corev1.SecretList{}, namespace, name, seen); return Waiting(...) }
type Arrivals struct {
	// Client watches the backend.
	Client client.WithWatch
	// Limit bounds the watches running at once (default 256).
	Limit int
	// Timeout ends a watch whose object did not appear (DefaultArrivalTimeout when zero).
	Timeout time.Duration
	// Done is told the request of each watch whose object appeared.
	Done func(mcreconcile.Request)

	mu       sync.Mutex
	ctx      context.Context
	watching map[arrivalKey]struct{}
	arrived  map[arrivalKey]arrival
}

// arrivalKey names an awaited object: its list's kind, namespace and name.
type arrivalKey struct{ kind, namespace, name string }

// keyOf is the arrivalKey of list's object at namespace/name.
func keyOf(list client.ObjectList, namespace, name string) arrivalKey {
	kind := fmt.Sprintf("%T", list)
	if gvk := list.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
		kind = gvk.String()
	}
	return arrivalKey{kind, namespace, name}
}

// arrival is an object a watch saw arrive, kept for the pass it requeues (Take).
type arrival struct {
	obj client.Object
	at  time.Time
}

// arrivalMaxAge is how long an arrived object is kept for Take: the pass it requeues runs within
// moments; one that does not (a full queue) reads the object itself.
const arrivalMaxAge = 30 * time.Second

// NewArrivals returns the Arrivals of a controller registered with workspaces/apiexport, added
// to mgr, and the Watch that requeues an object when what it waits for arrived (pass it to
// apiexport.NewController).
func NewArrivals(mgr mcmanager.Manager, c client.WithWatch, limit int) (*Arrivals, apiexport.Watch, error) {
	trigger := &apiexport.Trigger{}
	a := &Arrivals{Client: c, Limit: limit, Done: trigger.Enqueue}
	if err := mgr.GetLocalManager().Add(a); err != nil {
		return nil, apiexport.Watch{}, err
	}
	return a, apiexport.Watch{Trigger: trigger}, nil
}

// Start serves watches until ctx ends (manager.Runnable).
func (a *Arrivals) Start(ctx context.Context) error {
	a.mu.Lock()
	a.ctx = ctx
	a.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection: watches run where the reconcilers run.
func (a *Arrivals) NeedLeaderElection() bool { return true }

// Await watches namespace for the object name of list's kind, unless a watch for it runs or no
// slot is free, and tells Done req when it appears, changes or goes: after version seen, the
// version the step read and found wanting; with seen empty (it was not there), when it is there
// (already included). It reports whether a watch runs for it.
func (a *Arrivals) Await(req mcreconcile.Request, list client.ObjectList, namespace, name, seen string) bool {
	if a == nil || a.Client == nil {
		return false
	}
	key := keyOf(list, namespace, name)
	a.mu.Lock()
	if a.watching == nil {
		a.watching = map[arrivalKey]struct{}{}
	}
	if _, ok := a.watching[key]; ok {
		a.mu.Unlock()
		return true
	}
	limit := a.Limit
	if limit <= 0 {
		limit = 256
	}
	if len(a.watching) >= limit || a.ctx == nil {
		a.mu.Unlock()
		return false
	}
	a.watching[key] = struct{}{}
	parent := a.ctx
	a.mu.Unlock()

	timeout := a.Timeout
	if timeout <= 0 {
		timeout = DefaultArrivalTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	w, err := a.Client.Watch(ctx, list, &client.ListOptions{
		Namespace: namespace, FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
		Raw: &metav1.ListOptions{ResourceVersion: seen},
	})
	if err != nil {
		cancel()
		a.forget(key)
		return false
	}
	go func() {
		defer cancel()
		defer w.Stop()
		defer a.forget(key)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					if obj, ok := ev.Object.(client.Object); ok {
						a.keep(key, obj)
					}
				case watch.Deleted:
					// A step waiting for the object to go.
				default:
					continue
				}
				if a.Done != nil {
					a.Done(req)
				}
				return
			}
		}
	}()
	return true
}

// Take returns, once, the object of list's kind a watch saw arrive at namespace/name in the
// last arrivalMaxAge: the pass the arrival requeued works from it instead of reading it again.
func (a *Arrivals) Take(list client.ObjectList, namespace, name string) (client.Object, bool) {
	if a == nil {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := keyOf(list, namespace, name)
	got, ok := a.arrived[key]
	if !ok {
		return nil, false
	}
	delete(a.arrived, key)
	if time.Since(got.at) > arrivalMaxAge {
		return nil, false
	}
	return got.obj, true
}

// keep records obj as arrived at key, dropping the arrivals no pass took in time.
func (a *Arrivals) keep(key arrivalKey, obj client.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.arrived == nil {
		a.arrived = map[arrivalKey]arrival{}
	}
	now := time.Now()
	for k, v := range a.arrived {
		if now.Sub(v.at) > arrivalMaxAge {
			delete(a.arrived, k)
		}
	}
	a.arrived[key] = arrival{obj: obj, at: now}
}

// Watching is how many watches run.
func (a *Arrivals) Watching() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.watching)
}

func (a *Arrivals) forget(key arrivalKey) {
	a.mu.Lock()
	delete(a.watching, key)
	a.mu.Unlock()
}
