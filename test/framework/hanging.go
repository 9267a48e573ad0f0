package framework

import (
	"net"
	"sync"
	"testing"
)

// HangingServer is a server on 127.0.0.1 that accepts every connection, reads what it is sent and
// never answers, as a host that hangs does; its connections close when the test ends.
type HangingServer struct {
	// URL is http://<its address>.
	URL string
}

// StartHangingServer starts a HangingServer for the test.
func StartHangingServer(t testing.TB) *HangingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return &HangingServer{URL: "http://" + ln.Addr().String()}
}
