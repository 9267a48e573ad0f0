package jobs

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	provisionerapi "github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
)

// Config configures a Client.
type Config struct {
	// Namespace is the jobs namespace, where runs live; api.DefaultJobsNamespace when empty. The
	// Secrets a request names are read wherever they are, as far as RBAC lets the scaffolder:
	// the manager grants it get on each by name.
	Namespace string
	// RunnerImage is the scaffold runner's image; RunnerImage when empty.
	RunnerImage string
	// ActiveDeadline bounds a run (the Job's activeDeadlineSeconds); DefaultActiveDeadline when
	// zero.
	ActiveDeadline time.Duration
	// TemplatesConfigMap, when set, is a ConfigMap in Namespace holding an admin's templates: it
	// is mounted read-only at TemplatesMountPath and api.EnvTemplatesDir names that path. Empty:
	// the templates built into the runner.
	TemplatesConfigMap string
	// ChartMirror (api.EnvChartMirror), AllowNetworks (api.EnvAllowNetworks, comma-separated
	// CIDRs) and SealedSecretsTimeout (api.EnvSealedSecretsTimeout) reach the runner when set.
	ChartMirror          string
	AllowNetworks        string
	SealedSecretsTimeout time.Duration
	// AWSEndpointURL (api.EnvAWSEndpointURL), when set, is the STS endpoint the runner signs an
	// EKS target's tokens for.
	AWSEndpointURL string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Client creates and reads scaffolds. It is safe for concurrent use.
type Client struct {
	cs  kubernetes.Interface
	cfg Config
}

// New returns a Client that keeps runs in cfg.Namespace through cs.
func New(cs kubernetes.Interface, cfg Config) (*Client, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = api.DefaultJobsNamespace
	}
	if cfg.RunnerImage == "" {
		cfg.RunnerImage = RunnerImage
	}
	if cfg.ActiveDeadline == 0 {
		cfg.ActiveDeadline = DefaultActiveDeadline
	}
	if cfg.ActiveDeadline < time.Second {
		return nil, fmt.Errorf("jobs.Config.ActiveDeadline %s is shorter than a second", cfg.ActiveDeadline)
	}
	if cfg.SealedSecretsTimeout < 0 {
		return nil, fmt.Errorf("jobs.Config.SealedSecretsTimeout %s is negative", cfg.SealedSecretsTimeout)
	}
	if cfg.TemplatesConfigMap != "" {
		if msgs := validation.IsDNS1123Subdomain(cfg.TemplatesConfigMap); len(msgs) != 0 {
			return nil, fmt.Errorf("jobs.Config.TemplatesConfigMap %q is not a ConfigMap name", cfg.TemplatesConfigMap)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cs: cs, cfg: cfg}, nil
}

// Create starts a scaffold: it validates req, reads each Secret the request names once, creates
// the run's objects (see the package documentation) and returns the queued scaffold without
// waiting for anything else. Errors that are the request's fault are *api.FieldError: an invalid
// field, or a named Secret that is missing, not readable by the scaffolder, one of the platform's
// own run objects, or without the keys it must hold (field kubeconfigSecretRef,
// gitCredentialsSecretRef or registryPullSecretRef).
func (c *Client) Create(ctx context.Context, req api.Request) (api.Scaffold, error) {
	if err := req.Validate(); err != nil {
		return api.Scaffold{}, err
	}
	inputs, err := c.readInputs(ctx, req)
	if err != nil {
		return api.Scaffold{}, err
	}
	build := func(id string) *batchv1.Job {
		return run{id: id, namespace: c.cfg.Namespace, req: req}.job(c.cfg)
	}
	owned := func(id string, _ *batchv1.Job) []metav1.Object {
		r := run{id: id, namespace: c.cfg.Namespace, req: req}
		sa, role, binding := jobrun.RunnerIdentity(r.meta(api.ServiceAccountName(id)), api.StatusSecretName(id))
		return []metav1.Object{sa, role, binding, r.inputs(inputs), r.status()}
	}
	started, err := jobrun.Launch(ctx, c.cs, c.cfg.Namespace, build, owned)
	if err != nil {
		return api.Scaffold{}, err
	}
	return scaffoldFrom(started, nil, "", c.cfg.Now()), nil
}

// readInputs reads the Secrets req names and keeps their known keys, under the inputs Secret's
// keys (api.Input*).
func (c *Client) readInputs(ctx context.Context, req api.Request) (map[string][]byte, error) {
	const kubeconfigField = "kubeconfigSecretRef"
	kc, err := c.readSecret(ctx, kubeconfigField, req.KubeconfigSecretRef)
	if err != nil {
		return nil, err
	}
	inputs := map[string][]byte{}
	if len(kc.Data[api.KubeconfigKey]) == 0 {
		return nil, secretError(kubeconfigField, req.KubeconfigSecretRef, fmt.Sprintf("holds no key %s", api.KubeconfigKey))
	}
	inputs[api.InputKubeconfig] = kc.Data[api.KubeconfigKey]

	if ref := req.GitCredentialsSecretRef; ref != nil {
		const field = "gitCredentialsSecretRef"
		s, err := c.readSecret(ctx, field, *ref)
		if err != nil {
			return nil, err
		}
		user, pass, token := s.Data[api.GitUsernameKey], s.Data[api.GitPasswordKey], s.Data[api.GitBearerTokenKey]
		switch {
		case len(token) > 0:
			inputs[api.InputGitToken] = token
		case len(user) > 0 && len(pass) > 0:
			inputs[api.InputGitUsername], inputs[api.InputGitPassword] = user, pass
		default:
			return nil, secretError(field, *ref, fmt.Sprintf("holds no git credentials: it needs %s and %s, or %s", api.GitUsernameKey, api.GitPasswordKey, api.GitBearerTokenKey))
		}
	}
	if ref := req.RegistryPullSecretRef; ref != nil {
		const field = "registryPullSecretRef"
		s, err := c.readSecret(ctx, field, *ref)
		if err != nil {
			return nil, err
		}
		if s.Type != corev1.SecretTypeDockerConfigJson || len(s.Data[api.RegistryPullKey]) == 0 {
			return nil, secretError(field, *ref, fmt.Sprintf("must be of type %s with key %s", corev1.SecretTypeDockerConfigJson, api.RegistryPullKey))
		}
		inputs[api.InputRegistryPull] = s.Data[api.RegistryPullKey]
	}
	return inputs, nil
}

// readSecret reads one Secret the request names, as the scaffolder. A Secret that is one of the
// platform's own run objects (a scaffold's or a provisioning run's) is refused: a run may not be
// handed another run's inputs or status.
func (c *Client) readSecret(ctx context.Context, field string, ref api.SecretRef) (*corev1.Secret, error) {
	s, err := c.cs.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, secretError(field, ref, "not found")
	case apierrors.IsForbidden(err):
		return nil, secretError(field, ref, "is not readable by the gitops-scaffolder")
	case err != nil:
		return nil, fmt.Errorf("failed to read Secret %s: %w", ref, err)
	}
	for _, l := range []string{api.LabelRun, provisionerapi.LabelRun} {
		if _, ok := s.Labels[l]; ok {
			return nil, secretError(field, ref, "belongs to a run of the platform, not to the caller")
		}
	}
	return s, nil
}

