package jobservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Env reads a job service's configuration from its environment and collects every error, so
// one start reports everything wrong at once. An error never carries a value (API_KEY is one).
type Env struct {
	getenv func(string) string
	errs   []error
}

// NewEnv reads through getenv (os.Getenv).
func NewEnv(getenv func(string) string) *Env { return &Env{getenv: getenv} }

// Get is key's value, verbatim.
func (e *Env) Get(key string) string { return e.getenv(key) }

// Or is key's value, trimmed, or def when that is empty.
func (e *Env) Or(key, def string) string {
	if v := strings.TrimSpace(e.getenv(key)); v != "" {
		return v
	}
	return def
}

// Required is key's value; an error when it is empty.
func (e *Env) Required(key string) string {
	v := e.getenv(key)
	if v == "" {
		e.errs = append(e.errs, fmt.Errorf("%s is required", key))
	}
	return v
}

// Namespace is key's value or def, which must be a namespace name.
func (e *Env) Namespace(key, def string) string {
	v := e.Or(key, def)
	if msgs := validation.IsDNS1123Label(v); len(msgs) != 0 {
		e.errs = append(e.errs, fmt.Errorf("%s %q is not a namespace name: %s", key, v, strings.Join(msgs, "; ")))
	}
	return v
}

// Duration is key's value or def, a duration of at least min.
func (e *Env) Duration(key, def string, min time.Duration) time.Duration {
	v := e.Or(key, def)
	d, err := time.ParseDuration(v)
	if err != nil || d < min {
		e.errs = append(e.errs, fmt.Errorf("%s %q must be a duration of at least %s, e.g. %s", key, v, min, def))
	}
	return d
}

// LogLevel is key's value (debug, info, warn, error), info when unset.
func (e *Env) LogLevel(key string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(e.Or(key, "info"))); err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %w", key, err))
	}
	return l
}

// Fail records an error of the caller's own checks.
func (e *Env) Fail(err error) { e.errs = append(e.errs, err) }

// Err is every error met so far, joined; nil when none.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// restConfig is the cluster the service keeps its runs on: KUBECONFIG's when kubeconfig is set,
// the in-cluster config otherwise.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("failed to load KUBECONFIG %s: %w", kubeconfig, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load the in-cluster config (set KUBECONFIG outside a cluster): %w", err)
	}
	return c, nil
}

// Settings are what every job service reads from its environment.
type Settings struct {
	// APIKey (API_KEY, required) is the shared key of every /api/v1 request.
	APIKey string
	// Kubeconfig (KUBECONFIG) reaches the jobs' cluster; empty: the in-cluster config.
	Kubeconfig string
	// ListenAddr (LISTEN_ADDR, default :8080) serves the API and /health.
	ListenAddr string
	// JobsNamespace (JOBS_NAMESPACE) holds the runs.
	JobsNamespace string
	// Retention (RUN_RETENTION, default 168h, at least 1m) is how long a finished run stays
	// readable.
	Retention time.Duration
	// Deadline (RUN_DEADLINE, at least 1m) bounds a run (activeDeadlineSeconds).
	Deadline time.Duration
	// RunnerImage (RUNNER_IMAGE) is the runner's image.
	RunnerImage string
	// LogLevel (LOG_LEVEL: debug, info, warn, error; default info).
	LogLevel slog.Level
}

// Settings reads the Settings, with the service's defaults for JOBS_NAMESPACE, RUN_DEADLINE and
// RUNNER_IMAGE.
func (e *Env) Settings(namespace string, deadline time.Duration, image string) Settings {
	return Settings{
		APIKey:        e.Required("API_KEY"),
		Kubeconfig:    e.Get("KUBECONFIG"),
		ListenAddr:    e.Or("LISTEN_ADDR", ":8080"),
		JobsNamespace: e.Namespace("JOBS_NAMESPACE", namespace),
		Retention:     e.Duration("RUN_RETENTION", "168h", time.Minute),
		Deadline:      e.Duration("RUN_DEADLINE", deadline.String(), time.Minute),
		RunnerImage:   e.Or("RUNNER_IMAGE", image),
		LogLevel:      e.LogLevel("LOG_LEVEL"),
	}
}

// Level is the log level (for Main).
func (s Settings) Level() slog.Level { return s.LogLevel }

// Clientset is a client of the jobs' cluster (KUBECONFIG's or the in-cluster one) that names
// itself userAgent.
func (s Settings) Clientset(userAgent string) (kubernetes.Interface, error) {
	c, err := restConfig(s.Kubeconfig)
	if err != nil {
		return nil, err
	}
	c.UserAgent = userAgent
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("failed to build the Kubernetes client: %w", err)
	}
	return cs, nil
}

// Main is a job service's main: it reads its configuration through load (exit status 2 when it
// is wrong), logs JSON to stderr at the configured level, and runs run until SIGINT or SIGTERM
// (exit status 1 when run fails).
func Main[C interface{ Level() slog.Level }](name string, load func(getenv func(string) string) (C, error), run func(context.Context, C, *slog.Logger) error) {
	cfg, err := load(os.Getenv)
	if err != nil {
		slog.Error("Invalid configuration", "error", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.Level()}))
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("The "+name+" stopped with an error", "error", err)
		stop()
		os.Exit(1)
	}
}
