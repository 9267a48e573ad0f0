// Command gitops-scaffolder is the service that generates and pushes a HostCluster's GitOps tree
// (docs/scaffolder.md): an HTTP API that starts one Kubernetes Job per scaffold in the jobs
// namespace (the scaffold runner's image) and answers for it from the Job's live state. It has no
// database: a scaffold is its Job and the objects the Job owns, swept RUN_RETENTION after it
// ended.
//
// Environment: API_KEY (required), KUBECONFIG (in-cluster config when unset), LISTEN_ADDR
// (:8080), JOBS_NAMESPACE (kubeopera-provisioning), RUN_RETENTION (168h), RUN_DEADLINE (30m),
// RUNNER_IMAGE (the pinned jobs.RunnerImage), TEMPLATES_CONFIGMAP, CHART_MIRROR, ALLOW_NETWORKS,
// SEALED_SECRETS_TIMEOUT (each unset by default: the runner's own defaults), LOG_LEVEL (info).
package main

import (
	"context"
	"log/slog"

	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/internal/scaffolder/server"
)

func main() { jobservice.Main("gitops-scaffolder", configFromEnv, run) }

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	cs, err := cfg.Clientset("kubeopera-gitops-scaffolder")
	if err != nil {
		return err
	}
	runs, err := jobs.New(cs, jobs.Config{
		Namespace:            cfg.JobsNamespace,
		RunnerImage:          cfg.RunnerImage,
		ActiveDeadline:       cfg.Deadline,
		TemplatesConfigMap:   cfg.TemplatesConfigMap,
		ChartMirror:          cfg.ChartMirror,
		AllowNetworks:        cfg.AllowNetworks,
		SealedSecretsTimeout: cfg.SealedSecretsTimeout,
	})
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{APIKey: cfg.APIKey, Runs: runs, Retention: cfg.Retention, Log: log})
	if err != nil {
		return err
	}
	log.Info("Starting the gitops-scaffolder", "jobsNamespace", cfg.JobsNamespace, "runnerImage", cfg.RunnerImage,
		"retention", cfg.Retention.String(), "deadline", cfg.Deadline.String(), "templatesConfigMap", cfg.TemplatesConfigMap)
	return srv.Run(ctx, cfg.ListenAddr)
}
