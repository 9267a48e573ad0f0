// Package server is the provisioner's HTTP API (docs/provisioner.md#http-api; the contract is
// internal/provisioner/api): a net/http ServeMux over a run store (jobs.Client), behind the shared
// X-Api-Key, plus the periodic sweep of finished runs.
//
// Every answer below /api/v1 is JSON (text/plain for logs) and never cached. Request bodies are
// bounded (MaxBodyBytes) and strict (unknown fields are refused). Logs are structured (log/slog)
// and name the route, status and run, never a body: credentials and kubeconfigs pass through
// the server but never into its logs.
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
)

// APIKeyHeader carries the shared key on every request below /api/v1.
const APIKeyHeader = "X-Api-Key"

// MaxBodyBytes bounds a request body; a larger one is answered with 413.
const MaxBodyBytes = 64 << 10

// DefaultSweepInterval is how often Run sweeps finished runs.
const DefaultSweepInterval = 10 * time.Minute

// Runs is the run store the server serves (jobs.Client).
type Runs interface {
	Create(ctx context.Context, req api.CreateRequest) (api.Provision, error)
	Get(ctx context.Context, id string) (api.Provision, error)
	Logs(ctx context.Context, id string) (io.ReadCloser, error)
	Kubeconfig(ctx context.Context, id string) (string, error)
	Sweep(ctx context.Context, retention time.Duration) (int, error)
}

var _ Runs = (*jobs.Client)(nil)

// Config configures a Server.
type Config struct {
	// APIKey is the shared key callers send in X-Api-Key. Required.
	APIKey string
	// Runs keeps the runs. Required.
	Runs Runs
	// Retention is how long a finished run stays readable before Run's sweep deletes it.
	// Required by Run.
	Retention time.Duration
	// SweepInterval is how often Run sweeps; DefaultSweepInterval when zero.
	SweepInterval time.Duration
	// Log receives the server's logs; slog.Default() when nil.
	Log *slog.Logger
}

// Server serves the provisioner's API.
type Server struct {
	cfg     Config
	keyHash [sha256.Size]byte
	handler http.Handler
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("the API key is empty")
	}
	if cfg.Runs == nil {
		return nil, errors.New("server.Config.Runs is required")
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{cfg: cfg, keyHash: sha256.Sum256([]byte(cfg.APIKey))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.Handle("POST /api/v1/provisions", s.authenticated(s.create))
	mux.Handle("GET /api/v1/provisions/{id}", s.authenticated(s.get))
	mux.Handle("GET /api/v1/provisions/{id}/logs", s.authenticated(s.logs))
	mux.Handle("GET /api/v1/provisions/{id}/kubeconfig", s.authenticated(s.kubeconfig))
	s.handler = s.logged(mux)
	return s, nil
}

// Handler is the API's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Run serves the API on addr and sweeps finished runs every SweepInterval until ctx ends, then
// shuts down gracefully.
func (s *Server) Run(ctx context.Context, addr string) error {
	if s.cfg.Retention <= 0 {
		return fmt.Errorf("the run retention must be positive, not %s", s.cfg.Retention)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on a listener it takes over.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.cfg.Retention <= 0 {
		_ = ln.Close()
		return fmt.Errorf("the run retention must be positive, not %s", s.cfg.Retention)
	}
	var err error
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Logs are streamed; a long one takes a while.
		WriteTimeout: 5 * time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelWarn),
		BaseContext:  func(net.Listener) context.Context { return ctx },
	}
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); s.sweepLoop(ctx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	s.cfg.Log.Info("Serving the provisioner API", "addr", ln.Addr().String())

	select {
	case err = <-serveErr:
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = srv.Shutdown(shutdownCtx)
		cancel()
	}
	<-sweepDone
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// sweepLoop sweeps once at start and then every SweepInterval (with up to 10% jitter).
func (s *Server) sweepLoop(ctx context.Context) {
	for {
		s.SweepOnce(ctx)
		jitter := time.Duration(rand.Int64N(int64(s.cfg.SweepInterval)/10 + 1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.SweepInterval + jitter):
		}
	}
}

// SweepOnce deletes the runs that ended more than Retention ago and logs what it did.
func (s *Server) SweepOnce(ctx context.Context) {
	n, err := s.cfg.Runs.Sweep(ctx, s.cfg.Retention)
	if err != nil && ctx.Err() == nil {
		s.cfg.Log.Error("Sweeping finished runs failed", "deleted", n, "error", err)
		return
	}
	if n > 0 {
		s.cfg.Log.Info("Swept finished runs", "deleted", n, "retention", s.cfg.Retention.String())
	}
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// authenticated lets through requests that carry the API key. The key is compared in constant
// time, as SHA-256 digests so that not even its length shows; a refusal says nothing more than
// "unauthorized".
func (s *Server) authenticated(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get(APIKeyHeader)))
		if subtle.ConstantTimeCompare(got[:], s.keyHash[:]) != 1 {
			writeJSON(w, http.StatusUnauthorized, api.ErrorResponse{Error: "unauthorized"})
			return
		}
		next(w, r)
	})
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	req, status, errResp := decodeCreate(w, r)
	if errResp != nil {
		writeJSON(w, status, errResp)
		return
	}
	p, err := s.cfg.Runs.Create(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setRun(r, p.ID)
	s.cfg.Log.Info("Started a provisioning run", "run", p.ID, "clusterID", p.ClusterID,
		"operation", p.Operation, "topology", req.Topology, "region", req.Region)
	w.Header().Set("Location", "/api/v1/provisions/"+p.ID)
	writeJSON(w, http.StatusAccepted, p)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	setRun(r, id)
	p, err := s.cfg.Runs.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	setRun(r, id)
	rc, err := s.cfg.Runs.Logs(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer func() { _ = rc.Close() }()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	noStore(w)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil && r.Context().Err() == nil {
		s.cfg.Log.Warn("Streaming a run's log stopped early", "run", id, "error", err)
	}
}

func (s *Server) kubeconfig(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	setRun(r, id)
	kc, err := s.cfg.Runs.Kubeconfig(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.KubeconfigResponse{Kubeconfig: kc})
}

// writeError answers err: the request's fault (400, naming the field), an unknown run (404), a
// run not there yet or another run of the cluster still active (409), or the server's fault (500, logged; the caller learns nothing more).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var fe *api.FieldError
	var nd *jobs.NotDoneError
	var active *jobs.ActiveRunError
	switch {
	case errors.As(err, &fe):
		writeJSON(w, http.StatusBadRequest, api.ErrorResponse{Error: fe.Error(), Field: fe.Field})
	case errors.Is(err, jobs.ErrNotFound):
		writeJSON(w, http.StatusNotFound, api.ErrorResponse{Error: "provision not found"})
	case errors.As(err, &active):
		writeJSON(w, http.StatusConflict, api.ErrorResponse{Error: active.Error(), ActiveRun: active.RunID})
	case errors.As(err, &nd):
		writeJSON(w, http.StatusConflict, api.ErrorResponse{Error: nd.Error()})
	case errors.Is(err, jobs.ErrNoKubeconfig):
		writeJSON(w, http.StatusConflict, api.ErrorResponse{Error: "the run succeeded but published no kubeconfig (destroy and plan runs publish none)"})
	case errors.Is(err, jobs.ErrNoPod):
		writeJSON(w, http.StatusConflict, api.ErrorResponse{Error: "the run has no pod yet, or no longer: no logs to show"})
	default:
		if r.Context().Err() == nil {
			s.cfg.Log.Error("Request failed", "method", r.Method, "route", r.Pattern, "run", r.PathValue("id"), "error", err)
		}
		writeJSON(w, http.StatusInternalServerError, api.ErrorResponse{Error: "internal error"})
	}
}

