// Command terraform-runner is the container of a provisioning run's Job (docs/provisioner.md#terraform-runner): it runs the
// rendered Terraform root module with terraform-exec and publishes the cluster's kubeconfig on
// the run's outputs Secret (see internal/terraform/runner). It takes no flags: the Job's
// environment (api.Env*) and mounted files configure it. It talks to the Kubernetes API with the
// Pod's ServiceAccount (in-cluster), or with $KUBECONFIG when that is set. Exit status 1 is a
// failed run, already reported on the outputs Secret when that was possible.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/terraform/runner"
)

func main() { os.Exit(run()) }

func run() int {
	log := funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, time.Now().UTC().Format(time.RFC3339), prefix, args)
	}, funcr.Options{}).WithName("terraform-runner")
	// The kubelet stops a Pod with SIGTERM: terraform-exec passes it on to Terraform as an
	// interrupt (a graceful stop that releases the state lock), and the failure is reported.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx = logr.NewContext(ctx, log)

	client, err := kubeClient()
	if err != nil {
		log.Error(err, "No Kubernetes client")
		return 1
	}
	outputs := &runner.OutputsSecret{Client: client, Namespace: os.Getenv(api.EnvNamespace), Name: os.Getenv(api.EnvOutputsSecret)}
	cfg, err := runner.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		log.Error(err, "Invalid configuration")
		if outputs.Namespace != "" && outputs.Name != "" {
			if rerr := outputs.Report(ctx, string(api.StatusFailed), err.Error(), nil, false); rerr != nil {
				log.Error(rerr, "Failed to report the failure")
			}
		}
		return 1
	}
	r := &runner.Runner{Config: cfg, Outputs: outputs, Out: os.Stdout, Environ: os.Environ()}
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "terraform-runner: run failed:", err)
		return 1
	}
	log.Info("Run succeeded", "operation", cfg.Operation)
	return 0
}

// kubeClient is the run's identity: $KUBECONFIG when set, else the Pod's ServiceAccount.
func kubeClient() (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if path := os.Getenv("KUBECONFIG"); path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "kubeopera-terraform-runner"
	return kubernetes.NewForConfig(cfg)
}
