package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// RenderFunc renders a request's Terraform root module: file name -> content, each file a key
// of the run's ConfigMap. A *api.FieldError it returns is the request's fault (400); any other
// error is the provisioner's (500).
type RenderFunc func(api.CreateRequest) (map[string]string, error)

// Config configures a Client.
type Config struct {
	// Namespace is the jobs namespace, where runs live; api.DefaultJobsNamespace when empty.
	// Credential Secrets are read wherever the caller names them, as far as RBAC lets the
	// provisioner: the manager grants it get on each credential copy by name.
	Namespace string
	// RunnerImage is the image of the runner's container; RunnerImage when empty.
	RunnerImage string
	// ActiveDeadline bounds a run (the Job's activeDeadlineSeconds); DefaultActiveDeadline when
	// zero.
	ActiveDeadline time.Duration
	// Render renders the Terraform root module of a request. Required.
	Render RenderFunc
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Client creates and reads runs. It is safe for concurrent use.
type Client struct {
	cs  kubernetes.Interface
	cfg Config
}

// New returns a Client that keeps runs in cfg.Namespace through cs.
func New(cs kubernetes.Interface, cfg Config) (*Client, error) {
	if cfg.Render == nil {
		return nil, errors.New("jobs.Config.Render is required")
	}
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cs: cs, cfg: cfg}, nil
}

// Create starts a run: it validates req, reads the caller's credential Secret once, renders the
// module, creates the run's objects (see the package documentation) and returns the queued run
// without waiting for anything else. While another run of the same cluster has not ended it
// creates nothing that runs and returns an *ActiveRunError. Errors that are the request's fault
// are *api.FieldError: an invalid field, a credential Secret that is missing, not readable by the provisioner, one of the
// provisioner's own run objects, or holds no credential (field credentialSecretRef).
func (c *Client) Create(ctx context.Context, req api.CreateRequest) (api.Provision, error) {
	if err := req.Validate(); err != nil {
		return api.Provision{}, err
	}
	cred, err := c.readCredential(ctx, req.CredentialSecretRef)
	if err != nil {
		return api.Provision{}, err
	}
	if req.PlanRun != "" {
		if err := c.checkPlanRun(ctx, req); err != nil {
			return api.Provision{}, err
		}
	}
	if err := c.held(ctx, req); err != nil {
		return api.Provision{}, err
	}
	files, err := c.cfg.Render(req)
	if err != nil {
		var fe *api.FieldError
		if errors.As(err, &fe) {
			return api.Provision{}, fe
		}
		return api.Provision{}, fmt.Errorf("failed to render the Terraform module: %w", err)
	}
	if err := checkModule(files); err != nil {
		return api.Provision{}, err
	}

	build := func(id string) *batchv1.Job {
		return run{id: id, namespace: c.cfg.Namespace, req: req}.job(c.cfg.RunnerImage, c.cfg.ActiveDeadline)
	}
	owned := func(id string, _ *batchv1.Job) []metav1.Object {
		r := run{id: id, namespace: c.cfg.Namespace, req: req}
		sa, role, binding := jobrun.RunnerIdentity(r.meta(api.ServiceAccountName(id)), api.OutputsSecretName(id))
		return []metav1.Object{sa, role, binding, r.credentials(cred), r.module(files), r.outputs()}
	}
	// One run at a time per cluster: the new run, still suspended, takes the cluster's Lease or
	// goes before it ever ran (lock.go).
	gate := func(id string, job *batchv1.Job) error {
		return c.lock(ctx, run{id: id, namespace: c.cfg.Namespace, req: req}, job)
	}
	started, err := jobrun.LaunchGated(ctx, c.cs, c.cfg.Namespace, build, gate, owned)
	if err != nil {
		return api.Provision{}, err
	}
	return provisionFrom(started, nil, "", c.cfg.Now()), nil
}

// checkPlanRun checks that req.PlanRun is a plan the request may apply: a succeeded plan run of
// the same workspace, owner and cluster, made for the same module inputs. Anything else is the
// request's fault (field planRun), and says which.
func (c *Client) checkPlanRun(ctx context.Context, req api.CreateRequest) error {
	refuse := func(msg string) error {
		return &api.FieldError{Field: "planRun", Message: fmt.Sprintf("run %s %s", req.PlanRun, msg)}
	}
	job, outputs, err := c.read(ctx, req.PlanRun)
	switch {
	case errors.Is(err, jobrun.ErrNotFound):
		return refuse("does not exist (or was swept)")
	case err != nil:
		return err
	case job.Labels[api.LabelOperation] != string(api.OperationPlan):
		return refuse("is not a plan run")
	case job.Labels[api.LabelWorkspaceFingerprint] != req.WorkspaceFingerprint || job.Labels[api.LabelOwnerUID] != req.OwnerUID ||
		job.Annotations[AnnotationClusterID] != req.ClusterID || job.Annotations[api.AnnotationWorkspace] != req.Workspace:
		// Whose it is is not said.
		return refuse("is not a plan of this cluster for this caller")
	case job.Annotations[api.AnnotationInputsHash] != req.InputsHash():
		return refuse("planned other module inputs than this request's (the spec changed since): plan again")
	}
	if p := provisionFrom(job, outputs, "", c.cfg.Now()); p.Status != api.StatusSucceeded {
		return refuse(fmt.Sprintf("has not succeeded (status %s): there is no saved plan to apply", p.Status))
	}
	return nil
}

