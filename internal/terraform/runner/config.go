package runner

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// TerraformVersion is the one Terraform version the runner runs (the runner's image ships it;
// tests run the binary on PATH only when it is exactly this version).
const TerraformVersion = "1.11.4"

// The runner's environment beyond api.Env* (which the Job always sets). None of these is needed
// in production: they select the binary and shorten the waits in tests.
const (
	// EnvTerraformBinary is the terraform executable; "terraform" looked up in PATH when unset.
	EnvTerraformBinary = "TERRAFORM_BINARY"
	// EnvSSMPollInterval and EnvSSMPollTimeout (Go durations) bound the wait for a
	// vanilla_kubeadm control plane's admin kubeconfig: DefaultSSMPollInterval and
	// DefaultSSMPollTimeout when unset.
	EnvSSMPollInterval = "PROVISION_SSM_POLL_INTERVAL"
	EnvSSMPollTimeout  = "PROVISION_SSM_POLL_TIMEOUT"
	// EnvBackendConfigExtra adds -backend-config key=value pairs (comma separated) to terraform
	// init. It exists for tests against a local S3 endpoint (e.g. "use_path_style=true"); the
	// product never sets it, so the rendered backend block is the whole backend configuration.
	EnvBackendConfigExtra = "PROVISION_BACKEND_CONFIG_EXTRA"
)

// Waits of the vanilla_kubeadm kubeconfig retrieval (docs/provisioner.md#kubeconfig-retrieval: every 20 s, up to 20 minutes).
const (
	DefaultSSMPollInterval = 20 * time.Second
	DefaultSSMPollTimeout  = 20 * time.Minute
)

// Outputs of the rendered root module the runner reads (internal/terraform/render writes them).
const (
	// OutputAdminKubeconfigParameter (vanilla_kubeadm) is the name of the SSM parameter the
	// control-plane node overwrites with its base64 admin.conf (seeded "PENDING").
	OutputAdminKubeconfigParameter = "admin_kubeconfig_parameter"
	// OutputClusterName, OutputClusterEndpoint and OutputClusterCACertificate (eks) are the
	// cluster's name, API server URL and CA bundle (base64 PEM as EKS reports it, or PEM).
	OutputClusterName          = "cluster_name"
	OutputClusterEndpoint      = "cluster_endpoint"
	OutputClusterCACertificate = "cluster_ca_certificate"
)

// SSMPendingValue is the admin kubeconfig parameter's value until the node has published it.
const SSMPendingValue = "PENDING"

// PhaseWaitingForKubeconfig is the phase annotation while a vanilla_kubeadm run waits for the
// control plane's admin kubeconfig (api.AnnotationPhase names it; api has no constant for it).
const PhaseWaitingForKubeconfig = "waiting-for-kubeconfig"

// Config is the runner's configuration, read from its environment by ConfigFromEnv.
type Config struct {
	// RunID is the run's ID (api.EnvRunID): it names the role session.
	RunID string
	// Operation is apply or destroy (api.EnvOperation; apply when unset).
	Operation api.Operation
	// Topology is vanilla_kubeadm or eks (api.EnvTopology).
	Topology string
	// Region is the AWS region (api.EnvRegion): the state bucket's and the cluster's.
	Region string
	// StateBucket is the S3 state bucket (api.EnvStateBucket), one of WorkspaceFingerprint's
	// (api.IsStateBucketOf).
	StateBucket string
	// WorkspaceFingerprint is the fingerprint of the workspace the run is for
	// (api.EnvWorkspaceFingerprint).
	WorkspaceFingerprint string
	// ModuleDir holds the rendered root module (api.EnvModuleDir), ModulesDir the project's
	// Terraform modules (api.EnvModulesDir, optional), CredentialsDir the credential's keys as
	// files (api.EnvCredentialsDir).
	ModuleDir, ModulesDir, CredentialsDir string
	// Namespace and OutputsSecret name the outputs Secret (api.EnvNamespace,
	// api.EnvOutputsSecret).
	Namespace, OutputsSecret string
	// TerraformBinary is the terraform executable's path (EnvTerraformBinary, else PATH).
	TerraformBinary string
	// SSMPollInterval and SSMPollTimeout bound the vanilla_kubeadm kubeconfig wait.
	SSMPollInterval, SSMPollTimeout time.Duration
	// BackendConfigExtra are extra -backend-config values (EnvBackendConfigExtra; tests only).
	BackendConfigExtra []string
	// PlanKey (api.EnvPlanKey) is the state bucket's object of a saved plan: where a plan run
	// saves its plan, and what an apply run applies instead of planning (an approved plan).
	PlanKey string
}

