package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/test/sim/scaffolding"
)

// scaffolderKeyFile holds the gitops-scaffolder's API key, under the state directory.
const scaffolderKeyFile = "scaffolder.key"

// startScaffolder starts the real gitops-scaffolder (its store and API, as its ServiceAccount
// with config/scaffolder's RBAC) on the backend, its Jobs' Pods played with the real scaffold
// runner (bin/scaffold-runner). Its chart mirror is chartMirror (the local chart repository of the
// infrastructure layer's charts); the local git server and target listen on 127.0.0.1, which the
// runner may dial as an admin's exception.
func startScaffolder(ctx context.Context, root, dev string, backend *rest.Config, chartMirror string, log io.Writer) (*scaffolding.Env, error) {
	runner := filepath.Join(binDir(root), "scaffold-runner")
	if _, err := os.Stat(runner); err != nil {
		return nil, fmt.Errorf("the scaffolds need %s, which is missing: run `make build` (make run builds it)", runner)
	}
	key, err := provisionerKey(filepath.Join(dev, scaffolderKeyFile))
	if err != nil {
		return nil, err
	}
	env, err := scaffolding.Start(ctx, scaffolding.Options{
		Backend: backend, Root: root, RunnerBinary: runner, APIKey: key, Log: log,
		Addr: "127.0.0.1:" + envOr("KUBEOPERA_SCAFFOLDER_PORT", "8091"),
		Jobs: jobs.Config{ChartMirror: chartMirror, AllowNetworks: "127.0.0.1/32", SealedSecretsTimeout: 10 * time.Minute},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to start the gitops-scaffolder: %w", err)
	}
	return env, nil
}
