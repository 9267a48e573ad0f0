package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/kubeopera/kubeopera/internal/aws/ekstoken"
	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/netguard"
	"github.com/kubeopera/kubeopera/internal/readlimit"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/tree"
	"github.com/kubeopera/kubeopera/internal/target"
)

// targetTimeout bounds each request to the target.
const targetTimeout = 30 * time.Second

// maxInputBytes bounds an input file (a kubeconfig, a token, a dockerconfigjson).
const maxInputBytes = 1 << 20

// FromEnv builds a Runner from the Job's environment (api.Env*) and its mounted inputs, with
// status reporting through status. Every connection it makes to the repository and the target
// goes through a guard that refuses the classes netguard.DefaultRules names (loopback, link-local,
// private and metadata addresses...), except the networks of api.EnvAllowNetworks.
func FromEnv(getenv func(string) string, status Reporter, log *slog.Logger) (*Runner, error) {
	var errs []error
	need := func(key string) string {
		v := strings.TrimSpace(getenv(key))
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", key))
		}
		return v
	}
	req := api.Request{
		ClusterID: need(api.EnvClusterID),
		Slug:      need(api.EnvSlug),
		Domain:    need(api.EnvDomain),
		Region:    strings.TrimSpace(getenv(api.EnvRegion)),
		RepoURL:   need(api.EnvRepoURL),
		Path:      strings.Trim(need(api.EnvPath), "/"),
		Branch:    strings.TrimSpace(getenv(api.EnvBranch)),
		// Validate's other fields: the inputs are files here, the owner is the Job's.
		KubeconfigSecretRef: api.SecretRef{Namespace: "inputs", Name: "inputs"},
		Workspace:           "runner",
		OwnerUID:            "00000000-0000-4000-8000-000000000000",
	}
	inputs := need(api.EnvInputsDir)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	templates, err := tree.Load(strings.TrimSpace(getenv(api.EnvTemplatesDir)))
	if err != nil {
		return nil, err
	}
	mirror := strings.TrimSpace(getenv(api.EnvChartMirror))
	if mirror != "" {
		if err := api.ValidateRepoURL(mirror); err != nil {
			return nil, fmt.Errorf("%s: %w", api.EnvChartMirror, err)
		}
	}
	timeout := DefaultSealedSecretsTimeout
	if v := strings.TrimSpace(getenv(api.EnvSealedSecretsTimeout)); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil || timeout < time.Second {
			return nil, fmt.Errorf("%s %q must be a duration of at least 1s", api.EnvSealedSecretsTimeout, v)
		}
	}
	var allow []string
	if v := strings.TrimSpace(getenv(api.EnvAllowNetworks)); v != "" {
		allow = strings.Split(v, ",")
	}
	prefixes, err := netguard.ParsePrefixes(api.EnvAllowNetworks, allow)
	if err != nil {
		return nil, err
	}
	guard := netguard.New(prefixes, netguard.DefaultRules()...)

	read := func(key string, required bool) ([]byte, error) {
		b, err := readInput(filepath.Join(inputs, key))
		if errors.Is(err, os.ErrNotExist) && !required {
			return nil, nil
		}
		return b, err
	}
	rawKubeconfig, err := read(api.InputKubeconfig, true)
	if err != nil {
		return nil, err
	}
	cfg, err := targetConfig(rawKubeconfig, strings.TrimSpace(getenv(api.EnvAWSEndpointURL)))
	if err != nil {
		return nil, err
	}
	t, err := target.New(cfg, targetTimeout, guard, readlimit.Limits{})
	if err != nil {
		return nil, fmt.Errorf("the target's kubeconfig: %w", err)
	}
	var auth GitAuth
	for key, dst := range map[string]*string{api.InputGitUsername: &auth.Username, api.InputGitPassword: &auth.Password, api.InputGitToken: &auth.BearerToken} {
		b, err := read(key, false)
		if err != nil {
			return nil, err
		}
		*dst = strings.TrimSpace(string(b))
	}
	pull, err := read(api.InputRegistryPull, false)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = guard.DialContext
	transport.Proxy = nil
	return &Runner{
		Params: tree.Params{
			Path: req.Path, Slug: req.Slug, Domain: req.Domain, Region: req.Region, ClusterID: req.ClusterID,
			ChartMirror: mirror,
		},
		RepoURL:              req.RepoURL,
		Branch:               req.Branch,
		Auth:                 auth,
		Templates:            templates,
		Target:               t.Clientset,
		RegistryPull:         pull,
		HTTP:                 &http.Client{Transport: transport, Timeout: 10 * time.Minute},
		WorkDir:              os.TempDir(),
		SealedSecretsTimeout: timeout,
		Status:               status,
		Log:                  log,
	}, nil
}

