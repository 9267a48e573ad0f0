package framework

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Forwarder is a TCP forwarder on a loopback address (e.g. the alias 127.0.0.2) to a real
// server, counting the connections it accepts: it puts a real server at an address a test denies
// or allows, and tells whether anything connected there.
type Forwarder struct {
	// Addr is where the forwarder listens, host:port.
	Addr string

	ln       net.Listener
	to       string
	mu       sync.Mutex
	accepted int
	// marks are the local addresses of Seen's own connections, not counted; seenMark is told
	// when one is accepted.
	marks    map[string]bool
	seenMark chan struct{}
	// open are the piped connections, both sides, closed when the test ends (closed).
	open   map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// Forward listens on ip (a free port) and forwards every connection to the server at to (its
// URL, e.g. a rest.Config's Host, or host:port), until the test ends.
func Forward(t testing.TB, ip, to string) *Forwarder {
	t.Helper()
	if u, err := url.Parse(to); err == nil && u.Host != "" {
		to = u.Host
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("failed to listen on %s: %v", ip, err)
	}
	f := &Forwarder{Addr: ln.Addr().String(), ln: ln, to: to, marks: map[string]bool{}, seenMark: make(chan struct{}, 1), open: map[net.Conn]bool{}}
	f.serve(ln)
	// When the test ends the forwarder goes away as a server does: the listener and every
	// connection through it are closed, so no client's keep-alive connection holds the cleanup
	// until it idles out.
	t.Cleanup(func() {
		f.mu.Lock()
		f.closed = true
		_ = f.ln.Close()
		for c := range f.open {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// serve accepts connections on ln until it is closed.
func (f *Forwarder) serve(ln net.Listener) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			mark := f.marks[c.RemoteAddr().String()]
			if !mark {
				f.accepted++
			}
			f.mu.Unlock()
			if mark {
				_ = c.Close()
				f.seenMark <- struct{}{}
				continue
			}
			f.wg.Add(1)
			go func() { defer f.wg.Done(); f.pipe(c) }()
		}
	}()
}

// Cut takes the server off the network as an outage does: the forwarder stops listening (a new
// connection is refused) and drops every connection through it.
func (f *Forwarder) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.ln.Close()
	for c := range f.open {
		_ = c.Close()
	}
}

// Restore listens on Addr again after Cut: the server is back at the same address.
func (f *Forwarder) Restore(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", f.Addr)
	if err != nil {
		t.Fatalf("failed to listen on %s again: %v", f.Addr, err)
	}
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	f.serve(ln)
}

// pipe copies both ways between c and a new connection to the server.
func (f *Forwarder) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.DialTimeout("tcp", f.to, 10*time.Second)
	if err != nil {
		return
	}
	defer s.Close()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.open[c], f.open[s] = true, true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.open, c)
		delete(f.open, s)
		f.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
}

// Seen returns how many connections the forwarder accepted, once every connection made before
// the call has been accepted: it connects itself (not counted) and waits until that connection
// is accepted, which the listener does in the order connections were made.
func (f *Forwarder) Seen(t testing.TB) int {
	t.Helper()
	// The forwarder may accept the mark before Dial returns its local address: the mark dials
	// from a port chosen (and registered) first.
	host, _, _ := net.SplitHostPort(f.Addr)
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	local := l.Addr().(*net.TCPAddr)
	_ = l.Close()
	d := net.Dialer{LocalAddr: local}
	f.mu.Lock()
	f.marks[local.String()] = true
	f.mu.Unlock()
	c, err := d.Dial("tcp", f.Addr)
	if err != nil {
		t.Fatalf("failed to connect to the forwarder at %s: %v", f.Addr, err)
	}
	defer c.Close()
	select {
	case <-f.seenMark:
	case <-time.After(30 * time.Second):
		t.Fatalf("the forwarder at %s did not accept a connection within 30s", f.Addr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted
}

// KubeconfigWithServer returns kubeconfig with every cluster's server set to server, its
// certificate still checked against serverName (the name it was issued for, e.g. 127.0.0.1),
// so a real server's kubeconfig reaches it through a Forwarder.
func KubeconfigWithServer(t testing.TB, kubeconfig []byte, server, serverName string) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
		c.TLSServerName = serverName
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
