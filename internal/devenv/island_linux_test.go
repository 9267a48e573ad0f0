package devenv

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestIsland: what runs in an island sees only its loopback interface, reaches a host server
// only through Forward, and its listeners cannot be reached from outside; the process itself
// stays in its namespace.
func TestIsland(t *testing.T) {
	before, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	is, err := NewIsland()
	if err != nil {
		t.Fatal(err)
	}
	defer is.Close()
	// The process's own namespace (its main thread's, what /proc/self/net shows) stays.
	defer func() {
		if after, _ := os.Readlink("/proc/self/ns/net"); after != before {
			t.Errorf("the process moved to network namespace %s from %s", after, before)
		}
	}()

	// A host echo server, forwarded into the island at the same port.
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = host.Close() }()
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write([]byte("echo " + line))
			}()
		}
	}()
	port := host.Addr().(*net.TCPAddr).Port
	if err := is.Forward(port, host.Addr().String()); err != nil {
		t.Fatal(err)
	}

	// A listener on every interface of the island.
	var inside net.Listener
	if err := is.do(func() (err error) { inside, err = net.Listen("tcp", ":0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inside.Close() }()
	if c, err := net.Dial("tcp", inside.Addr().String()); err == nil {
		_ = c.Close()
		t.Errorf("the island's listener %s was reached from outside", inside.Addr())
	}

	// A process in the island: only lo, and the host server through the forward.
	out, err := runIn(is, "cat", "/proc/self/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	var ifaces []string
	for _, l := range strings.Split(out, "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			ifaces = append(ifaces, name)
		}
	}
	if strings.Join(ifaces, ",") != "lo" {
		t.Errorf("interfaces in the island: %v, want lo only", ifaces)
	}
	var reply string
	if err := is.do(func() error {
		c, err := net.Dial("tcp", host.Addr().String())
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_, _ = c.Write([]byte("hi\n"))
		reply, err = bufio.NewReader(c).ReadString('\n')
		return err
	}); err != nil {
		t.Fatalf("the forwarded host server: %v", err)
	}
	if reply != "echo hi\n" {
		t.Errorf("reply %q", reply)
	}
}

func runIn(is *Island, name string, args ...string) (string, error) {
	var b strings.Builder
	cmd := exec.Command(name, args...)
	cmd.Stdout = &b
	c, err := is.Start(nil, name, cmd)
	if err != nil {
		return "", err
	}
	err = c.Wait()
	return b.String(), err
}
