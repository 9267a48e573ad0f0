package main

import (
	"fmt"
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
// (docs/scaffolder.md#configuration): the job services' Settings and the runner's options.
type config struct {
	jobservice.Settings
	// TemplatesConfigMap (TEMPLATES_CONFIGMAP) is an admin's templates ConfigMap in the jobs
	// namespace, mounted into every run; empty: the templates built into the runner.
	TemplatesConfigMap string
	// ChartMirror (CHART_MIRROR) replaces every generated HelmRepository's URL; an http(s) or
	// oci URL.
	ChartMirror string
	// AllowNetworks (ALLOW_NETWORKS) lists CIDRs the runner may dial although its dial guard
	// refuses their class, comma-separated.
	AllowNetworks string
	// SealedSecretsTimeout (SEALED_SECRETS_TIMEOUT) bounds the wait for the target's
	// sealed-secrets controller; zero: the runner's default.
	SealedSecretsTimeout time.Duration
}

// configFromEnv reads the configuration through getenv (os.Getenv).
func configFromEnv(getenv func(string) string) (config, error) {
	e := jobservice.NewEnv(getenv)
	c := config{
		Settings:           e.Settings(api.DefaultJobsNamespace, jobs.DefaultActiveDeadline, jobs.RunnerImage),
		TemplatesConfigMap: e.Or("TEMPLATES_CONFIGMAP", ""),
		ChartMirror:        e.Or("CHART_MIRROR", ""),
		AllowNetworks:      e.Or("ALLOW_NETWORKS", ""),
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