// eksSessionName is the role session name of the runner's sts:AssumeRole for EKS tokens.
const eksSessionName = "kubeopera-scaffolder"

// targetConfig reads the stored kubeconfig of the target: a static one (kubeconfig.ParseUntrusted:
// no exec, no files), or the platform's copy of a provisioned EKS cluster's, which must be exactly
// the terraform-runner's shape (kubeconfig.ParseEKS) with the access key in its exec env. Its
// helper is never run: the tokens are minted in process with that key (assuming the role with
// the workspace's external ID when it names one), as the manager mints them.
func targetConfig(raw []byte, awsEndpoint string) (*rest.Config, error) {
	cfg, err := kubeconfig.ParseUntrusted(raw)
	if err == nil {
		return cfg, nil
	}
	eks, eksErr := kubeconfig.ParseEKS(raw)
	if eksErr != nil {
		return nil, fmt.Errorf("the target's kubeconfig: %w", err)
	}
	if !eks.HasAccessKey {
		return nil, errors.New("the target's EKS kubeconfig carries no access key: the scaffold runner mints the cluster's tokens with the credential's access key (a credential that is a role alone, assumed by the platform's own AWS identity, is not supported for scaffolding)")
	}
	wrap, err := (&ekstoken.Cache{}).Wrap("target", ekstoken.Inputs{
		Cluster: eks.ClusterName, Region: eks.Region, Endpoint: awsEndpoint,
		Credentials: aws.Credentials{AccessKeyID: eks.AccessKeyID, SecretAccessKey: eks.SecretAccessKey, SessionToken: eks.SessionToken},
		RoleARN:     eks.RoleARN, ExternalID: eks.ExternalID, SessionName: eksSessionName,
	})
	if err != nil {
		return nil, fmt.Errorf("the target's EKS kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(eks.Config)
	cfg.WrapTransport = wrap
	return cfg, nil
}

// readInput reads a mounted input file, bounded.
func readInput(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, maxInputBytes+1)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return nil, fmt.Errorf("failed to read input %s: %w", filepath.Base(p), err)
	}
	if n > maxInputBytes {
		return nil, fmt.Errorf("input %s is larger than %d bytes", filepath.Base(p), maxInputBytes)
	}
	return b[:n], nil
}

// StatusSecret is the run's status Secret, the one object the run may write (get and update: the
// scaffolder created it empty).
type StatusSecret struct {
	Client          kubernetes.Interface
	Namespace, Name string
}

// Report sets the step, message and commits annotations, retrying on conflicts.
func (s *StatusSecret) Report(ctx context.Context, step, message string, commits []string) error {
	// Bounded as the scaffolder bounds what it reads back (jobrun.MaxMessageLength).
	message = jobrun.Truncate(message)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := s.Client.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		before := maps.Clone(sec.Annotations)
		if sec.Annotations == nil {
			sec.Annotations = map[string]string{}
		}
		sec.Annotations[api.AnnotationStep] = step
		sec.Annotations[api.AnnotationMessage] = message
		if len(commits) > 0 {
			sec.Annotations[api.AnnotationCommits] = strings.Join(commits, " ")
		}
		if maps.Equal(before, sec.Annotations) {
			return nil
		}
		_, err = s.Client.CoreV1().Secrets(s.Namespace).Update(ctx, sec, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to report step %s on Secret %s/%s: %w", step, s.Namespace, s.Name, err)
	}
	return nil
}
