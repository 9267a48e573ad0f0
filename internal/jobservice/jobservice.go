// Package jobservice is the HTTP side that the platform's job services (the provisioner,
// docs/provisioner.md#http-api, and the gitops-scaffolder, docs/scaffolder.md#http-api) share:
// the X-Api-Key check (constant time, on SHA-256 digests), strict bounded JSON request bodies
// whose errors name the field, JSON answers that are never cached, an access log that never
// carries a header or a body, and Service: serving with a graceful shutdown next to a jittered
// sweep of finished runs.
//
// Each service keeps its own routes and contract (internal/provisioner/api,
// internal/scaffolder/api); both contracts' error bodies are {"error": "...", "field": "..."},
// which is what this package writes.
package jobservice

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
	"reflect"
	"strconv"
	"strings"
	"time"
)

// MaxBodyBytes bounds a request body; a larger one is answered with 413.
const MaxBodyBytes = 64 << 10

// DefaultSweepInterval is how often a Service sweeps finished runs.
const DefaultSweepInterval = 10 * time.Minute

// errorBody is the contracts' error body (api.ErrorResponse in each).
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// WriteError answers status with {"error": msg, "field": field} (field omitted when empty).
func WriteError(w http.ResponseWriter, status int, msg, field string) {
	WriteJSON(w, status, errorBody{Error: msg, Field: field})
}

// WriteJSON answers status with v as JSON, not to be cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	NoStore(w)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// NoStore forbids caching the answer (and sniffing its type).
func NoStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// Health answers GET /health: 200 {"status":"ok"}, no key.
func Health(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// KeyCheck admits requests that carry the shared API key in a header (the contract's, X-Api-Key).
type KeyCheck struct {
	header string
	hash   [sha256.Size]byte
}

// NewKeyCheck returns the check of key, which must not be empty, in header.
func NewKeyCheck(header, key string) (*KeyCheck, error) {
	if key == "" {
		return nil, errors.New("the API key is empty")
	}
	return &KeyCheck{header: header, hash: sha256.Sum256([]byte(key))}, nil
}

// Wrap lets through to next the requests that carry the key. The key is compared in constant
// time, as SHA-256 digests so that not even its length shows; a refusal is 401 and says nothing
// more than "unauthorized".
func (k *KeyCheck) Wrap(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get(k.header)))
		if subtle.ConstantTimeCompare(got[:], k.hash[:]) != 1 {
			WriteError(w, http.StatusUnauthorized, "unauthorized", "")
			return
		}
		next(w, r)
	})
}

// DecodeError is a request body that cannot be decoded: Status is 400, 413 or 415; Field names
// the request's field at fault when there is one.
type DecodeError struct {
	Status  int
	Message string
	Field   string
}

func (e *DecodeError) Error() string { return e.Message }

// Write answers the error.
func (e *DecodeError) Write(w http.ResponseWriter) { WriteError(w, e.Status, e.Message, e.Field) }

// DecodeJSON reads r's body into v: one JSON object of at most MaxBodyBytes, with only v's fields
// (unknown fields, trailing data and wrong JSON types are errors naming the field), in a body
// whose Content-Type, when set, is application/json. Validation is the caller's.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) *DecodeError {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &DecodeError{Status: http.StatusUnsupportedMediaType, Message: "the request body must be application/json"}
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Exactly one value: anything after it is an error too (read as a raw value, so that it
		// is not mistaken for an unknown field).
		var extra json.RawMessage
		if err = dec.Decode(&extra); err == io.EOF {
			return nil
		} else if err == nil {
			err = errors.New("the request body must hold exactly one JSON object")
		}
	}
	bad := func(msg, field string) *DecodeError {
		return &DecodeError{Status: http.StatusBadRequest, Message: msg, Field: field}
	}
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return &DecodeError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes)}
	case errors.Is(err, io.EOF):
		return bad("the request body is empty", "")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return bad("the request body is truncated JSON", "")
	case errors.As(err, &syntax):
		return bad(fmt.Sprintf("the request body is not valid JSON (at byte %d)", syntax.Offset), "")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return bad("the request body must be a JSON object", "")
		}
		return bad(fmt.Sprintf("%s: must be a JSON %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value), typ.Field)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field, uerr := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		if uerr != nil {
			field = ""
		}
		return bad(fmt.Sprintf("%s: unknown field", field), field)
	}
	return bad(err.Error(), "")
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

