package helm

import (
	"context"
	"sync"
)

// keyedLock is a set of mutexes by key, e.g. one per namespace. A key's mutex
// exists while someone holds or waits for it and is dropped when the last of
// them leaves, so the set does not grow with every key ever used, and two
// mutexes for one key never coexist. The zero value is ready to use.
type keyedLock struct {
	mu    sync.Mutex
	locks map[string]*refLock // by key
}

// refLock is the mutex of one key.
type refLock struct {
	token chan struct{} // capacity 1; holds a token while the mutex is held
	refs  int           // holders and waiters; guarded by keyedLock.mu
}

// lock blocks until it holds the mutex of key or ctx is done. On success it
// returns the function that releases the mutex; it must be called once.
func (k *keyedLock) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*refLock{}
	}
	l, ok := k.locks[key]
	if !ok {
		l = &refLock{token: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.token <- struct{}{}:
		return func() {
			<-l.token
			k.release(key, l)
		}, nil
	case <-ctx.Done():
		k.release(key, l)
		return nil, ctx.Err()
	}
}

// release drops one reference to l, and l itself when it was the last.
func (k *keyedLock) release(key string, l *refLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(k.locks, key)
	}
}

// len returns the number of keys held or waited for.
func (k *keyedLock) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}
