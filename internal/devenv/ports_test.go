package devenv

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsAreOutsideTheEphemeralRange: the ports handed to servers started later are free,
// distinct and below the kernel's ephemeral range, where no outgoing connection takes them first.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 20 {
		t.Fatalf("got %d ports, want 20", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p >= low || p < 1024 {
			t.Errorf("port %d is not below the ephemeral range (which starts at %d)", p, low)
		}
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		_ = l.Close()
	}
}
