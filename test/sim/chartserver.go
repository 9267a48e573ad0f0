package sim

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// ChartServer plays an http(s) Helm chart repository serving one packaged chart (what Helm's
// http getter downloads), whose answers a test switches through Status: 200 serves the chart, 0
// hangs until the client gives up (its request is cancelled), any other value answers with that
// HTTP status, as an unreachable or broken registry does.
type ChartServer struct {
	*httptest.Server
	// File is the packaged chart's file name, served under /charts/.
	File string
	// Archive is the packaged chart.
	Archive []byte

	Status   atomic.Int32 // what the server answers, see ChartServer
	InFlight atomic.Int32 // requests being answered
	MaxIn    atomic.Int32 // most requests answered at once
	Requests atomic.Int32 // requests received
}

// NewChartServer packages the chart in chartDir and serves it, answering status first; it stops
// when the test ends.
func NewChartServer(t testing.TB, chartDir string, status int) *ChartServer {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	file, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	archive, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &ChartServer{File: filepath.Base(file), Archive: archive}
	s.Status.Store(int32(status))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		n := s.InFlight.Add(1)
		defer s.InFlight.Add(-1)
		for {
			if m := s.MaxIn.Load(); n <= m || s.MaxIn.CompareAndSwap(m, n) {
				break
			}
		}
		switch status := int(s.Status.Load()); status {
		case 0:
			<-r.Context().Done() // the client gave up: the pull was cancelled
		case http.StatusOK:
			w.Header().Set("Content-Type", "application/gzip")
			_, _ = w.Write(s.Archive)
		default:
			http.Error(w, http.StatusText(status), status)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// ChartURL is the URL of the served chart, as a chart reference.
func (s *ChartServer) ChartURL() string { return s.URL + "/charts/" + s.File }
