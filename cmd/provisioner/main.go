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
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/internal/provisioner/server"
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
		log.Error("Provisioner stopped with an error", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	restCfg, err := jobservice.RESTConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.UserAgent = "kubeopera-provisioner"
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("failed to build the Kubernetes client: %w", err)
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
