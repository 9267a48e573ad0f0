package overview

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Defaults of Options.
const (
	DefaultBindAddress       = "127.0.0.1:8090"
	DefaultRefreshInterval   = 5 * time.Second
	DefaultPlatformWorkspace = "root:kubeopera"
)

// Options configure the fleet overview's server.
type Options struct {
	// BindAddress is host:port to listen on; empty: DefaultBindAddress. Unless Secure, the host
	// must be a loopback IP or "localhost": plain HTTP without authentication is only for kubectl
	// port-forward and the admin's own machine.
	BindAddress string
	// Source lists the clusters; required.
	Source Source
	// RefreshInterval is how often an open page updates itself; zero: DefaultRefreshInterval.
	RefreshInterval time.Duration

	// Secure serves HTTPS and authenticates and authorizes every request except /login, /logout
	// and /assets/ against the backend cluster (TokenReview and SubjectAccessReview for verb get
	// on the request's path, e.g. ClusterRole kubeopera-fleet-viewer). A browser logs in at
	// /login with a ServiceAccount token, kept in an HttpOnly cookie.
	Secure bool
	// CertDir holds tls.crt and tls.key (reloaded when they change); empty, or without those
	// files: a self-signed certificate made at start. Secure only.
	CertDir string
	// RestConfig and HTTPClient reach the backend cluster for the TokenReviews and
	// SubjectAccessReviews; HTTPClient nil: one made from RestConfig. Secure only; required
	// unless Filter is set.
	RestConfig *rest.Config
	HTTPClient *http.Client
	// Filter authenticates and authorizes a request; nil: controller-runtime's
	// filters.WithAuthenticationAndAuthorization(RestConfig, HTTPClient). Secure only.
	Filter metricsserver.Filter

	// PlatformWorkspace is the platform workspace's path, named in the "Get started" panel;
	// empty: DefaultPlatformWorkspace.
	PlatformWorkspace string
	// Log receives the server's log lines (never a token).
	Log logr.Logger
}

// Server serves the fleet overview. It is a controller-runtime Runnable that every replica runs
// (it needs no leadership).
type Server struct {
	opts    Options
	handler http.Handler
	ui      *ui
	now     func() time.Time

	mu   sync.Mutex
	addr net.Addr
}

var (
	_ manager.Runnable               = &Server{}
	_ manager.LeaderElectionRunnable = &Server{}
)

// New checks opts and builds the server. It refuses a non-loopback BindAddress unless Secure.
func New(opts Options) (*Server, error) {
	if opts.Source == nil {
		return nil, errors.New("the fleet overview needs a Source")
	}
	if opts.BindAddress == "" {
		opts.BindAddress = DefaultBindAddress
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.PlatformWorkspace == "" {
		opts.PlatformWorkspace = DefaultPlatformWorkspace
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if err := checkExposure(opts.BindAddress, opts.Secure); err != nil {
		return nil, err
	}
	u, err := newUI()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, ui: u, now: time.Now}
	app := s.routes()
	if !opts.Secure {
		s.handler = withHeaders(loopbackHostOnly(app))
		return s, nil
	}
	filter := opts.Filter
	if filter == nil {
		if opts.RestConfig == nil {
			return nil, errors.New("the secure fleet overview needs the backend's rest.Config to authenticate and authorize requests")
		}
		hc := opts.HTTPClient
		if hc == nil {
			if hc, err = rest.HTTPClientFor(opts.RestConfig); err != nil {
				return nil, fmt.Errorf("failed to build an HTTP client for the backend: %w", err)
			}
		}
		if filter, err = filters.WithAuthenticationAndAuthorization(opts.RestConfig, hc); err != nil {
			return nil, fmt.Errorf("failed to build the fleet overview's authentication and authorization filter: %w", err)
		}
	}
	protected, err := filter(opts.Log, markReached(app))
	if err != nil {
		return nil, fmt.Errorf("failed to build the fleet overview's authentication and authorization filter: %w", err)
	}
	s.handler = withHeaders(s.secureRoutes(protected))
	return s, nil
}

// checkExposure refuses to serve plain HTTP without authentication on anything but loopback.
func checkExposure(bindAddress string, secure bool) error {
	host, _, err := net.SplitHostPort(bindAddress)
	if err != nil {
		return fmt.Errorf("invalid fleet overview bind address %q: %w", bindAddress, err)
	}
	if secure || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("binding the fleet overview to %s exposes it: add --fleet-overview-secure (HTTPS, every request authenticated and authorized against the backend cluster)", bindAddress)
}

// loopbackHostOnly answers only requests addressed to a loopback host (localhost, 127.0.0.1,
// [::1], as a browser through kubectl port-forward sends them): the plain overview has no
// authentication, and a web page the admin opens could otherwise read it through a DNS name it
// re-points at 127.0.0.1 (DNS rebinding).
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !isLoopback(strings.Trim(host, "[]")) {
			http.Error(w, "the fleet overview answers requests for localhost only", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler is the server's HTTP handler, with its headers and, when Secure, authentication.
func (s *Server) Handler() http.Handler { return s.handler }

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves the
// overview.
func (s *Server) NeedLeaderElection() bool { return false }

// Addr is the address the server listens on once Start listens, nil before.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Start serves until ctx ends, then shuts down gracefully.
func (s *Server) Start(ctx context.Context) error {
	l, err := s.listen(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.addr = l.Addr()
	s.mu.Unlock()
	log := s.opts.Log.WithValues("address", l.Addr().String(), "secure", s.opts.Secure)
	log.Info("Serving the fleet overview")

	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          nil,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			log.Error(err, "Failed to shut down the fleet overview gracefully")
		}
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("failed to serve the fleet overview on %s: %w", l.Addr(), err)
	}
	<-done
	log.Info("Stopped serving the fleet overview")
	return nil
}

func (s *Server) listen(ctx context.Context) (net.Listener, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", s.opts.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s for the fleet overview: %w", s.opts.BindAddress, err)
	}
	if !s.opts.Secure {
		return l, nil
	}
	cfg, err := s.tlsConfig(ctx)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return tls.NewListener(l, cfg), nil
}

// tlsConfig serves CertDir's tls.crt and tls.key, watched for changes, or else a self-signed
// certificate for localhost and 127.0.0.1, as controller-runtime's metrics server does.
func (s *Server) tlsConfig(ctx context.Context) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if s.opts.CertDir != "" {
		certPath, keyPath := filepath.Join(s.opts.CertDir, "tls.crt"), filepath.Join(s.opts.CertDir, "tls.key")
		if fileExists(certPath) && fileExists(keyPath) {
			w, err := certwatcher.New(certPath, keyPath)
			if err != nil {
				return nil, fmt.Errorf("failed to load the fleet overview's certificate from %s: %w", s.opts.CertDir, err)
			}
			go func() {
				if err := w.Start(ctx); err != nil {
					s.opts.Log.Error(err, "Failed to watch the fleet overview's certificate", "certDir", s.opts.CertDir)
				}
			}()
			cfg.GetCertificate = w.GetCertificate
			return cfg, nil
		}
	}
	cert, key, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil, "")
	if err != nil {
		return nil, fmt.Errorf("failed to generate a self-signed certificate for the fleet overview: %w", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("failed to load the fleet overview's self-signed certificate: %w", err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// withHeaders sets the headers of every response: a CSP without inline script or style, no
// content sniffing, no framing, no referrer.
func withHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}