// Get returns the scaffold as its Job and status Secret say now (sync-on-read);
// jobrun.ErrNotFound when there is no such run.
func (c *Client) Get(ctx context.Context, id string) (api.Scaffold, error) {
	job, status, err := c.read(ctx, id)
	if err != nil {
		return api.Scaffold{}, err
	}
	now := c.cfg.Now()
	s := scaffoldFrom(job, status, "", now)
	if podMatters(job, status, s) {
		problem, err := jobrun.LatestPodProblem(ctx, c.cs, job, ContainerName)
		if err != nil {
			return api.Scaffold{}, err
		}
		if problem != "" {
			s = scaffoldFrom(job, status, problem, now)
		}
	}
	return s, nil
}

// podMatters reports whether the pod's status can say more than the Job and the runner: while the
// run is queued (an image that does not pull, a pod that cannot be scheduled), and when it failed
// without the runner saying why (a crash, OOMKilled).
func podMatters(job *batchv1.Job, status *corev1.Secret, s api.Scaffold) bool {
	switch s.Status {
	case api.StatusQueued:
		return !jobrun.Suspended(job)
	case api.StatusFailed:
		return status == nil || status.Annotations[api.AnnotationStep] != api.StepFailed || status.Annotations[api.AnnotationMessage] == ""
	}
	return false
}

// read gets a run's Job and its status Secret (nil while it does not exist); jobrun.ErrNotFound
// when there is no such run.
func (c *Client) read(ctx context.Context, id string) (*batchv1.Job, *corev1.Secret, error) {
	return jobrun.ReadRun(ctx, c.cs, jobrun.Run{Namespace: c.cfg.Namespace, ID: id, RunLabel: api.LabelRun,
		Job: api.JobName(id), Report: api.StatusSecretName(id)})
}

// Sweep deletes the Jobs of scaffolds that ended more than retention ago, with Background
// propagation: the garbage collector deletes the objects each Job owns. Runs that have not ended
// are never touched. It returns how many runs it deleted.
func (c *Client) Sweep(ctx context.Context, retention time.Duration) (int, error) {
	return jobrun.Sweep(ctx, c.cs, c.cfg.Namespace, api.LabelRun, retention, c.cfg.Now())
}
