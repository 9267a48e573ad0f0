package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// Operations run outside the caller, one per key, at most Limit at once; each end tells Done and
// leaves a result that is taken once.
func TestOperations(t *testing.T) {
	done := make(chan string, 10)
	ops := &reconcile.Operations[string, int]{Limit: 2, Done: func(req string) { done <- req }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ops.Start(ctx) }()

	release := make(chan struct{})
	var running, most atomic.Int32
	var mu sync.Mutex
	op := func(v int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			n := running.Add(1)
			mu.Lock()
			if n > most.Load() {
				most.Store(n)
			}
			mu.Unlock()
			<-release
			running.Add(-1)
			if v < 0 {
				return 0, errors.New("failed")
			}
			return v, nil
		}
	}
	for i := range 4 {
		if !ops.Run(fmt.Sprint("k", i), fmt.Sprint("req", i), op(i)) {
			t.Fatalf("operation k%d not started", i)
		}
	}
	if ops.Run("k0", "req0", op(99)) {
		t.Error("a second operation started for a key whose operation runs")
	}
	if !ops.Running("k0") {
		t.Error("k0 not running")
	}
	time.Sleep(100 * time.Millisecond)
	if n := running.Load(); n != 2 {
		t.Errorf("%d operations run at once, limit 2", n)
	}
	close(release)
	got := map[string]bool{}
	for range 4 {
		select {
		case req := <-done:
			got[req] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("Done told only %v", got)
		}
	}
	if most.Load() > 2 {
		t.Errorf("%d operations ran at once, limit 2", most.Load())
	}
	res, ok := ops.Take("k3")
	if !ok || res.Value != 3 || res.Err != nil {
		t.Errorf("Take(k3) = %v, %v", res, ok)
	}
	if _, ok := ops.Take("k3"); ok {
		t.Error("a result was taken twice")
	}
	if ops.Running("k3") {
		t.Error("k3 still running")
	}
	if !ops.Run("k3", "req3", op(-1)) {
		t.Error("no new operation after the result was taken")
	}
	if req := <-done; req != "req3" {
		t.Errorf("Done told %s", req)
	}
	if res, _ := ops.Take("k3"); res.Err == nil {
		t.Error("the failed operation's error was lost")
	}
}
