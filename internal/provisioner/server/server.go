// Package server is the provisioner's HTTP API (docs/provisioner.md#http-api; the contract is
// internal/provisioner/api): a net/http ServeMux over a run store (jobs.Client), behind the shared
// X-Api-Key, plus the periodic sweep of finished runs.
//
// Every answer below /api/v1 is JSON (text/plain for logs) and never cached. Request bodies are
// bounded (jobservice.MaxBodyBytes) and strict (unknown fields are refused): the HTTP pieces
// are internal/jobservice's, shared with the gitops-scaffolder. Logs are structured (log/slog)
// and name the route, status and run, never a body: credentials and kubeconfigs pass through
// the server but never into its logs.
package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
)

// APIKeyHeader carries the shared key on every request below /api/v1.
const APIKeyHeader = "X-Api-Key"

// Runs is the run store the server serves (jobs.Client).
type Runs interface {
	Create(ctx context.Context, req api.CreateRequest) (api.Provision, error)
	Get(ctx context.Context, id string) (api.Provision, error)
	Logs(ctx context.Context, id string) (io.ReadCloser, error)
	Kubeconfig(ctx context.Context, id string) (string, error)
	Sweep(ctx context.Context, retention time.Duration) (int, error)
}

var _ Runs = (*jobs.Client)(nil)

// Config configures a Server: the shared key, the run store, the retention and sweep interval,
// the logger.
type Config = jobservice.Config[Runs]

// Server serves the provisioner's API (Handler) and sweeps finished runs (Run, Serve,
// SweepOnce).
type Server struct {
	*jobservice.Service
	runs Runs
	log  *slog.Logger
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	s := &Server{runs: cfg.Runs}
	// Logs are streamed; a long one takes a while.
	svc, err := jobservice.NewService("provisioner", APIKeyHeader, cfg, 5*time.Minute, func(mux *http.ServeMux, keys *jobservice.KeyCheck) {
		mux.Handle("POST /api/v1/provisions", keys.Wrap(s.create))
		mux.Handle("GET /api/v1/provisions/{id}", keys.Wrap(s.get))
		mux.Handle("GET /api/v1/provisions/{id}/logs", keys.Wrap(s.logs))
		mux.Handle("GET /api/v1/provisions/{id}/kubeconfig", keys.Wrap(s.kubeconfig))
	})
	if err != nil {
		return nil, err
	}
	s.Service, s.log = svc, svc.Log()
	return s, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if derr := jobservice.DecodeJSON(w, r, &req); derr != nil {
		derr.Write(w)
		return
	}
	p, err := s.runs.Create(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobservice.SetRun(r, p.ID)
	s.log.Info("Started a provisioning run", "run", p.ID, "clusterID", p.ClusterID,
		"operation", p.Operation, "topology", req.Topology, "region", req.Region)
	w.Header().Set("Location", "/api/v1/provisions/"+p.ID)
	jobservice.WriteJSON(w, http.StatusAccepted, p)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	jobservice.SetRun(r, id)
	p, err := s.runs.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobservice.WriteJSON(w, http.StatusOK, p)
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	jobservice.SetRun(r, id)
	rc, err := s.runs.Logs(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer func() { _ = rc.Close() }()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	jobservice.NoStore(w)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil && r.Context().Err() == nil {
		s.log.Warn("Streaming a run's log stopped early", "run", id, "error", err)
	}
}

func (s *Server) kubeconfig(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	jobservice.SetRun(r, id)
	kc, err := s.runs.Kubeconfig(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	jobservice.WriteJSON(w, http.StatusOK, api.KubeconfigResponse{Kubeconfig: kc})
}

// writeError answers err: the request's fault (400, naming the field), an unknown run (404), a
// run not there yet or another run of the cluster still active (409), or the server's fault (500, logged; the caller learns nothing more).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var fe *api.FieldError
	var nd *jobs.NotDoneError
	var active *jobs.ActiveRunError
	switch {
	case errors.As(err, &fe):
		jobservice.WriteError(w, http.StatusBadRequest, fe.Error(), fe.Field)
	case errors.Is(err, jobrun.ErrNotFound):
		jobservice.WriteError(w, http.StatusNotFound, "provision not found", "")
	case errors.As(err, &active):
		jobservice.WriteJSON(w, http.StatusConflict, api.ErrorResponse{Error: active.Error(), ActiveRun: active.RunID})
	case errors.As(err, &nd):
		jobservice.WriteError(w, http.StatusConflict, nd.Error(), "")
	case errors.Is(err, jobs.ErrNoKubeconfig):
		jobservice.WriteError(w, http.StatusConflict, "the run succeeded but published no kubeconfig (destroy and plan runs publish none)", "")
	case errors.Is(err, jobs.ErrNoPod):
		jobservice.WriteError(w, http.StatusConflict, "the run has no pod yet, or no longer: no logs to show", "")
	default:
		if r.Context().Err() == nil {
			s.log.Error("Request failed", "method", r.Method, "route", r.Pattern, "run", r.PathValue("id"), "error", err)
		}
		jobservice.WriteError(w, http.StatusInternalServerError, "internal error", "")
	}
}
