package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// countingServer accepts connections on addr and counts them; every connection is closed at
// once, except that http serves /version when handler is set.
type countingServer struct {
	ln       net.Listener
	mu       sync.Mutex
	accepted int
	// marks are the connections of mark: the accept loop takes connections in the order the
	// kernel completed them, so once a mark is accepted every connection made before it was too.
	marks chan struct{}
}

// listen starts a counting server on ip (a free port).
func listen(t *testing.T, ip string) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	s := &countingServer{ln: ln, marks: make(chan struct{}, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4)
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, _ := c.Read(buf)
			if string(buf[:n]) == "mark" {
				s.marks <- struct{}{}
			} else {
				s.mu.Lock()
				s.accepted++
				s.mu.Unlock()
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return s
}

func (s *countingServer) port() string {
	_, p, _ := net.SplitHostPort(s.ln.Addr().String())
	return p
}

// seen returns how many connections other than marks the server accepted, after making a mark
// connection (unguarded) and waiting for the server to take it: every connection made before
// the mark has been accepted and counted by then.
func (s *countingServer) seen(t *testing.T) int {
	t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("mark")); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-s.marks:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not accept the mark connection")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// TestDialRefusesLoopbackAliases plays a tenant pointing the manager at loopback addresses, with
// only 127.0.0.1/32 allowed (as make run and the tests allow it): a server on the loopback alias
// 127.0.0.2 is refused at dial time and never sees a connection; the server on 127.0.0.1 is
// reached.
func TestDialRefusesLoopbackAliases(t *testing.T) {
	g := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, DefaultRules()...)
	denied, allowed := listen(t, "127.0.0.2"), listen(t, "127.0.0.1")

	c, err := g.DialContext(t.Context(), "tcp", "127.0.0.2:"+denied.port())
	if c != nil {
		_ = c.Close()
	}
	if f, ok := AsForbidden(err); !ok || f.Class != Loopback {
		t.Errorf("dial to 127.0.0.2: %v, want a loopback refusal", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Errorf("the refusal %T is not a *net.OpError as every dial error is", err)
	}
	if n := denied.seen(t); n != 0 {
		t.Errorf("the server on 127.0.0.2 accepted %d connections, want none", n)
	}

	c, err = g.DialContext(t.Context(), "tcp", "127.0.0.1:"+allowed.port())
	if err != nil {
		t.Fatalf("dial to the allowed 127.0.0.1: %v", err)
	}
	_ = c.Close()
	if n := allowed.seen(t); n != 1 {
		t.Errorf("the server on 127.0.0.1 accepted %d connections, want 1", n)
	}
}

// TestDialChecksResolvedAddresses: a name is checked by the addresses it resolves to, so
// localhost is refused when loopback is not allowed, and reached when its address is.
func TestDialChecksResolvedAddresses(t *testing.T) {
	srv := listen(t, "127.0.0.1")
	addrs, err := net.DefaultResolver.LookupNetIP(t.Context(), "ip", "localhost")
	if err != nil || len(addrs) == 0 {
		t.Fatalf("this machine does not resolve localhost: %v", err)
	}

	strict := New(nil, DefaultRules()...)
	_, err = strict.DialContext(t.Context(), "tcp", "localhost:"+srv.port())
	if f, ok := AsForbidden(err); !ok || f.Class != Loopback {
		t.Fatalf("dial to localhost with loopback denied: %v, want a loopback refusal", err)
	}
	if f, _ := AsForbidden(err); strings.Contains(f.Error(), "127.0.0.1") {
		t.Errorf("the refusal names the resolved address: %v", f)
	}
	if n := srv.seen(t); n != 0 {
		t.Errorf("the server accepted %d connections through localhost, want none", n)
	}

	// The same name, its address allowed: reached (the check is on what it resolved to).
	var allow []netip.Prefix
	for _, a := range addrs {
		allow = append(allow, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	c, err := New(allow, DefaultRules()...).DialContext(t.Context(), "tcp", "localhost:"+srv.port())
	if err != nil {
		t.Fatalf("dial to localhost with %v allowed: %v", allow, err)
	}
	_ = c.Close()
	if n := srv.seen(t); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
}

// TestApplyGuardsClientGo: a rest.Config the guard applied to refuses a denied server through
// client-go, recognisably (url.Error and net.OpError wrap the refusal), and reaches an allowed
// one.
func TestApplyGuardsClientGo(t *testing.T) {
	var requests sync.Map // host -> count
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := requests.LoadOrStore(r.Host, new(int))
		*n.(*int)++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"35","gitVersion":"v1.35.4"}`)
	})
	serve := func(ip string) *httptest.Server {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewUnstartedServer(handler)
		s.Listener = ln
		s.StartTLS()
		t.Cleanup(s.Close)
		return s
	}
	denied, allowed := serve("127.0.0.2"), serve("127.0.0.1")
	g := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, DefaultRules()...)
	version := func(s *httptest.Server) (string, error) {
		cfg := &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Timeout: 5 * time.Second}
		if err := g.Apply(cfg); err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			return "", err
		}
		return v.GitVersion, nil
	}

	_, err := version(denied)
	f, ok := AsForbidden(err)
	if !ok || f.Class != Loopback {
		t.Fatalf("ServerVersion of the server on 127.0.0.2: %v, want a loopback refusal", err)
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Errorf("client-go's error %T does not wrap a *url.Error", err)
	}
	if got, err := version(allowed); err != nil || got != "v1.35.4" {
		t.Fatalf("ServerVersion of the server on 127.0.0.1 = %q, %v", got, err)
	}
	count := func(host string) int {
		if n, ok := requests.Load(host); ok {
			return *n.(*int)
		}
		return 0
	}
	if n := count(strings.TrimPrefix(denied.URL, "https://")); n != 0 {
		t.Errorf("the server on 127.0.0.2 answered %d requests, want none", n)
	}
	if n := count(strings.TrimPrefix(allowed.URL, "https://")); n != 1 {
		t.Errorf("the server on 127.0.0.1 answered %d requests, want 1", n)
	}
	if err := g.Apply(&rest.Config{Transport: http.DefaultTransport}); err == nil {
		t.Error("Apply accepted a config with its own transport, which would not use the guard's dial")
	}
}

// TestURLRules: the rules of the platform's own endpoints, literal and resolved.
func TestURLRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rules, err := URLRules(ctx, nil, "https://127.0.0.1:6443/services/apiexport/root/kubeopera.io", KCPShard)
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: 6443, Class: KCPShard},
		{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Class: KCPShard},
	}
	if fmt.Sprint(rules) != fmt.Sprint(want) {
		t.Errorf("URLRules = %v, want %v", rules, want)
	}
	rules, err = URLRules(ctx, staticResolver{"kcp.example": {netip.MustParseAddr("::ffff:10.1.2.3"), netip.MustParseAddr("fd00::7")}}, "https://kcp.example", KCPShard)
	if err != nil {
		t.Fatal(err)
	}
	want = []Rule{
		{Prefix: netip.MustParsePrefix("10.1.2.3/32"), Port: 443, Class: KCPShard},
		{Prefix: netip.MustParsePrefix("10.1.2.3/32"), Class: KCPShard},
		{Prefix: netip.MustParsePrefix("fd00::7/128"), Port: 443, Class: KCPShard},
		{Prefix: netip.MustParsePrefix("fd00::7/128"), Class: KCPShard},
	}
	if fmt.Sprint(rules) != fmt.Sprint(want) {
		t.Errorf("URLRules = %v, want %v", rules, want)
	}
	if _, err := URLRules(ctx, nil, "not a url", KCPShard); err == nil {
		t.Error("URLRules accepted a URL without a host")
	}
}

type staticResolver map[string][]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
