package devenv

import "testing"

// TestRecordMatches: a record stands for the process observed under its PID only when that
// process started when the record says; a PID the system gave to a later process does not match.
func TestRecordMatches(t *testing.T) {
	rec := Record{Name: "backend-etcd", PID: 4242, Started: "8c1f/1000"}
	tests := map[string]struct {
		rec     Record
		started string
		want    bool
	}{
		"the recorded process":                     {rec: rec, started: "8c1f/1000", want: true},
		"the PID reused by a later process":        {rec: rec, started: "8c1f/5000", want: false},
		"the PID reused after a reboot":            {rec: rec, started: "77aa/1000", want: false},
		"no process observed":                      {rec: rec, started: "", want: false},
		"a record without a start never matches":   {rec: Record{Name: "kcp", PID: 4242}, started: "", want: false},
		"a record without a start, a process runs": {rec: Record{Name: "kcp", PID: 4242}, started: "8c1f/1000", want: false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tt.rec.matches(tt.started); got != tt.want {
				t.Errorf("matches(%q) = %v, want %v", tt.started, got, tt.want)
			}
		})
	}
}
