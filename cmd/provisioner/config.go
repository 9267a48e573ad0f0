package main

import (
	"log/slog"
	"time"

	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
)

// config is the provisioner's configuration, read from the environment
// (docs/provisioner.md#configuration).
type config struct {
	// APIKey (API_KEY, required) is the shared key of every /api/v1 request.
	APIKey string
	// Kubeconfig (KUBECONFIG) reaches the jobs' cluster; empty: the in-cluster config.
	Kubeconfig string
	// ListenAddr (LISTEN_ADDR, default :8080) serves the API and /health.
	ListenAddr string
	// JobsNamespace (JOBS_NAMESPACE, default kubeopera-provisioning) holds the runs.
	JobsNamespace string
	// Retention (RUN_RETENTION, default 168h) is how long a finished run stays readable.
	Retention time.Duration
	// Deadline (RUN_DEADLINE, default 2h) bounds a run (activeDeadlineSeconds).
	Deadline time.Duration
	// RunnerImage (RUNNER_IMAGE, default jobs.RunnerImage) is the runner's image.
	RunnerImage string
	// LogLevel (LOG_LEVEL: debug, info, warn, error; default info).
	LogLevel slog.Level
}

// configFromEnv reads the configuration through getenv (os.Getenv).
func configFromEnv(getenv func(string) string) (config, error) {
	e := jobservice.NewEnv(getenv)
	c := config{
		APIKey:        e.Required("API_KEY"),
		Kubeconfig:    e.Get("KUBECONFIG"),
		ListenAddr:    e.Or("LISTEN_ADDR", ":8080"),
		JobsNamespace: e.Namespace("JOBS_NAMESPACE", api.DefaultJobsNamespace),
		Retention:     e.Duration("RUN_RETENTION", "168h", time.Minute),
		Deadline:      e.Duration("RUN_DEADLINE", jobs.DefaultActiveDeadline.String(), time.Minute),
		RunnerImage:   e.Or("RUNNER_IMAGE", jobs.RunnerImage),
		LogLevel:      e.LogLevel("LOG_LEVEL"),
	}
	return c, e.Err()
}
