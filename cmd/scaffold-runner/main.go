// Command scaffold-runner is the container of a gitops-scaffolder Job (docs/scaffolder.md#the-runner):
// it generates the cluster's GitOps tree in two passes and pushes it (see
// internal/scaffolder/runner). It takes no flags: the Job's environment (api.Env*) and mounted
// inputs configure it. It talks to the backend with the Pod's ServiceAccount (in-cluster), or
// with $KUBECONFIG when that is set, only to report on its status Secret. Exit status 1 is a
// failed run, already reported on the status Secret when that was possible.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/runner"
)

func main() { os.Exit(run()) }

func run() int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("run", os.Getenv(api.EnvRunID))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	cs, err := backendClient()
	if err != nil {
		log.Error("No Kubernetes client", "error", err)
		return 1
	}
	status := &runner.StatusSecret{Client: cs, Namespace: os.Getenv(api.EnvNamespace), Name: os.Getenv(api.EnvStatusSecret)}
	r, err := runner.FromEnv(os.Getenv, status, log)
	if err != nil {
		log.Error("Invalid configuration", "error", err)
		if status.Namespace != "" && status.Name != "" {
			if rerr := status.Report(ctx, api.StepFailed, err.Error(), nil); rerr != nil {
				log.Error("Failed to report the failure", "error", rerr)
			}
		}
		return 1
	}
	if err := r.Run(ctx); err != nil {
		log.Error("Scaffold failed", "error", err)
		return 1
	}
	log.Info("Scaffold succeeded")
	return 0
}

// backendClient is the run's identity: $KUBECONFIG when set, else the Pod's ServiceAccount.
func backendClient() (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if p := os.Getenv("KUBECONFIG"); p != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", p)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "kubeopera-scaffold-runner"
	return kubernetes.NewForConfig(cfg)
}
