// Command provisioner is the cluster provisioner (docs/provisioner.md): an HTTP API that starts one
// Kubernetes Job per Terraform run in the jobs namespace and answers for it from the Job's live
// state. It has no database: a run is its Job and the objects the Job owns, swept RUN_RETENTION
// after it ended.
//
// Environment: API_KEY (required), KUBECONFIG (in-cluster config when unset), LISTEN_ADDR
// (:8080), JOBS_NAMESPACE (kubeopera-provisioning), RUN_RETENTION (168h), RUN_DEADLINE (2h),
// RUNNER_IMAGE (the pinned jobs.RunnerImage), LOG_LEVEL (info).
package main

import (
	"context"
	"log/slog"

	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/internal/provisioner/server"
)

func main() { jobservice.Main("provisioner", configFromEnv, run) }

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	cs, err := cfg.Clientset("kubeopera-provisioner")
	if err != nil {
		return err
	}
	runs, err := jobs.New(cs, jobs.Config{
		Namespace:      cfg.JobsNamespace,
		RunnerImage:    cfg.RunnerImage,
		ActiveDeadline: cfg.Deadline,
		Render:         renderModule,
	})
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{APIKey: cfg.APIKey, Runs: runs, Retention: cfg.Retention, Log: log})
	if err != nil {
		return err
	}
	log.Info("Starting the provisioner", "jobsNamespace", cfg.JobsNamespace, "runnerImage", cfg.RunnerImage,
		"retention", cfg.Retention.String(), "deadline", cfg.Deadline.String())
	return srv.Run(ctx, cfg.ListenAddr)
}
