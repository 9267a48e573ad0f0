package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PollInterval is how often Eventually and Consistently check their condition.
const PollInterval = 250 * time.Millisecond

// Poll calls cond every interval, the first time at once, until it returns true (nil), returns
// an error (that error), or timeout passes or ctx ends (an error saying so, with the last error
// cond returned, if any). It is the one polling loop of the tests; Eventually and Consistently
// are built on it.
func Poll(ctx context.Context, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx)
	})
	if err != nil && wait.Interrupted(err) {
		return fmt.Errorf("condition not met within %s: %w", timeout, err)
	}
	return err
}

// Eventually fails the test unless cond holds within timeout. cond returns whether it holds and
// what it saw; what it saw last is reported on failure, after what the test was waiting for.
// Polling stops when the test ends.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := Poll(t.Context(), PollInterval, timeout, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, strings.TrimSpace(last))
	}
}

// EventuallyObject reads obj (by its namespace and name) through c until ready says it is, and
// fails the test after timeout with what ready said last (e.g. its phase and conditions).
func EventuallyObject[T client.Object](t testing.TB, c client.Client, obj T, timeout time.Duration, what string, ready func(T) (bool, string)) T {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	Eventually(t, timeout, what, func() (bool, string) {
		if err := c.Get(t.Context(), key, obj); err != nil {
			return false, err.Error()
		}
		return ready(obj)
	})
	return obj
}

// Consistently fails the test as soon as cond does not hold, checking it for the whole duration.
// It is for the waits whose point is that nothing happens during them (e.g. "a restarted manager
// does not install a second release"); cond returns whether it holds and what it saw.
func Consistently(t testing.TB, duration time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	var failed bool
	var msg string
	// Poll until the duration is over (a timeout is the expected outcome) or cond fails once.
	_ = Poll(t.Context(), PollInterval, duration, func(context.Context) (bool, error) {
		ok, m := cond()
		if !ok {
			failed, msg = true, m
			return true, nil
		}
		return false, nil
	})
	if failed {
		t.Fatalf("%s stopped holding after %s: %s", what, time.Since(start).Round(time.Millisecond), strings.TrimSpace(msg))
	}
	if err := t.Context().Err(); err != nil {
		t.Fatalf("test ended while checking that %s: %v", what, err)
	}
}

// Holds fails t unless cond holds now. It is the "must not happen" check after an object reached
// a terminal state (Failed: no pass acts on it until a retry), where what it shows once is all
// there will be: nothing to watch for a while.
func Holds(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	if ok, last := cond(); !ok {
		t.Fatalf("%s does not hold: %s", what, last)
	}
}
