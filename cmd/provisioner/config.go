package main

import (
	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
)

// config is the provisioner's configuration, read from the environment
// (docs/provisioner.md#configuration): the job services' Settings, nothing more.
type config = jobservice.Settings

// configFromEnv reads the configuration through getenv (os.Getenv).
func configFromEnv(getenv func(string) string) (config, error) {
	e := jobservice.NewEnv(getenv)
	c := e.Settings(api.DefaultJobsNamespace, jobs.DefaultActiveDeadline, jobs.RunnerImage)
	return c, e.Err()
}
