package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestWindow: entries count for an hour (exactly an hour ago is out), a reservation made again
// under its key is free, and a full window says when the next one fits.
func TestWindow(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration, key string) Entry { return Entry{At: now.Add(-ago), Key: key} }
	ledger := []Entry{
		at(30*time.Minute, "b"),
		at(61*time.Minute, "old"), // out of the window
		at(59*time.Minute, "a"),
		at(time.Hour, "edge"), // exactly an hour ago: out
		at(5*time.Minute, "c"),
	}
	window := Recent(ledger, now, time.Hour)
	if d := cmp.Diff([]Entry{at(59*time.Minute, "a"), at(30*time.Minute, "b"), at(5*time.Minute, "c")}, window); d != "" {
		t.Fatalf("recent (-want +got):\n%s", d)
	}
	for name, tc := range map[string]struct {
		key      string
		limit    int
		count    int
		ok       bool
		nextFits time.Time
	}{
		"under the cap":                  {key: "new", limit: 4, count: 3, ok: true},
		"at the cap":                     {key: "new", limit: 3, count: 3, nextFits: now.Add(time.Minute)},
		"over the cap":                   {key: "new", limit: 2, count: 3, nextFits: now.Add(30 * time.Minute)},
		"a reservation retried is free":  {key: "b", limit: 3, count: 2, ok: true},
		"one run an hour, one this hour": {key: "new", limit: 1, count: 3, nextFits: now.Add(55 * time.Minute)},
	} {
		v := Fits(window, tc.key, tc.limit, time.Hour)
		if v.Count != tc.count || v.Fits != tc.ok || !v.Next.Equal(tc.nextFits) {
			t.Errorf("%s: Fits = %+v; want %d, %s, %t", name, v, tc.count, tc.nextFits, tc.ok)
		}
	}
}