// decodeCreate reads a CreateRequest: one JSON object of at most MaxBodyBytes with only the
// contract's fields. Validation is the run store's (Create returns *api.FieldError).
func decodeCreate(w http.ResponseWriter, r *http.Request) (api.CreateRequest, int, *api.ErrorResponse) {
	var req api.CreateRequest
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return req, http.StatusUnsupportedMediaType, &api.ErrorResponse{Error: "the request body must be application/json"}
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil {
		// Exactly one value: anything after it is an error too.
		if err = dec.Decode(&struct{}{}); err == io.EOF {
			return req, 0, nil
		} else if err == nil {
			err = errors.New("the request body must hold exactly one JSON object")
		}
	}
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return req, http.StatusRequestEntityTooLarge, &api.ErrorResponse{Error: fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes)}
	case errors.Is(err, io.EOF):
		return req, http.StatusBadRequest, &api.ErrorResponse{Error: "the request body is empty"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return req, http.StatusBadRequest, &api.ErrorResponse{Error: "the request body is truncated JSON"}
	case errors.As(err, &syntax):
		return req, http.StatusBadRequest, &api.ErrorResponse{Error: fmt.Sprintf("the request body is not valid JSON (at byte %d)", syntax.Offset)}
	case errors.As(err, &typ):
		if typ.Field == "" {
			return req, http.StatusBadRequest, &api.ErrorResponse{Error: "the request body must be a JSON object"}
		}
		return req, http.StatusBadRequest, &api.ErrorResponse{Error: fmt.Sprintf("%s: must be a JSON %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value), Field: typ.Field}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field, uerr := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		if uerr != nil {
			field = ""
		}
		return req, http.StatusBadRequest, &api.ErrorResponse{Error: fmt.Sprintf("%s: unknown field", field), Field: field}
	}
	return req, http.StatusBadRequest, &api.ErrorResponse{Error: err.Error()}
}

// jsonKind names a Go kind as a JSON type.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "struct", kind == "map":
		return "object"
	case kind == "slice", kind == "array":
		return "array"
	case kind == "bool":
		return "boolean"
	}
	return kind
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	noStore(w)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// runKey carries the run a request is about to the access log.
type runKey struct{}

type runHolder struct{ id string }

func setRun(r *http.Request, id string) {
	if h, ok := r.Context().Value(runKey{}).(*runHolder); ok {
		h.id = id
	}
}

// statusWriter records the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logged writes one access-log line per request: method, route, status, run, duration. Never a
// header (the key) or a body (credentials, kubeconfigs). Probes log at debug level.
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		holder := &runHolder{}
		r = r.WithContext(context.WithValue(r.Context(), runKey{}, holder))
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		level := slog.LevelInfo
		if r.URL.Path == "/health" {
			level = slog.LevelDebug
		}
		attrs := []any{"method", r.Method, "route", r.Pattern, "status", sw.status, "durationMs", time.Since(start).Milliseconds()}
		if holder.id != "" {
			attrs = append(attrs, "run", holder.id)
		}
		s.cfg.Log.Log(r.Context(), level, "Handled a request", attrs...)
	})
}
