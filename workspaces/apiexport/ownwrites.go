package apiexport

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWriteTTL is how long the manager's write to an object is remembered: far longer than its
// watch event takes to reach the cache, short enough to stay small.
const ownWriteTTL = 30 * time.Second

// ownWrites remembers, for a short while, which versions of workspace objects the manager's own
// writes through a workspace's client (Workspace.Client, Direct) replaced, so a pass never works
// from a copy its own last write replaced (Provider.Read): the cache may still hold it when the
// next pass starts, and a status patch guarded by that resourceVersion would lose the race
// against the manager's own write (a 409 and a retry). Only versions are kept, never objects.
type ownWrites struct {
	mu sync.Mutex
	m  map[types.UID]*replacedVersions
	// swept is when the expired entries were last dropped: at most once per ownWriteTTL, so a
	// burst of writes does not scan the map at every one.
	swept time.Time
}

// replacedVersions are the versions of one object the manager's recent writes replaced.
type replacedVersions struct {
	versions map[string]struct{}
	last     time.Time
}

// record notes that a write turned obj from version before into its current version.
func (w *ownWrites) record(obj client.Object, before string) {
	after, uid := obj.GetResourceVersion(), obj.GetUID()
	if w == nil || uid == "" || before == "" || after == before {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.UID]*replacedVersions{}
	}
	if now.Sub(w.swept) > ownWriteTTL {
		for k, v := range w.m {
			if now.Sub(v.last) > ownWriteTTL {
				delete(w.m, k)
			}
		}
		w.swept = now
	}
	v := w.m[uid]
	if v == nil {
		v = &replacedVersions{versions: map[string]struct{}{}}
		w.m[uid] = v
	}
	v.versions[before] = struct{}{}
	v.last = now
}

// replaced reports whether obj, as a cache returned it, is a version one of the manager's
// recent writes replaced.
func (w *ownWrites) replaced(obj client.Object) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.m[obj.GetUID()]
	if v == nil || time.Since(v.last) > ownWriteTTL {
		return false
	}
	_, ok := v.versions[obj.GetResourceVersion()]
	return ok
}