// readCredential reads the caller's credential Secret and keeps its known keys. A Secret that is
// one of the provisioner's own run objects is refused: a run may not be handed another run's
// credential copy or outputs.
func (c *Client) readCredential(ctx context.Context, ref api.SecretRef) (map[string][]byte, error) {
	s, err := c.cs.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, credentialError(ref, "not found")
	case apierrors.IsForbidden(err):
		return nil, credentialError(ref, "is not readable by the provisioner")
	case err != nil:
		return nil, fmt.Errorf("failed to read credential Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if _, ok := s.Labels[api.LabelRun]; ok {
		return nil, credentialError(ref, "belongs to a provisioning run, not to the caller")
	}
	return credentialData(ref, s)
}

// Get returns the run as its Job and outputs Secret say now (sync-on-read); jobrun.ErrNotFound when
// there is no such run.
func (c *Client) Get(ctx context.Context, id string) (api.Provision, error) {
	job, outputs, err := c.read(ctx, id)
	if err != nil {
		return api.Provision{}, err
	}
	now := c.cfg.Now()
	p := provisionFrom(job, outputs, "", now)
	if c.podMatters(job, outputs, p) {
		problem, err := jobrun.LatestPodProblem(ctx, c.cs, job, ContainerName)
		if err != nil {
			return api.Provision{}, err
		}
		if problem != "" {
			p = provisionFrom(job, outputs, problem, now)
		}
	}
	return p, nil
}

// podMatters reports whether the pod's status can say more than the Job and the runner: while the
// run is queued (an image that does not pull, a pod that cannot be scheduled), and when it failed
// without the runner saying why (a crash, OOMKilled).
func (c *Client) podMatters(job *batchv1.Job, outputs *corev1.Secret, p api.Provision) bool {
	switch p.Status {
	case api.StatusQueued:
		return !jobrun.Suspended(job)
	case api.StatusFailed:
		return outputs == nil || outputs.Annotations[api.AnnotationPhase] != runnerFailed || outputs.Annotations[api.AnnotationMessage] == ""
	}
	return false
}

// read gets a run's Job and its outputs Secret (nil while it does not exist); jobrun.ErrNotFound
// when there is no such run.
func (c *Client) read(ctx context.Context, id string) (*batchv1.Job, *corev1.Secret, error) {
	return jobrun.ReadRun(ctx, c.cs, jobrun.Run{Namespace: c.cfg.Namespace, ID: id, RunLabel: api.LabelRun,
		Job: api.JobName(id), Report: api.OutputsSecretName(id)})
}

// Logs streams the log of the runner's container in the run's (newest) pod, as the kubelet has
// it; ErrNoPod while there is none. The caller closes the stream.
func (c *Client) Logs(ctx context.Context, id string) (io.ReadCloser, error) {
	job, _, err := c.read(ctx, id)
	if err != nil {
		return nil, err
	}
	pod, err := jobrun.LatestPod(ctx, c.cs, job)
	if err != nil {
		return nil, err
	}
	if pod == nil {
		return nil, ErrNoPod
	}
	rc, err := c.cs.CoreV1().Pods(c.cfg.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ContainerName}).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read the log of pod %s: %w", pod.Name, err)
	}
	return rc, nil
}

// Kubeconfig reads the cluster's kubeconfig from the run's outputs Secret, fresh on every call
// and never kept: a *NotDoneError before the run has succeeded, ErrNoKubeconfig when a
// succeeded run published none (destroy).
func (c *Client) Kubeconfig(ctx context.Context, id string) (string, error) {
	job, outputs, err := c.read(ctx, id)
	if err != nil {
		return "", err
	}
	if p := provisionFrom(job, outputs, "", c.cfg.Now()); p.Status != api.StatusSucceeded {
		return "", &NotDoneError{ID: id, Status: p.Status}
	}
	if outputs == nil || len(outputs.Data[api.OutputsKubeconfig]) == 0 {
		return "", ErrNoKubeconfig
	}
	return string(outputs.Data[api.OutputsKubeconfig]), nil
}

// Sweep deletes the Jobs of runs that ended more than retention ago, with Background
// propagation: the garbage collector deletes the objects each Job owns. Runs that have not
// ended are never touched. It returns how many runs it deleted.
func (c *Client) Sweep(ctx context.Context, retention time.Duration) (int, error) {
	return jobrun.Sweep(ctx, c.cs, c.cfg.Namespace, api.LabelRun, retention, c.cfg.Now())
}
