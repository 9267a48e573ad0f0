package target

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestFailureClass classifies the failures of real requests to loopback servers, and says
// nothing of the addresses in their errors.
func TestFailureClass(t *testing.T) {
	get := func(client *http.Client, url string) error {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	closedPort := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()
	untrusted := httptest.NewTLSServer(http.NotFoundHandler())
	defer untrusted.Close()
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	// A server that accepts and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()

	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"nothing listens":             {get(http.DefaultClient, "https://"+closedPort+"/version"), "connection refused"},
		"an untrusted certificate":    {get(&http.Client{}, untrusted.URL+"/version"), "TLS handshake failed"},
		"no TLS spoken":               {get(&http.Client{}, "https://"+plain.Listener.Addr().String()+"/version"), "TLS handshake failed"},
		"no answer in time":           {get(&http.Client{Timeout: 200 * time.Millisecond}, "https://"+silent.Addr().String()+"/version"), "timed out"},
		"a deadline":                  {fmt.Errorf("failed: %w", context.DeadlineExceeded), "timed out"},
		"a name that did not resolve": {&net.DNSError{Err: "no such host", Name: "api.example.invalid", IsNotFound: true}, "host name did not resolve"},
		"anything else":               {errors.New("the server said 10.0.0.7 is busy"), "no answer"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("the request did not fail")
			}
			if got := FailureClass(tc.err); got != tc.want {
				t.Errorf("FailureClass(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
