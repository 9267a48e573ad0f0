package jobservice

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
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

// RESTConfig is the cluster the service keeps its runs on: KUBECONFIG's when kubeconfig is set,
// the in-cluster config otherwise.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
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
