// Package server is gitops-scaffolder's HTTP API (docs/scaffolder.md#http-api; the contract is
// internal/scaffolder/api): a net/http ServeMux over a run store (jobs.Client), behind the shared
// X-Api-Key, plus the periodic sweep of finished scaffolds. The HTTP pieces (key check, strict
// bounded JSON, access log, serving with a sweep) are internal/jobservice's, shared with the
// provisioner.
//
// Every answer below /api/v1 is JSON and never cached. Logs are structured (log/slog) and name
// the route, status and scaffold, never a body, a header or a Secret's data.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
)

// Runs is the run store the server serves (jobs.Client).
type Runs interface {
	Create(ctx context.Context, req api.Request) (api.Scaffold, error)
	Get(ctx context.Context, id string) (api.Scaffold, error)
	Sweep(ctx context.Context, retention time.Duration) (int, error)
}

var _ Runs = (*jobs.Client)(nil)

// Config configures a Server.
type Config struct {
	// APIKey is the shared key callers send in X-Api-Key (the manager's
	// GITOPS_SCAFFOLDER_API_KEY). Required.
	APIKey string
	// Runs keeps the scaffolds. Required.
	Runs Runs
	// Retention is how long a finished scaffold stays readable before the sweep deletes it.
	// Required by Run and Serve.
	Retention time.Duration
	// SweepInterval is how often the sweep runs; jobservice.DefaultSweepInterval when zero.
	SweepInterval time.Duration
	// Log receives the server's logs; slog.Default() when nil.
	Log *slog.Logger
}

// Server serves gitops-scaffolder's API.
type Server struct {
	cfg     Config
	service *jobservice.Service
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	keys, err := jobservice.NewKeyCheck(api.APIKeyHeader, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	if cfg.Runs == nil {
		return nil, errors.New("server.Config.Runs is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", jobservice.Health)
	mux.Handle("POST "+api.ScaffoldsPath, keys.Wrap(s.create))
	mux.Handle("GET "+api.ScaffoldsPath+"/{id}", keys.Wrap(s.get))
	s.service = &jobservice.Service{
		Name:          "gitops-scaffolder",
		Handler:       jobservice.AccessLog(cfg.Log, mux),
		Sweep:         cfg.Runs.Sweep,
		Retention:     cfg.Retention,
		SweepInterval: cfg.SweepInterval,
		Log:           cfg.Log,
		// No answer streams: a JSON document is written at once.
		WriteTimeout: 30 * time.Second,
	}
	return s, nil
}

// Handler is the API's http.Handler.
func (s *Server) Handler() http.Handler { return s.service.Handler }

// Run serves the API on addr and sweeps finished scaffolds until ctx ends, then shuts down
// gracefully.
func (s *Server) Run(ctx context.Context, addr string) error { return s.service.Run(ctx, addr) }

// Serve is Run on a listener it takes over.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error { return s.service.Serve(ctx, ln) }

// SweepOnce deletes the scaffolds that ended more than Retention ago and logs what it did.
func (s *Server) SweepOnce(ctx context.Context) { s.service.SweepOnce(ctx) }

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req api.Request
	if derr := jobservice.DecodeJSON(w, r, &req); derr != nil {
		derr.Write(w)
		return
	}
	sc, err := s.cfg.Runs.Create(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobservice.SetRun(r, sc.ID)
	s.cfg.Log.Info("Started a scaffold", "run", sc.ID, "clusterID", sc.ClusterID, "slug", req.Slug,
		"workspace", req.Workspace)
	w.Header().Set("Location", api.ScaffoldsPath+"/"+sc.ID)
	jobservice.WriteJSON(w, http.StatusAccepted, sc)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	jobservice.SetRun(r, id)
	sc, err := s.cfg.Runs.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobservice.WriteJSON(w, http.StatusOK, sc)
}

// writeError answers err: the request's fault (400, naming the field), an unknown scaffold (404),
// or the server's fault (500, logged; the caller learns nothing more).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var fe *api.FieldError
	switch {
	case errors.As(err, &fe):
		jobservice.WriteError(w, http.StatusBadRequest, fe.Error(), fe.Field)
	case errors.Is(err, jobrun.ErrNotFound):
		jobservice.WriteError(w, http.StatusNotFound, "scaffold not found", "")
	default:
		if r.Context().Err() == nil {
			s.cfg.Log.Error("Request failed", "method", r.Method, "route", r.Pattern, "run", r.PathValue("id"), "error", err)
		}
		jobservice.WriteError(w, http.StatusInternalServerError, "internal error", "")
	}
}
