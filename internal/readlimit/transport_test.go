package readlimit_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/test/sim"
)

// client returns an HTTP client whose transport is Go's, wrapped as a target's rest.Config
// wraps it.
func client(l readlimit.Limits) *http.Client {
	return &http.Client{Transport: readlimit.Wrap(l)(http.DefaultTransport.(*http.Transport).Clone())}
}

// body is a JSON text of exactly n bytes: a string padded with spaces.
func body(n int) []byte {
	b := bytes.Repeat([]byte(" "), n)
	copy(b, `"x"`)
	return b
}

// The cap counts the bytes client-go would get, exactly: the cap passes, one more fails, with or
// without a Content-Length, and gzip is counted after Go's transport decoded it.
func TestResponseBytesCap(t *testing.T) {
	const max = 1000
	for _, enc := range []string{"content-length", "chunked", "gzip"} {
		for _, size := range []int{0, max - 1, max, max + 1, 50 * max} {
			t.Run(fmt.Sprintf("%s/%d", enc, size), func(t *testing.T) {
				var onWire int
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					data := body(size)
					switch enc {
					case "content-length":
						w.Header().Set("Content-Length", strconv.Itoa(len(data)))
					case "chunked":
						w.(http.Flusher).Flush() // headers out before the body: no Content-Length
					case "gzip":
						if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
							t.Errorf("the transport did not ask for gzip: Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
						}
						var buf bytes.Buffer
						zw := gzip.NewWriter(&buf)
						_, _ = zw.Write(data)
						_ = zw.Close()
						data = buf.Bytes()
						w.Header().Set("Content-Encoding", "gzip")
					}
					onWire = len(data)
					_, _ = w.Write(data)
				}))
				defer srv.Close()
				resp, err := client(readlimit.Limits{MaxResponseBytes: max}).Get(srv.URL + "/api/v1/nodes?limit=200")
				if size > max {
					le, ok := readlimit.As(err)
					if !ok {
						t.Fatalf("got %v, want a *readlimit.Error", err)
					}
					if want := "the cluster's response to GET /api/v1/nodes exceeded 1000 bytes (decompressed)"; le.Error() != want {
						t.Errorf("error %q, want %q", le.Error(), want)
					}
					if enc == "gzip" && onWire >= max {
						t.Errorf("the gzipped body was %d bytes on the wire: the test does not show decompressed bytes are counted", onWire)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				got, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, body(size)) {
					t.Errorf("read %d bytes, want the %d sent", len(got), size)
				}
			})
		}
	}
}

// Protobuf, CBOR and YAML answers are refused unless the request asked for them: client-go
// would decode them whatever it asked for, and the element count cannot see into them.
func TestEncodingsNotAskedForAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, accept, contentType string
		refused                   bool
	}{
		{"json asked, json", "application/json", "application/json", false},
		{"json asked, protobuf", "application/json", "application/vnd.kubernetes.protobuf", true},
		{"json asked, cbor", "application/json", "application/cbor", true},
		{"json asked, yaml", "application/json", "application/yaml", true},
		{"protobuf asked, protobuf", "application/vnd.kubernetes.protobuf, application/json", "application/vnd.kubernetes.protobuf", false},
		{"json asked, text (an error page)", "application/json", "text/plain; charset=utf-8", false},
		{"nothing asked, json", "", "application/json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = io.WriteString(w, "{}")
			}))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/nodes", nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			resp, err := client(readlimit.Limits{}).Do(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			le, limited := readlimit.As(err)
			if limited != tc.refused {
				t.Fatalf("refused = %v (%v), want %v", limited, err, tc.refused)
			}
			if limited && !strings.Contains(le.Error(), "did not ask for") {
				t.Errorf("error %q does not say the encoding was not asked for", le.Error())
			}
			if !limited && err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The JSON array elements of a response are counted at any depth; strings do not count.
func TestResponseElementsCap(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		elements   int // the count; the cap is set to it, then to one less
	}{
		{"empty list", `{"items":[]}`, 0},
		{"three items", `{"items":[{},{},{}]}`, 3},
		{"scalars count", `{"items":[0,"",null,true]}`, 4},
		{"nested", `{"items":[{"a":[1,2]},{"b":[[],[3]]}]}`, 2 + 2 + 2 + 1},
		{"brackets and commas in strings", `{"items":["[1,2]","a,b\"],[", {"k":"{[,]}"}]}`, 3},
		{"escaped backslash before a quote", `{"items":["a\\",1,2]}`, 3},
		{"object members are not elements", `{"a":1,"b":2,"c":{"d":3}}`, 0},
		{"whitespace", "{\"items\":[ \n{} ,\t{} ]}", 2},
		{"watch stream of two events", `{"type":"ADDED","object":{"items":[1]}}` + "\n" + `{"type":"ADDED","object":{"items":[1,2]}}`, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, tc.json)
			}))
			defer srv.Close()
			get := func(max int64, path string) error {
				resp, err := client(readlimit.Limits{MaxResponseElements: max}).Get(srv.URL + path)
				if err != nil {
					return err
				}
				defer func() { _ = resp.Body.Close() }()
				_, err = io.ReadAll(resp.Body)
				return err
			}
			for _, path := range []string{"/api/v1/nodes", "/api/v1/nodes?watch=true"} {
				if tc.elements > 0 {
					if err := get(int64(tc.elements), path); err != nil {
						t.Errorf("%s with a cap of %d: %v", path, tc.elements, err)
					}
				}
				max := int64(tc.elements - 1)
				if max <= 0 {
					continue // 0 means the default
				}
				err := get(max, path)
				le, ok := readlimit.As(err)
				if !ok {
					t.Fatalf("%s with a cap of %d: got %v, want a *readlimit.Error", path, max, err)
				}
				if want := fmt.Sprintf("exceeded %d array elements", max); !strings.Contains(le.Error(), want) {
					t.Errorf("error %q does not say %q", le.Error(), want)
				}
			}
		})
	}
}

func TestDeepNestingIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.Repeat("[", readlimit.MaxDepth+1))
	}))
	defer srv.Close()
	_, err := client(readlimit.Limits{}).Get(srv.URL)
	if le, ok := readlimit.As(err); !ok || !strings.Contains(le.Error(), "levels of nesting") {
		t.Fatalf("got %v, want a nesting limit error", err)
	}
}

// client-go's own decoding path, end to end: a clientset built from the hostile server's
// kubeconfig with the caps applied gets the typed error, and reading the attack costs the
// process a small multiple of the cap, not the gigabytes the answer decompresses or decodes to.
func TestClientGoStaysWithinTheCaps(t *testing.T) {
	const (
		maxBytes    = 4 << 20
		maxElements = 10000
	)
	for _, tc := range []struct {
		attack sim.HostileOptions
		want   string
	}{
		// 256 MiB decompressed, under 1 MiB on the wire.
		{sim.HostileOptions{Attack: sim.AttackGzipBomb, BombSize: 256 << 20}, "exceeded 4 MiB (decompressed)"},
		// 1.2 MB of JSON; decoded, a 1.4 GB []corev1.Node.
		{sim.HostileOptions{Attack: sim.AttackEmptyItems, Items: 400_000}, "exceeded 10000 array elements"},
	} {
		t.Run(string(tc.attack.Attack), func(t *testing.T) {
			srv := sim.StartHostileCluster(t, tc.attack)
			cfg, err := kubeconfig.ParseUntrusted(srv.Kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			readlimit.Apply(cfg, readlimit.Limits{MaxResponseBytes: maxBytes, MaxResponseElements: maxElements})
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{Limit: 200})
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d MiB reading the attack (%d KiB on the wire)", allocated>>20, srv.WireBytes()>>10)
			if allocated > 16*maxBytes {
				t.Errorf("reading the attack allocated %d MiB, more than 16 times the %d MiB cap", allocated>>20, maxBytes>>20)
			}
			if le, ok := readlimit.As(err); !ok {
				t.Errorf("got %v, want a *readlimit.Error", err)
			} else if !strings.Contains(le.Error(), tc.want) {
				t.Errorf("error %q does not say %q", le.Error(), tc.want)
			}
		})
	}
}

// List follows continue tokens up to the page cap and stops at the item cap before fn sees an
// item past it.
func TestList(t *testing.T) {
	pages := func(sizes ...int) func(context.Context, metav1.ListOptions) ([]int, string, error) {
		return func(_ context.Context, opts metav1.ListOptions) ([]int, string, error) {
			i := 0
			if opts.Continue != "" {
				i, _ = strconv.Atoi(opts.Continue)
			}
			if opts.Limit != 200 {
				return nil, "", fmt.Errorf("limit %d, want the page size 200", opts.Limit)
			}
			next := ""
			if i+1 < len(sizes) || sizes[len(sizes)-1] < 0 {
				next = strconv.Itoa(i + 1)
			}
			n := sizes[min(i, len(sizes)-1)]
			return make([]int, max(n, 0)), next, nil
		}
	}
	const endless = -1 // the last size repeats forever with a continue token
	for _, tc := range []struct {
		name   string
		limits readlimit.Limits
		sizes  []int
		seen   int
		err    string
	}{
		{"one page", readlimit.Limits{MaxListPages: 3, MaxListItems: 10}, []int{5}, 5, ""},
		{"exactly the page cap", readlimit.Limits{MaxListPages: 3, MaxListItems: 10}, []int{1, 1, 1}, 3, ""},
		{"one page past the cap", readlimit.Limits{MaxListPages: 3, MaxListItems: 10}, []int{1, 1, 1, 1}, 3, "the cluster's node list exceeded 3 pages"},
		{"endless continue tokens", readlimit.Limits{MaxListPages: 3, MaxListItems: 10}, []int{0, endless}, 0, "the cluster's node list exceeded 3 pages"},
		{"exactly the item cap", readlimit.Limits{MaxListPages: 3, MaxListItems: 10}, []int{4, 6}, 10, ""},
		{"one item past the cap", readlimit.Limits{MaxListPages: 3, MaxListItems: 10}, []int{4, 7}, 4, "the cluster's node list exceeded 10 items"},
		{"defaults", readlimit.Limits{}, []int{200, 200}, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := 0
			err := readlimit.List(context.Background(), tc.limits, "node list", 200, pages(tc.sizes...), func(*int) { seen++ })
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "":
				var le *readlimit.Error
				if !errors.As(err, &le) || le.Error() != tc.err {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				if le.StalledReason() != "ReadLimitExceeded" {
					t.Errorf("reason %q", le.StalledReason())
				}
			}
			if seen != tc.seen {
				t.Errorf("fn saw %d items, want %d", seen, tc.seen)
			}
		})
	}
}
