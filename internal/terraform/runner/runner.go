package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/go-logr/logr"
	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// reportTimeout bounds the final report, which is made even when the run's context has ended
// (the pod is being stopped), so the run does not end without saying so.
const reportTimeout = 30 * time.Second

// Reporter is where the runner reports progress and publishes the kubeconfig, or a plan run's
// summary: *OutputsSecret.
type Reporter interface {
	Report(ctx context.Context, phase, message string, kubeconfig []byte, dropKubeconfig bool) error
	ReportPlan(ctx context.Context, summary api.PlanSummary, message string) error
}

// Runner runs one provisioning run.
type Runner struct {
	Config *Config
	// Outputs receives the phases and the kubeconfig.
	Outputs Reporter
	// Out receives Terraform's output (stdout and stderr): the pod log.
	Out io.Writer
	// Environ is the environment Terraform's is derived from (os.Environ()); see TerraformEnv.
	Environ []string
}

// RunError is a failed run: Message is what was reported (trimmed, credentials scrubbed).
type RunError struct{ Message string }

func (e *RunError) Error() string { return e.Message }

// Run runs the run (see the package documentation) and reports how it went. A failure is
// reported as phase failed and returned as a *RunError carrying the same scrubbed message.
func (r *Runner) Run(ctx context.Context) (err error) {
	log := logr.FromContextOrDiscard(ctx)
	c := r.Config
	var secrets []string
	defer func() {
		if err == nil {
			return
		}
		msg := Trim(Scrub(err.Error(), secrets...), MaxMessage)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
		defer cancel()
		if rerr := r.Outputs.Report(rctx, string(api.StatusFailed), msg, nil, false); rerr != nil {
			msg += "\n(and reporting the failure failed: " + Scrub(rerr.Error(), secrets...) + ")"
		}
		err = &RunError{Message: msg}
	}()
	report := func(phase, message string) error {
		log.Info("Phase", "phase", phase, "message", message)
		return r.Outputs.Report(ctx, phase, message, nil, false)
	}

	destroy := c.Operation == api.OperationDestroy
	if err := report(string(api.StatusPlanning), "Preparing the state bucket and the Terraform working directory"); err != nil {
		return err
	}
	cred, err := ReadCredential(c.CredentialsDir)
	secrets = append(secrets, cred.secrets()...)
	if err != nil {
		return err
	}
	awsCfg, err := AWSConfig(ctx, cred, c.Region, c.RunID)
	if err != nil {
		return err
	}
	// With a role this is sts:AssumeRole: Terraform gets the role's temporary credentials.
	creds, err := awsCfg.Credentials.Retrieve(ctx)
	if err != nil {
		if cred.RoleARN != "" {
			return fmt.Errorf("failed to assume role %s: %w", cred.RoleARN, err)
		}
		return fmt.Errorf("failed to resolve AWS credentials: %w", err)
	}
	secrets = append(secrets, creds.SecretAccessKey, creds.SessionToken, creds.AccessKeyID)
	// The state bucket must be the account's own: the run's credentials say which account that is.
	account, err := CallerAccount(ctx, sts.NewFromConfig(awsCfg))
	if err != nil {
		return err
	}
	s3c := s3.NewFromConfig(awsCfg)
	if err := EnsureStateBucket(ctx, s3c, c.StateBucket, c.Region, account); err != nil {
		return err
	}

	dir, err := PrepareWorkDir("", c.ModuleDir, c.ModulesDir)
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	tf, err := tfexec.NewTerraform(dir, c.TerraformBinary)
	if err != nil {
		return fmt.Errorf("failed to set up terraform: %w", err)
	}
	if err := tf.SetEnv(TerraformEnv(r.Environ, creds, c.Region)); err != nil {
		return fmt.Errorf("failed to set up terraform: %w", err)
	}
	// Terraform's human output goes to the log; the JSON of version and output does not (output
	// -json prints sensitive values in clear). The end of each command's stderr is kept for the
	// message of an interrupted command (terraform-exec's error has no stderr then).
	stderr := &tailBuffer{max: MaxMessage}
	tf.SetStderr(writers(r.Out, stderr))
	tfErr := func(command string, err error) error {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("terraform %s was interrupted: the run's pod is being stopped (deleted, or past the Job's deadline)\n%s", command, stderr.String())
		}
		return fmt.Errorf("terraform %s failed: %w", command, err)
	}
	v, _, err := tf.Version(ctx, true)
	if err != nil {
		return fmt.Errorf("failed to run %s version: %w", c.TerraformBinary, err)
	}
	if v.String() != TerraformVersion {
		return fmt.Errorf("%s is Terraform %s; the runner runs exactly %s", c.TerraformBinary, v, TerraformVersion)
	}

	if err := report(string(api.StatusPlanning), "Running terraform init and plan"); err != nil {
		return err
	}
	tf.SetStdout(r.Out)
	initOpts := []tfexec.InitOption{tfexec.Upgrade(false)}
	for _, kv := range c.BackendConfigExtra {
		initOpts = append(initOpts, tfexec.BackendConfig(kv))
	}
	stderr.Reset()
	if err := tf.Init(ctx, initOpts...); err != nil {
		return tfErr("init", err)
	}
	// Apply exactly what was planned: a saved plan (terraform destroy is apply of a destroy
	// plan), so the planning phase shows every error planning can find. An approved plan is
	// loaded instead of planned again: Terraform applies exactly it, or refuses it when the state
	// changed since it was made (a stale plan).
	plan := filepath.Join(dir, "run.tfplan")
	changes := true
	if c.Operation == api.OperationApply && c.PlanKey != "" {
		if err := report(string(api.StatusPlanning), "Loading the approved plan "+c.PlanKey); err != nil {
			return err
		}
		if err := LoadPlan(ctx, s3c, c.StateBucket, c.PlanKey, account, plan); err != nil {
			return err
		}
	} else {
		stderr.Reset()
		if changes, err = tf.Plan(ctx, tfexec.Out(plan), tfexec.Destroy(destroy)); err != nil {
			return tfErr("plan", err)
		}
	}
	if c.Operation == api.OperationPlan {
		// terraform show -json prints values in clear: never into the log.
		tf.SetStdout(nil)
		stderr.Reset()
		shown, err := tf.ShowPlanFile(ctx, plan)
		if err != nil {
			return tfErr("show", err)
		}
		summary := Summarize(shown)
		if err := SavePlan(ctx, s3c, c.StateBucket, c.PlanKey, account, plan); err != nil {
			return err
		}
		msg := fmt.Sprintf("Planned: %d to add, %d to change, %d to destroy; the plan waits for approval", summary.Add, summary.Change, summary.Destroy)
		log.Info("Planned", "add", summary.Add, "change", summary.Change, "destroy", summary.Destroy)
		return r.Outputs.ReportPlan(ctx, summary, msg)
	}
	verb := "apply"
	if destroy {
		verb = "destroy"
	}
	msg := "Running terraform " + verb
	if !changes {
		msg += " (the plan has no changes)"
	}
	if err := report(string(api.StatusApplying), msg); err != nil {
		return err
	}
	stderr.Reset()
	if err := tf.Apply(ctx, tfexec.DirOrPlan(plan)); err != nil {
		return tfErr(verb, err)
	}
	if destroy {
		log.Info("Destroyed")
		return r.Outputs.Report(ctx, string(api.StatusSucceeded), "Destroyed", nil, true)
	}

	tf.SetStdout(nil)
	outputs, err := tf.Output(ctx)
	if err != nil {
		return tfErr("output", err)
	}
	var kubeconfig []byte
	switch c.Topology {
	case api.TopologyVanillaKubeadm:
		name, err := stringOutput(outputs, OutputAdminKubeconfigParameter)
		if err != nil {
			return err
		}
		if err := report(PhaseWaitingForKubeconfig, fmt.Sprintf("Waiting for the control plane to publish its admin kubeconfig to SSM parameter %s (up to %s)", name, c.SSMPollTimeout)); err != nil {
			return err
		}
		if kubeconfig, err = WaitForAdminKubeconfig(ctx, ssm.NewFromConfig(awsCfg), name, c.SSMPollInterval, c.SSMPollTimeout); err != nil {
			return err
		}
	case api.TopologyEKS:
		cluster := EKSCluster{Region: c.Region, Credential: cred}
		for _, o := range []struct {
			name string
			dst  *string
		}{{OutputClusterName, &cluster.Name}, {OutputClusterEndpoint, &cluster.Endpoint}, {OutputClusterCACertificate, &cluster.CACertificate}} {
			if *o.dst, err = stringOutput(outputs, o.name); err != nil {
				return err
			}
		}
		if kubeconfig, err = EKSKubeconfig(cluster); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown topology %q", c.Topology)
	}
	log.Info("Publishing the kubeconfig")
	return r.Outputs.Report(ctx, string(api.StatusSucceeded), "Provisioned: the kubeconfig is published", kubeconfig, false)
}

// stringOutput is the root module's string output name.
func stringOutput(outputs map[string]tfexec.OutputMeta, name string) (string, error) {
	o, ok := outputs[name]
	if !ok {
		return "", fmt.Errorf("the root module has no output %s", name)
	}
	var s string
	if err := json.Unmarshal(o.Value, &s); err != nil || s == "" {
		return "", fmt.Errorf("output %s is not a non-empty string", name)
	}
	return s, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// writers is io.MultiWriter of the non-nil ws.
func writers(ws ...io.Writer) io.Writer {
	var out []io.Writer
	for _, w := range ws {
		if w != nil {
			out = append(out, w)
		}
	}
	return io.MultiWriter(out...)
}
