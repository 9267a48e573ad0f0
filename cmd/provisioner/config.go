package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

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
	or := func(key, def string) string {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			return v
		}
		return def
	}
	c := config{
		APIKey:        getenv("API_KEY"),
		Kubeconfig:    getenv("KUBECONFIG"),
		ListenAddr:    or("LISTEN_ADDR", ":8080"),
		JobsNamespace: or("JOBS_NAMESPACE", api.DefaultJobsNamespace),
		RunnerImage:   or("RUNNER_IMAGE", jobs.RunnerImage),
	}
	var errs []error
	if c.APIKey == "" {
		errs = append(errs, errors.New("API_KEY is required"))
	}
	if msgs := validation.IsDNS1123Label(c.JobsNamespace); len(msgs) != 0 {
		errs = append(errs, fmt.Errorf("JOBS_NAMESPACE %q is not a namespace name: %s", c.JobsNamespace, strings.Join(msgs, "; ")))
	}
	duration := func(key, def string, min time.Duration) time.Duration {
		v := or(key, def)
		d, err := time.ParseDuration(v)
		if err != nil || d < min {
			errs = append(errs, fmt.Errorf("%s %q must be a duration of at least %s, e.g. %s", key, v, min, def))
		}
		return d
	}
	c.Retention = duration("RUN_RETENTION", "168h", time.Minute)
	c.Deadline = duration("RUN_DEADLINE", jobs.DefaultActiveDeadline.String(), time.Minute)
	if err := c.LogLevel.UnmarshalText([]byte(or("LOG_LEVEL", "info"))); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL: %w", err))
	}
	return c, errors.Join(errs...)
}
