// Package ledger counts reservations in a rolling window, in one ConfigMap on the backend: e.g.
// the provisioning runs a workspace started in the last hour. The ConfigMap outlives the objects
// that reserve (it is the workspace's, in its backend namespace), so deleting and re-creating them
// does not reset the count; updates are guarded by its resourceVersion, so passes reserving at
// once cannot exceed the limit between them.
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Ledger is one ConfigMap of reservations.
type Ledger struct {
	// Reader reads the ConfigMap uncached; Client writes it.
	Reader client.Reader
	Client client.Client
	// Namespace and Name are the ConfigMap's; Key is its data key (a JSON list of Entry, oldest
	// first); Labels label it when it is created.
	Namespace, Name, Key string
	Labels               map[string]string
	// Window is how long a reservation counts.
	Window time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Entry is one reservation.
type Entry struct {
	// At is when it was made.
	At time.Time `json:"at"`
	// Key names what was reserved: a reservation made again under the same key is not counted
	// twice.
	Key string `json:"key"`
}

// Verdict is whether a reservation fits the limit: Count are the window's other reservations
// and, when it does not fit, Next is when it will.
type Verdict struct {
	Fits  bool
	Count int
	Next  time.Time
}

// Check says whether a reservation of key fits limit. It writes nothing. A ledger that does not
// parse is an error: the limit is never lifted by a broken record.
func (l Ledger) Check(ctx context.Context, key string, limit int) (Verdict, error) {
	_, window, err := l.read(ctx)
	if err != nil {
		return Verdict{}, err
	}
	return Fits(window, key, limit, l.Window), nil
}

// Reserve records key when it fits limit (and is not recorded yet) and returns the verdict. A
// conflicting write (another reservation meanwhile) is an error to retry: the next try counts
// again.
func (l Ledger) Reserve(ctx context.Context, key string, limit int) (Verdict, error) {
	cm, window, err := l.read(ctx)
	if err != nil {
		return Verdict{}, err
	}
	v := Fits(window, key, limit, l.Window)
	if !v.Fits {
		return v, nil
	}
	for _, e := range window {
		if e.Key == key {
			return v, nil
		}
	}
	raw, err := json.Marshal(append(window, Entry{At: l.now().UTC(), Key: key}))
	if err != nil {
		return Verdict{}, fmt.Errorf("failed to encode ledger %s/%s: %w", l.Namespace, l.Name, err)
	}
	if cm == nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name, Labels: l.Labels}}
		cm.Data = map[string]string{l.Key: string(raw)}
		err = l.Client.Create(ctx, cm)
	} else {
		cm.Data = map[string]string{l.Key: string(raw)}
		// Update carries the resourceVersion read above: optimistic concurrency.
		err = l.Client.Update(ctx, cm)
	}
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return Verdict{}, fmt.Errorf("ledger %s/%s changed meanwhile; counting again: %w", l.Namespace, l.Name, err)
	case err != nil:
		return Verdict{}, fmt.Errorf("failed to record in ledger %s/%s: %w", l.Namespace, l.Name, err)
	}
	return v, nil
}

// read reads the ledger (nil when there is none yet) and its entries of the window, oldest
// first (Recent; older ones are dropped when it is next written).
func (l Ledger) read(ctx context.Context) (*corev1.ConfigMap, []Entry, error) {
	cm := &corev1.ConfigMap{}
	err := l.Reader.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("failed to read ledger %s/%s: %w", l.Namespace, l.Name, err)
	}
	var all []Entry
	if raw := cm.Data[l.Key]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &all); err != nil {
			return nil, nil, fmt.Errorf("ledger %s/%s does not parse: %w", l.Namespace, l.Name, err)
		}
	}
	return cm, Recent(all, l.now(), l.Window), nil
}

func (l Ledger) now() time.Time {
	if l.Now == nil {
		return time.Now()
	}
	return l.Now()
}

// Recent are the entries of the window before now (and any a clock ahead of this one wrote),
// oldest first.
func Recent(entries []Entry, now time.Time, window time.Duration) []Entry {
	since := now.Add(-window)
	var out []Entry
	for _, e := range entries {
		if e.At.After(since) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// Fits says whether a reservation of key fits limit in the window's entries (Recent): those other
// than key's are fewer than limit. When it does not fit, Next is when it will: the entry that must
// drop out first, plus the window.
func Fits(entries []Entry, key string, limit int, window time.Duration) Verdict {
	var counted []Entry
	for _, e := range entries {
		if e.Key != key {
			counted = append(counted, e)
		}
	}
	if len(counted) < limit {
		return Verdict{Fits: true, Count: len(counted)}
	}
	return Verdict{Count: len(counted), Next: counted[len(counted)-limit].At.Add(window)}
}
