// HostileCluster plays what a tenant can put behind a HostCluster's kubeconfig instead of a
// Kubernetes API server: a server that answers /version exactly as a real one does, so access
// validation passes, and then attacks the manager on the node list, the first list the manager
// reads (internal/health.Read).
//
// What it imitates of a real API server, and where that is specified:
//   - GET /version answers a version.Info JSON object (k8s.io/apimachinery/pkg/version/types.go;
//     the API server's /version handler serves it as application/json).
//   - Lists are v1 NodeList/PodList JSON objects; a list continues when metadata.continue is set
//     ("Retrieving large results sets in chunks",
//     https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks:
//     "the client must ... pass the continue token on the next request"; an empty token ends it).
//   - Anything else is a 404 with a v1 Status body, as the API server answers an unknown path.
//
// Everything it does beyond that is the attack, and nothing in it is what a real server would do.
// It listens on loopback only, with TLS (httptest's certificate for 127.0.0.1), and its
// kubeconfig carries that certificate inline and a token: nothing ParseUntrusted refuses.

package sim

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Attack is what the server does to a node list request.
type Attack string

const (
	// AttackEndlessContinue answers every node list page with one node and a new continue token,
	// forever (after PageDelay each).
	AttackEndlessContinue Attack = "EndlessContinue"
	// AttackGzipBomb answers the node list with Content-Encoding: gzip and a body that decompresses to
	// BombSize bytes (a NodeList padded with whitespace, which JSON allows): a few MiB on the
	// wire.
	AttackGzipBomb Attack = "GzipBomb"
	// AttackEmptyItems answers the node list with a NodeList of Items empty objects, gzipped: `{}` is
	// 3 bytes of JSON and a whole corev1.Node (768 bytes) once decoded.
	AttackEmptyItems Attack = "EmptyItems"
	// AttackHang accepts the node list request and never answers it; the handler returns only when
	// the client gives up (or the server stops).
	AttackHang Attack = "Hang"
)

// HostileOptions configure a HostileCluster.
type HostileOptions struct {
	// Attack is what the node list gets.
	Attack Attack
	// PageDelay is how long AttackEndlessContinue takes for each page.
	PageDelay time.Duration
	// BombSize is the decompressed size of AttackGzipBomb's body (default 2 GiB).
	BombSize int64
	// Items is the number of AttackEmptyItems' items (default 10 million: 30 MB of JSON).
	Items int
	// InFlight, when set, counts the requests the server is serving; servers may share one.
	InFlight *InFlight
}

// InFlight counts the requests being served by the servers that share it, and the most served at
// once: how many of the manager's workers were busy with them at the same time.
type InFlight struct {
	mu       sync.Mutex
	cur, max int
}

// Max is the most requests served at once so far.
func (f *InFlight) Max() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max
}

func (f *InFlight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.cur++
		f.max = max(f.max, f.cur)
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.cur--
			f.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// HostileCluster is a running hostile API server.
type HostileCluster struct {
	// URL is the server's https URL on 127.0.0.1.
	URL string
	// Kubeconfig reaches the server (its CA inline, a token).
	Kubeconfig []byte

	opts      HostileOptions
	srv       *httptest.Server
	stop      chan struct{}
	stopOnce  sync.Once
	nodeLists atomic.Int64
	wire      atomic.Int64
}

// StartHostileCluster starts a server playing opts.Attack; it stops when the test ends.
func StartHostileCluster(t testing.TB, opts HostileOptions) *HostileCluster {
	t.Helper()
	if opts.BombSize == 0 {
		opts.BombSize = 2 << 30
	}
	if opts.Items == 0 {
		opts.Items = 10_000_000
	}
	s := &HostileCluster{opts: opts, stop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", s.version)
	mux.HandleFunc("GET /api/v1/nodes", s.nodes)
	mux.HandleFunc("GET /api/v1/pods", s.pods)
	mux.HandleFunc("/", notFound)
	var h http.Handler = mux
	if opts.InFlight != nil {
		h = opts.InFlight.wrap(mux)
	}
	s.srv = httptest.NewTLSServer(h)
	s.URL = s.srv.URL
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	s.Kubeconfig = fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: hostile
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: tenant
  user: {token: hostile-token}
contexts:
- name: hostile
  context: {cluster: hostile, user: tenant}
current-context: hostile
`, s.URL, base64.StdEncoding.EncodeToString(ca))
	t.Cleanup(s.Close)
	return s
}

// Close stops the server, ending hanging requests first.
func (s *HostileCluster) Close() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// NodeLists is how many node list requests (pages) the server got.
func (s *HostileCluster) NodeLists() int64 { return s.nodeLists.Load() }

// WireBytes is how many body bytes the server put on the wire (compressed, for the gzipped
// attacks).
func (s *HostileCluster) WireBytes() int64 { return s.wire.Load() }

func (s *HostileCluster) version(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"major":"1","minor":"35","emulationMajor":"1","emulationMinor":"35","minCompatibilityMajor":"1","minCompatibilityMinor":"34","gitVersion":"v1.35.1","gitCommit":"0000000000000000000000000000000000000000","gitTreeState":"clean","buildDate":"2026-01-01T00:00:00Z","goVersion":"go1.25.5","compiler":"gc","platform":"linux/amd64"}`)
}

func (s *HostileCluster) pods(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`)
}

func (s *HostileCluster) nodes(w http.ResponseWriter, r *http.Request) {
	n := s.nodeLists.Add(1)
	switch s.opts.Attack {
	case AttackEndlessContinue:
		select {
		case <-time.After(s.opts.PageDelay):
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
		w.Header().Set("Content-Type", "application/json")
		body := fmt.Sprintf(`{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1","continue":"page-%d"},"items":[`+
			`{"metadata":{"name":"node-%06d"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}]}`, n+1, n)
		s.wire.Add(int64(len(body)))
		_, _ = io.WriteString(w, body)
	case AttackGzipBomb:
		s.gzipped(w, func(zw io.Writer) error {
			if _, err := io.WriteString(zw, `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]`); err != nil {
				return err
			}
			chunk := []byte(strings.Repeat(" ", 1<<16))
			for left := s.opts.BombSize; left > 0; left -= int64(len(chunk)) {
				if left < int64(len(chunk)) {
					chunk = chunk[:left]
				}
				if _, err := zw.Write(chunk); err != nil {
					return err
				}
			}
			_, err := io.WriteString(zw, "}")
			return err
		})
	case AttackEmptyItems:
		s.gzipped(w, func(zw io.Writer) error {
			if _, err := io.WriteString(zw, `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{}`); err != nil {
				return err
			}
			chunk := []byte(strings.Repeat(",{}", 1<<14))
			for left := s.opts.Items - 1; left > 0; left -= 1 << 14 {
				if left < 1<<14 {
					chunk = chunk[:3*left]
				}
				if _, err := zw.Write(chunk); err != nil {
					return err
				}
			}
			_, err := io.WriteString(zw, "]}")
			return err
		})
	case AttackHang:
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
	}
}

// gzipped writes what write produces, gzipped, with Content-Encoding: gzip, whatever the
// request asked for; it stops at the first write the client no longer reads.
func (s *HostileCluster) gzipped(w http.ResponseWriter, write func(io.Writer) error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Encoding", "gzip")
	zw, _ := gzip.NewWriterLevel(&counting{w: w, n: &s.wire}, gzip.BestCompression)
	if err := write(zw); err != nil {
		return
	}
	_ = zw.Close()
}

// counting counts the bytes written through it.
type counting struct {
	w io.Writer
	n *atomic.Int64
}

func (c *counting) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
