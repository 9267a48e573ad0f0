package framework

import (
	"context"
	"testing"
)

// Runnable is what RunUntilCleanup runs: a manager.
type Runnable interface {
	Start(ctx context.Context) error
}

// RunUntilCleanup runs r until the test ends, and logs an error it stopped with.
func RunUntilCleanup(t testing.TB, r Runnable) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("manager stopped: %v", err)
		}
	})
}
