package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/kubeopera/kubeopera/apis/fleet/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/hostregistration"
	"github.com/kubeopera/kubeopera/internal/manager"
)

// registerHostCommand is the subcommand that records the backend cluster as the host:
// `manager register-host [flags]`, with the manager's flags and its identities.
const registerHostCommand = "register-host"

const registerHostUsage = `Usage: manager register-host [flags]

Records the backend cluster, the cluster the manager runs on, as the host: RegisteredCluster
"host" in the platform workspace, with its kube-system UID, Kubernetes version, nodes, provider
and region read from the cluster with the manager's own identities (--backend-kubeconfig, empty:
in-cluster; --kcp-kubeconfig). Running it again refreshes the facts and keeps the record. It
creates nothing else: no HostCluster, no backend namespace.

In a deployment:
  kubectl -n kubeopera-system exec deploy/kubeopera-manager -- /manager register-host

Flags (the manager's; only the kcp, platform workspace and backend ones matter here):
`

// runRegisterHost runs `manager register-host` with args (those after the subcommand's name) and
// returns the process' exit code: 0 when the cluster is (now or already) registered, 1 on an
// error, which it writes to stderr.
func runRegisterHost(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := registerHost(ctx, args, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "manager %s: %v\n", registerHostCommand, err)
		return 1
	}
	return 0
}

func registerHost(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := manager.DefaultOptions()
	fs := pflag.NewFlagSet("manager "+registerHostCommand, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.BindFlags(fs)
	output := fs.StringP("output", "o", "", "output format: empty for a one-line summary, json for the RegisteredCluster")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	fs.Usage = func() {
		fmt.Fprint(stderr, registerHostUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *output != "" && *output != "json" {
		return fmt.Errorf("--output %q: want json or nothing", *output)
	}
	cfgs, err := opts.Configs()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	backend, err := kubernetes.NewForConfig(cfgs.Backend)
	if err != nil {
		return fmt.Errorf("failed to create the backend client: %w", err)
	}
	facts, err := hostregistration.Inspect(ctx, backend)
	if err != nil {
		return fmt.Errorf("failed to inspect the backend cluster: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := fleetv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	platform, err := client.New(cfgs.KCP, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("failed to create the client of %s: %w", opts.PlatformWorkspace, err)
	}
	rc, created, err := hostregistration.Register(ctx, platform, facts, time.Now())
	// Right after a bootstrap kcp may take a few seconds to serve the new kind: wait for it, up to
	// --timeout, saying so once.
	for waited := false; meta.IsNoMatchError(err); waited = true {
		if !waited {
			_, _ = fmt.Fprintf(stderr, "Waiting for %s to serve RegisteredClusters (fleet.kubeopera.io; the manager's --bootstrap installs them)\n", opts.PlatformWorkspace)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not serve RegisteredClusters (fleet.kubeopera.io): bootstrap it (the manager's --bootstrap): %w", opts.PlatformWorkspace, err)
		case <-time.After(2 * time.Second):
		}
		rc, created, err = hostregistration.Register(ctx, platform, facts, time.Now())
	}
	if err != nil {
		return fmt.Errorf("failed to register the backend cluster in %s: %w", opts.PlatformWorkspace, err)
	}
	if *output == "json" {
		rc.APIVersion, rc.Kind = fleetv1alpha1.GroupVersion.String(), "RegisteredCluster"
		rc.ManagedFields = nil
		b, err := json.MarshalIndent(rc, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	_, err = fmt.Fprintln(stdout, summary(rc, created, opts.PlatformWorkspace))
	return err
}

// summary is the one line register-host prints, e.g. "Registered the backend cluster as the host
// (RegisteredCluster host in root:kubeopera): uid …, provider aws, region eu-central-1,
// Kubernetes v1.33.1, nodes 2/3".
func summary(rc *fleetv1alpha1.RegisteredCluster, created bool, workspace string) string {
	head := "Already registered: the backend cluster is the host"
	if created {
		head = "Registered the backend cluster as the host"
	}
	facts := []string{"uid " + rc.Spec.ClusterUID, "provider " + rc.Status.Provider}
	if rc.Status.Region != "" {
		facts = append(facts, "region "+rc.Status.Region)
	}
	facts = append(facts, "Kubernetes "+rc.Status.KubernetesVersion, "nodes "+rc.Status.NodeSummary)
	return fmt.Sprintf("%s (RegisteredCluster %s in %s): %s", head, rc.Name, workspace, strings.Join(facts, ", "))
}
