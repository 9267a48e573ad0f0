package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
)

// config is the gitops-scaffolder's configuration, read from the environment
// (docs/scaffolder.md#configuration).
type config struct {
	// APIKey (API_KEY, required) is the shared key of every /api/v1 request.
	APIKey string
	// Kubeconfig (KUBECONFIG) reaches the jobs' cluster; empty: the in-cluster config.
	Kubeconfig string
	// ListenAddr (LISTEN_ADDR, default :8080) serves the API and /health.
	ListenAddr string
	// JobsNamespace (JOBS_NAMESPACE, default kubeopera-provisioning) holds the runs.
	JobsNamespace string
	// Retention (RUN_RETENTION, default 168h) is how long a finished scaffold stays readable.
	Retention time.Duration
	// Deadline (RUN_DEADLINE, default 30m) bounds a scaffold (activeDeadlineSeconds).
	Deadline time.Duration
	// RunnerImage (RUNNER_IMAGE, default jobs.RunnerImage) is the scaffold runner's image.
	RunnerImage string
	// TemplatesConfigMap (TEMPLATES_CONFIGMAP) is an admin's templates ConfigMap in the jobs
	// namespace, mounted into every run; empty: the templates built into the runner.
	TemplatesConfigMap string
	// ChartMirror (CHART_MIRROR) replaces every generated HelmRepository's URL; an http(s) URL.
	ChartMirror string
	// AllowNetworks (ALLOW_NETWORKS) lists CIDRs the runner may dial although its dial guard
	// refuses their class, comma-separated.
	AllowNetworks string
	// SealedSecretsTimeout (SEALED_SECRETS_TIMEOUT) bounds the wait for the target's
	// sealed-secrets controller; zero: the runner's default.
	SealedSecretsTimeout time.Duration
	// LogLevel (LOG_LEVEL: debug, info, warn, error; default info).
	LogLevel slog.Level
}

// configFromEnv reads the configuration through getenv (os.Getenv).
func configFromEnv(getenv func(string) string) (config, error) {
	e := jobservice.NewEnv(getenv)
	c := config{
		APIKey:             e.Required("API_KEY"),
		Kubeconfig:         e.Get("KUBECONFIG"),
		ListenAddr:         e.Or("LISTEN_ADDR", ":8080"),
		JobsNamespace:      e.Namespace("JOBS_NAMESPACE", api.DefaultJobsNamespace),
		Retention:          e.Duration("RUN_RETENTION", "168h", time.Minute),
		Deadline:           e.Duration("RUN_DEADLINE", jobs.DefaultActiveDeadline.String(), time.Minute),
		RunnerImage:        e.Or("RUNNER_IMAGE", jobs.RunnerImage),
		TemplatesConfigMap: e.Or("TEMPLATES_CONFIGMAP", ""),
		ChartMirror:        e.Or("CHART_MIRROR", ""),
		AllowNetworks:      e.Or("ALLOW_NETWORKS", ""),
		LogLevel:           e.LogLevel("LOG_LEVEL"),
	}
	if e.Or("SEALED_SECRETS_TIMEOUT", "") != "" {
		c.SealedSecretsTimeout = e.Duration("SEALED_SECRETS_TIMEOUT", "10m", time.Second)
	}
	if c.TemplatesConfigMap != "" && len(validation.IsDNS1123Subdomain(c.TemplatesConfigMap)) != 0 {
		e.Fail(fmt.Errorf("TEMPLATES_CONFIGMAP %q is not a ConfigMap name", c.TemplatesConfigMap))
	}
	if c.ChartMirror != "" {
		if u, err := url.Parse(c.ChartMirror); err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci") || u.Host == "" || u.User != nil {
			e.Fail(fmt.Errorf("CHART_MIRROR %q must be an http(s) or oci URL without credentials", c.ChartMirror))
		}
	}
	if c.AllowNetworks != "" {
		for _, n := range strings.Split(c.AllowNetworks, ",") {
			if _, err := netip.ParsePrefix(strings.TrimSpace(n)); err != nil {
				e.Fail(fmt.Errorf("ALLOW_NETWORKS: %q is not a CIDR", strings.TrimSpace(n)))
			}
		}
	}
	return c, e.Err()
}