// runKey carries the run a request is about to the access log.
type runKey struct{}

type runHolder struct{ id string }

// SetRun names the run r is about in r's access-log line.
func SetRun(r *http.Request, id string) {
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

// AccessLog writes one line per request to log: method, route, status, run (SetRun), duration.
// Never a header (the key) or a body (credentials, kubeconfigs). /health logs at debug level.
func AccessLog(log *slog.Logger, next http.Handler) http.Handler {
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
		log.Log(r.Context(), level, "Handled a request", attrs...)
	})
}

// Sweeper is a job service's run store as far as Service needs it.
type Sweeper interface {
	// Sweep deletes the runs that ended more than retention ago and says how many.
	Sweep(ctx context.Context, retention time.Duration) (int, error)
}

// Config configures a job service's server (each service's server.Config is a Config of its run
// store).
type Config[R Sweeper] struct {
	// APIKey is the shared key callers send in the contract's key header. Required.
	APIKey string
	// Runs keeps the runs. Required.
	Runs R
	// Retention is how long a finished run stays readable before the sweep deletes it.
	// Required by Run and Serve.
	Retention time.Duration
	// SweepInterval is how often the sweep runs; DefaultSweepInterval when zero.
	SweepInterval time.Duration
	// Log receives the server's logs; slog.Default() when nil.
	Log *slog.Logger
}

// Service serves a job service's API and sweeps its finished runs.
type Service struct {
	name          string
	handler       http.Handler
	sweep         func(ctx context.Context, retention time.Duration) (int, error)
	retention     time.Duration
	sweepInterval time.Duration
	log           *slog.Logger
	writeTimeout  time.Duration
}

// NewService returns the Service name (e.g. "provisioner") of cfg: GET /health, the routes
// routes adds to mux (wrapping those below /api/v1 in keys, the check of cfg.APIKey in header
// keyHeader), behind the access log. writeTimeout bounds writing an answer (a streamed log takes
// a while).
func NewService[R Sweeper](name, keyHeader string, cfg Config[R], writeTimeout time.Duration, routes func(mux *http.ServeMux, keys *KeyCheck)) (*Service, error) {
	keys, err := NewKeyCheck(keyHeader, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	if isNil(cfg.Runs) {
		return nil, errors.New("the server's Runs is required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	interval := cfg.SweepInterval
	if interval == 0 {
		interval = DefaultSweepInterval
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", Health)
	routes(mux, keys)
	return &Service{name: name, handler: AccessLog(log, mux), sweep: cfg.Runs.Sweep, retention: cfg.Retention,
		sweepInterval: interval, log: log, writeTimeout: writeTimeout}, nil
}

// isNil reports whether v is nil, or a nil pointer, map, slice, function or channel in an
// interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Handler is the API's http.Handler.
func (s *Service) Handler() http.Handler { return s.handler }

// Log is the service's logger.
func (s *Service) Log() *slog.Logger { return s.log }

// Run serves the API on addr until ctx ends (see Serve).
func (s *Service) Run(ctx context.Context, addr string) error {
	if s.retention <= 0 {
		return fmt.Errorf("the run retention must be positive, not %s", s.retention)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves the API on ln, which it takes over, and sweeps finished runs once at start and
// then every SweepInterval (with up to 10% jitter) until ctx ends, then shuts down gracefully
// (30 s for requests under way).
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
	if s.retention <= 0 {
		_ = ln.Close()
		return fmt.Errorf("the run retention must be positive, not %s", s.retention)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.writeTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); s.sweepLoop(ctx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	s.log.Info("Serving the "+s.name+" API", "addr", ln.Addr().String())

	var err error
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

func (s *Service) sweepLoop(ctx context.Context) {
	for {
		s.SweepOnce(ctx)
		jitter := time.Duration(rand.Int64N(int64(s.sweepInterval)/10 + 1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.sweepInterval + jitter):
		}
	}
}

// SweepOnce deletes the runs that ended more than the retention ago and logs what it did.
func (s *Service) SweepOnce(ctx context.Context) {
	n, err := s.sweep(ctx, s.retention)
	if err != nil && ctx.Err() == nil {
		s.log.Error("Sweeping finished runs failed", "deleted", n, "error", err)
		return
	}
	if n > 0 {
		s.log.Info("Swept finished runs", "deleted", n, "retention", s.retention.String())
	}
}
