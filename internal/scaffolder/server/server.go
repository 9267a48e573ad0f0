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

// Config configures a Server: the shared key (the manager's GITOPS_SCAFFOLDER_API_KEY), the run
// store, the retention and sweep interval, the logger.
type Config = jobservice.Config[Runs]

// Server serves gitops-scaffolder's API (Handler) and sweeps finished scaffolds (Run, Serve,
// SweepOnce).
type Server struct {
	*jobservice.Service
	runs Runs
	log  *slog.Logger
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	s := &Server{runs: cfg.Runs}
	// No answer streams: a JSON document is written at once.
	svc, err := jobservice.NewService("gitops-scaffolder", api.APIKeyHeader, cfg, 30*time.Second, func(mux *http.ServeMux, keys *jobservice.KeyCheck) {
		mux.Handle("POST "+api.ScaffoldsPath, keys.Wrap(s.create))
		mux.Handle("GET "+api.ScaffoldsPath+"/{id}", keys.Wrap(s.get))
	})
	if err != nil {
		return nil, err
	}
	s.Service, s.log = svc, svc.Log()
	return s, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req api.Request
	if derr := jobservice.DecodeJSON(w, r, &req); derr != nil {
		derr.Write(w)
		return
	}
	sc, err := s.runs.Create(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobservice.SetRun(r, sc.ID)
	s.log.Info("Started a scaffold", "run", sc.ID, "clusterID", sc.ClusterID, "slug", req.Slug,
		"workspace", req.Workspace)
	w.Header().Set("Location", api.ScaffoldsPath+"/"+sc.ID)
	jobservice.WriteJSON(w, http.StatusAccepted, sc)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	jobservice.SetRun(r, id)
	sc, err := s.runs.Get(r.Context(), id)
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
			s.log.Error("Request failed", "method", r.Method, "route", r.Pattern, "run", r.PathValue("id"), "error", err)
		}
		jobservice.WriteError(w, http.StatusInternalServerError, "internal error", "")
	}
}
