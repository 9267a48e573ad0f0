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

// TestReservedPortsAreTheirOwn: ReservedPorts hands out ports of its band only, never one twice in
// a process, and FreePorts never picks from that band, so a server bound long after its port was
// chosen cannot lose it to another suite's server.
func TestReservedPortsAreTheirOwn(t *testing.T) {
	seen := map[int]bool{}
	for range 5 {
		ports, err := ReservedPorts(10)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if p < reservedLo || p >= reservedHi {
				t.Errorf("reserved port %d is outside %d-%d", p, reservedLo, reservedHi-1)
			}
			if seen[p] {
				t.Errorf("reserved port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
	free, err := FreePorts(300)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range free {
		if p >= reservedLo && p < reservedHi {
			t.Errorf("FreePorts handed out %d, of the reserved band", p)
		}
	}
}
