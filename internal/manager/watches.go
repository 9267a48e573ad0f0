package manager

import (
	"io"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// kcpWatches is the number of watch requests the manager holds open to kcp: with the fan-in
// design it depends on the kinds watched and the shards, never on the number of workspaces.
var kcpWatches = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "kubeopera_kcp_open_watches",
	Help: "Watch requests the manager holds open to kcp.",
})

func init() { metrics.Registry.MustRegister(kcpWatches) }

// countWatches makes every client built from cfg (a copy is returned) count its open watches in
// kcpWatches.
func countWatches(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return watchCounter{next: rt} })
	return cfg
}

type watchCounter struct{ next http.RoundTripper }

func (w watchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if v := req.URL.Query().Get("watch"); v != "true" && v != "1" {
		return w.next.RoundTrip(req)
	}
	resp, err := w.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	kcpWatches.Inc()
	resp.Body = &countedBody{ReadCloser: resp.Body}
	return resp, nil
}

// countedBody decrements kcpWatches once when the watch's body is closed.
type countedBody struct {
	io.ReadCloser
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(kcpWatches.Dec)
	return b.ReadCloser.Close()
}
