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
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/internal/scaffolder/server"
)

func main() {
	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		slog.Error("Invalid configuration", "error", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("gitops-scaffolder stopped with an error", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	restCfg, err := jobservice.RESTConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.UserAgent = "kubeopera-gitops-scaffolder"
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("failed to build the Kubernetes client: %w", err)
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
