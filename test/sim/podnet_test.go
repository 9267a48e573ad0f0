package sim

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestPodNetIsReachableAndReachesTheAPIServer: a Pod's network (podNet) has an address of
// 10.244.128.0/17 that exists only on its veth pair; a server listening there inside the Pod's
// namespace answers a client in the root namespace (as the API server's service proxy dials a
// Pod); inside the namespace the API server's loopback address is forwarded to it; stopping the
// network removes the address's route and link.
func TestPodNetIsReachableAndReachesTheAPIServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: a Pod's network namespace, veth pair and route need root")
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "api") }))
	t.Cleanup(api.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	n, err := startPodNet(ctx, nil, "podnet-test", api.URL)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			n.stop()
		}
	})
	_, pods, _ := net.ParseCIDR("10.244.128.0/17")
	if ip := net.ParseIP(n.ip); ip == nil || !pods.Contains(ip) {
		t.Fatalf("Pod address %q is not in 10.244.128.0/17", n.ip)
	}
	ln, err := listenIn(n.netns, net.JoinHostPort(n.ip, "8080"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "pod "+r.RemoteAddr) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(n.ip, "8080") + "/")
	if err != nil {
		t.Fatalf("the Pod's address is not reachable from the root namespace: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.HasPrefix(string(body), "pod "+podGateway+":") {
		t.Errorf("the Pod answered %q, want a request from the gateway %s", body, podGateway)
	}
	// The Pod reaches nothing but its gateway: no default route.
	if out, err := exec.Command("nsenter", "--net="+n.netns, "--", "ip", "route", "show", "default").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("the Pod has a default route: %s %v", out, err)
	}
	// From inside: the API server's address reaches the API server.
	var conn net.Conn
	if err := inNetns(n.netns, func() (err error) {
		conn, err = net.DialTimeout("tcp", strings.TrimPrefix(api.URL, "http://"), 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("the API server is not reachable inside the Pod: %v", err)
	}
	_, _ = io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n")
	reply, _ := io.ReadAll(conn)
	_ = conn.Close()
	if !strings.HasSuffix(string(reply), "api") {
		t.Errorf("the API server forwarded inside the Pod answered %q", reply)
	}
	link := n.hostLink
	n.stop()
	stopped = true
	if out, _ := exec.Command("ip", "route", "show", n.ip+"/32").CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("the Pod's route is left after stop: %s", out)
	}
	if err := exec.Command("ip", "link", "show", link).Run(); err == nil {
		t.Errorf("the Pod's link %s is left after stop", link)
	}
}