// ConfigFromEnv reads the runner's configuration with lookup (os.LookupEnv). Every missing or
// malformed variable is named in the error.
func ConfigFromEnv(lookup func(string) (string, bool)) (*Config, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	var errs []error
	required := func(k string) string {
		v := get(k)
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", k))
		}
		return v
	}
	c := &Config{
		RunID:                required(api.EnvRunID),
		Operation:            api.Operation(get(api.EnvOperation)),
		Topology:             get(api.EnvTopology),
		Region:               required(api.EnvRegion),
		StateBucket:          required(api.EnvStateBucket),
		WorkspaceFingerprint: required(api.EnvWorkspaceFingerprint),
		ModuleDir:            required(api.EnvModuleDir),
		ModulesDir:           get(api.EnvModulesDir),
		CredentialsDir:       required(api.EnvCredentialsDir),
		Namespace:            required(api.EnvNamespace),
		OutputsSecret:        required(api.EnvOutputsSecret),
		PlanKey:              get(api.EnvPlanKey),
	}
	if c.StateBucket != "" && c.WorkspaceFingerprint != "" && !api.IsStateBucketOf(c.StateBucket, c.WorkspaceFingerprint) {
		errs = append(errs, fmt.Errorf("%s %q is not a state bucket of workspace %s (%s): the runner uses no other", api.EnvStateBucket, c.StateBucket, c.WorkspaceFingerprint, api.EnvWorkspaceFingerprint))
	}
	switch c.Operation {
	case "":
		c.Operation = api.OperationApply
	case api.OperationApply, api.OperationDestroy, api.OperationPlan:
	default:
		errs = append(errs, fmt.Errorf("%s must be %s, %s or %s, not %q", api.EnvOperation, api.OperationApply, api.OperationDestroy, api.OperationPlan, c.Operation))
	}
	switch {
	case c.Operation == api.OperationPlan && c.PlanKey == "":
		errs = append(errs, fmt.Errorf("%s is required for a %s run: where its plan is saved", api.EnvPlanKey, api.OperationPlan))
	case c.Operation == api.OperationDestroy && c.PlanKey != "":
		errs = append(errs, fmt.Errorf("%s is for %s and %s runs only", api.EnvPlanKey, api.OperationPlan, api.OperationApply))
	case c.PlanKey != "" && c.WorkspaceFingerprint != "" && !strings.HasPrefix(c.PlanKey, c.WorkspaceFingerprint+"/"):
		errs = append(errs, fmt.Errorf("%s %q is not an object of workspace %s", api.EnvPlanKey, c.PlanKey, c.WorkspaceFingerprint))
	}
	// The topology decides how the kubeconfig is retrieved; a destroy needs none.
	if c.Operation == api.OperationApply && c.Topology != api.TopologyVanillaKubeadm && c.Topology != api.TopologyEKS {
		errs = append(errs, fmt.Errorf("%s must be %s or %s, not %q", api.EnvTopology, api.TopologyVanillaKubeadm, api.TopologyEKS, c.Topology))
	}
	duration := func(k string, def time.Duration) time.Duration {
		v := get(k)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 20s, not %q", k, v))
			return def
		}
		return d
	}
	c.SSMPollInterval = duration(EnvSSMPollInterval, DefaultSSMPollInterval)
	c.SSMPollTimeout = duration(EnvSSMPollTimeout, DefaultSSMPollTimeout)
	for _, kv := range strings.Split(get(EnvBackendConfigExtra), ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		if k, _, ok := strings.Cut(kv, "="); !ok || strings.TrimSpace(k) == "" {
			errs = append(errs, fmt.Errorf("%s must be comma-separated key=value pairs, not %q", EnvBackendConfigExtra, kv))
			continue
		}
		c.BackendConfigExtra = append(c.BackendConfigExtra, kv)
	}
	c.TerraformBinary = get(EnvTerraformBinary)
	if c.TerraformBinary == "" {
		path, err := exec.LookPath("terraform")
		if err != nil {
			errs = append(errs, fmt.Errorf("no terraform binary: set %s or put terraform %s in PATH", EnvTerraformBinary, TerraformVersion))
		}
		c.TerraformBinary = path
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid runner environment: %w", errors.Join(errs...))
	}
	return c, nil
}
