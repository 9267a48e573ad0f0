package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	if _, state := ops.Poll("k0"); state != reconcile.OperationRunning {
		t.Errorf("Poll(k0) = %v while it runs, want OperationRunning", state)
	}
	if ops.Quiet("k0") {
		t.Error("Quiet(k0) while it runs")
	}
	if _, state := ops.Poll("never"); state != reconcile.OperationIdle {
		t.Errorf("Poll(never) = %v, want OperationIdle", state)
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
	if res, state := ops.Poll("k2"); state != reconcile.OperationEnded || res.Value != 2 {
		t.Errorf("Poll(k2) = %v, %v, want OperationEnded with 2", res, state)
	}
	if _, state := ops.Poll("k2"); state != reconcile.OperationIdle {
		t.Errorf("Poll(k2) after its result was taken = %v, want OperationIdle", state)
	}
	if !ops.Quiet("k1") {
		t.Error("Quiet(k1) after it ended")
	}
	if _, ok := ops.Take("k1"); ok {
		t.Error("Quiet(k1) kept the result of the operation that ended")
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

// One workspace holds at most PerWorkspace slots: its next operations wait for one of its own
// slots while another workspace's operation takes a free shared slot at once.
func TestOperationsPerWorkspace(t *testing.T) {
	type req struct{ ws, name string }
	for _, tc := range []struct {
		name                string
		limit, perWorkspace int
		// started are the operations started, in order; wantRunning those running once the
		// first ones hold their slots.
		started     []req
		wantRunning []string
	}{
		{
			name: "a third of workspace A waits, B runs", limit: 4, perWorkspace: 2,
			started:     []req{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}},
			wantRunning: []string{"a1", "a2", "b1"},
		},
		{
			name: "the shared limit still holds", limit: 3, perWorkspace: 2,
			started:     []req{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"b", "b2"}, {"c", "c1"}},
			wantRunning: []string{"a1", "a2", "b1"},
		},
		{
			name: "no per-workspace bound", limit: 3, perWorkspace: 0,
			started:     []req{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}},
			wantRunning: []string{"a1", "a2", "a3"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan req, len(tc.started))
			ops := &reconcile.Operations[req, string]{
				Limit: tc.limit, PerWorkspace: tc.perWorkspace,
				Workspace: func(r req) string { return r.ws },
				Done:      func(r req) { done <- r },
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = ops.Start(ctx) }()
			release := map[string]chan struct{}{}
			var mu sync.Mutex
			running := map[string]bool{}
			for _, r := range tc.started {
				release[r.name] = make(chan struct{})
				ops.Run(r.ws+"/"+r.name, r, func(context.Context) (string, error) {
					mu.Lock()
					running[r.name] = true
					mu.Unlock()
					<-release[r.name]
					return r.name, nil
				})
				// In order: each takes its slot (or starts waiting) before the next is started.
				time.Sleep(20 * time.Millisecond)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				n := len(running)
				mu.Unlock()
				if n >= len(tc.wantRunning) || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // nothing else may start
			mu.Lock()
			var got []string
			for name := range running {
				got = append(got, name)
			}
			mu.Unlock()
			slices.Sort(got)
			if !slices.Equal(got, tc.wantRunning) {
				t.Fatalf("running %v, want %v", got, tc.wantRunning)
			}
			// Releasing everything runs the rest to their end.
			for _, ch := range release {
				close(ch)
			}
			for range tc.started {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("not every operation ended")
				}
			}
			for _, r := range tc.started {
				if res, ok := ops.Take(r.ws + "/" + r.name); !ok || res.Value != r.name || res.Err != nil {
					t.Errorf("Take(%s) = %+v, %v", r.name, res, ok)
				}
			}
		})
	}
}

// An operation's context ends at Timeout; its error says so, and its slot is free again.
func TestOperationsTimeout(t *testing.T) {
	done := make(chan string, 2)
	ops := &reconcile.Operations[string, int]{Limit: 1, Timeout: 200 * time.Millisecond, Done: func(r string) { done <- r }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ops.Start(ctx) }()
	start := time.Now()
	ops.Run("hang", "hang", func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, fmt.Errorf("install interrupted: %w", ctx.Err())
	})
	ops.Run("next", "next", func(context.Context) (int, error) { return 1, nil })
	for range 2 {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the hanging operation was not ended by its deadline")
		}
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("ended after %s, before its deadline", took)
	}
	res, _ := ops.Take("hang")
	if !errors.Is(res.Err, context.DeadlineExceeded) || !strings.Contains(res.Err.Error(), "ran past its deadline of 200ms") {
		t.Errorf("error %v does not say the operation ran past its deadline", res.Err)
	}
	if res, _ := ops.Take("next"); res.Value != 1 {
		t.Errorf("the next operation did not run after the slot was freed: %+v", res)
	}
}
