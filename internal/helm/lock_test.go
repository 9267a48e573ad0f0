package helm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/test/framework"
)

// TestKeyedLock: one holder per key at a time, keys independent, waiting ends
// with the waiter's context, and a key is forgotten only once nobody holds or
// waits for it.
func TestKeyedLock(t *testing.T) {
	var k keyedLock
	ctx := context.Background()

	unlockA, err := k.lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := k.lock(ctx, "b")
	if err != nil {
		t.Fatalf("lock(b) while a is held: %v", err)
	}
	unlockB()

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := k.lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("lock(a) while held = %v, want the waiter's deadline", err)
	}

	// A waiter keeps the key's mutex alive after the holder released it: the
	// old bug dropped the entry while others waited on it, so a newcomer got a
	// second mutex for the same key.
	acquired := make(chan func())
	go func() {
		unlock, err := k.lock(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		acquired <- unlock
	}()
	framework.Eventually(t, 10*time.Second, "a holder and a waiter of key a", func() (bool, string) {
		n := k.refs("a")
		return n == 2, fmt.Sprintf("%d holders and waiters", n)
	})
	unlockA()
	unlock := <-acquired
	if n := k.len(); n != 1 {
		t.Errorf("keys while a is held = %d, want 1", n)
	}
	third, cancel3 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel3()
	if _, err := k.lock(third, "a"); err == nil {
		t.Error("a second holder got key a")
	}
	unlock()
	if n := k.len(); n != 0 {
		t.Errorf("keys after the last unlock = %d, want 0", n)
	}

	// Many goroutines on few keys: never two holders of one key.
	var held [3]atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"x", "y", "z"}[i%3]
			for range 20 {
				unlock, err := k.lock(ctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				if n := held[i%3].Add(1); n != 1 {
					t.Errorf("%d holders of %s", n, key)
				}
				time.Sleep(10 * time.Microsecond)
				held[i%3].Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	if n := k.len(); n != 0 {
		t.Errorf("keys at the end = %d, want 0", n)
	}
}

// refs returns the holders and waiters of key.
func (k *keyedLock) refs(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l, ok := k.locks[key]; ok {
		return l.refs
	}
	return 0
}
