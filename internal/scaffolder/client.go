// Package scaffolder is the client of gitops-scaffolder, the service that generates and pushes a
// host cluster's GitOps tree (docs/hostcluster.md#gitops-scaffolder-api): POST /api/v1/scaffolds starts a
// job, GET /api/v1/scaffolds/{id} polls it. Both carry the shared secret in the X-Api-Key header
// (GITOPS_SCAFFOLDER_API_KEY, the service's own API_KEY). Beyond the seed's fields, a request
// carries the workspace and UID of the HostCluster it is for, which the service records and
// answers with every job (optional fields: a service or client that predates them still works
// with the other, but a job that does not say whose it is is never followed).
//
// Errors are *Error values that say whether retrying can help (IsTransient): no answer, 5xx, 408
// and 429 are transient; every other 4xx is terminal and carries the service's own message. The
// API key never appears in an error.
package scaffolder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Paths of the gitops-scaffolder API.
const (
	scaffoldsPath = "/api/v1/scaffolds"
	// APIKeyHeader carries the shared secret.
	APIKeyHeader = "X-Api-Key"
)

// Job statuses, as the service reports them.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// maxBody bounds how much of a response is read.
const maxBody = 1 << 20

// maxMessage bounds how much of a service's error message is kept in an error.
const maxMessage = 512

// defaultTimeout is the timeout of the HTTP client New makes when given none.
const defaultTimeout = 30 * time.Second

// ErrNotConfigured is returned by New without a base URL: GeneratingGitOpsTree fails fast and
// clearly rather than hanging (docs/hostcluster.md#environment).
var ErrNotConfigured = errors.New("GITOPS_SCAFFOLDER_BASE_URL is not set")

// ErrUnauthorized is wrapped by the *Error of a 401 or 403 answer.
var ErrUnauthorized = errors.New("the scaffolder refused the API key")

// ErrJobNotFound is wrapped by the *Error of Get when the service does not know the job (404).
var ErrJobNotFound = errors.New("scaffold job not found")

// Request is the body of POST /api/v1/scaffolds.
type Request struct {
	// Slug names the cluster's tree: the last element of spec.gitOpsPath (SlugFromPath).
	Slug string `json:"slug"`
	// Domain feeds every generated service's ingress hostname (spec.domain).
	Domain string `json:"domain"`
	// Region is spec.region; it may be empty.
	Region string `json:"region"`
	// KubeconfigSecretName is the stored kubeconfig Secret of the target,
	// hostcluster-<clusterID>-kubeconfig.
	KubeconfigSecretName string `json:"kubeconfigSecretName"`
	// KubeconfigSecretNamespace is where that Secret lives: on kcp the stored kubeconfig is in the
	// workspace's backend namespace kcp-<fp>, so the name alone is ambiguous.
	KubeconfigSecretNamespace string `json:"kubeconfigSecretNamespace"`
	// GitCredentialsSecretRef is spec.gitCredentialsSecretRef, when set.
	GitCredentialsSecretRef string `json:"gitCredentialsSecretRef,omitempty"`
	// RegistryPullSecretRef is spec.registryPullSecretRef, when set.
	RegistryPullSecretRef string `json:"registryPullSecretRef,omitempty"`
	// Workspace is the kcp logical cluster of the HostCluster the job is for and OwnerUID that
	// HostCluster's metadata.uid: the service records them on the job and answers them with it,
	// so the controller follows only jobs it started for the object (Job.BelongsTo). Optional in
	// the service's API (a service that predates them ignores them); this client always sends
	// them.
	Workspace string `json:"workspace,omitempty"`
	OwnerUID  string `json:"ownerUID,omitempty"`
}

// Validate reports the first required field that is empty or malformed, before anything is sent.
func (r Request) Validate() error {
	switch {
	case r.Slug == "":
		return errors.New("slug is required")
	case r.Domain == "":
		return errors.New("domain is required")
	case r.KubeconfigSecretName == "":
		return errors.New("kubeconfigSecretName is required")
	case r.KubeconfigSecretNamespace == "":
		return errors.New("kubeconfigSecretNamespace is required")
	case r.Workspace == "":
		return errors.New("workspace is required")
	case r.OwnerUID == "":
		return errors.New("ownerUID is required")
	}
	if err := validateSlug(r.Slug); err != nil {
		return fmt.Errorf("slug: %w", err)
	}
	return nil
}

// Job is a scaffold job as the service reports it.
type Job struct {
	// ID identifies the job; the controller keeps it in the kubeopera.io/scaffold-job-id annotation.
	ID string `json:"id"`
	// Status is queued, running, succeeded or failed.
	Status string `json:"status"`
	// Message says what the job is doing.
	Message string `json:"message,omitempty"`
	// Error is the real underlying error of a failed job.
	Error string `json:"error,omitempty"`
	// Workspace and OwnerUID are the request's: whose job it is. A service that predates them
	// answers neither, and its jobs belong to nobody.
	Workspace string `json:"workspace,omitempty"`
	OwnerUID  string `json:"ownerUID,omitempty"`
}

// BelongsTo reports whether the job was started for the object ownerUID of workspace: the
// controller follows a job only then (the job-ID annotation is the tenant's to write).
func (j Job) BelongsTo(workspace, ownerUID string) bool {
	return workspace != "" && ownerUID != "" && j.Workspace == workspace && j.OwnerUID == ownerUID
}

// Succeeded reports whether the tree is pushed.
func (j Job) Succeeded() bool { return j.Status == StatusSucceeded }

// Failed reports whether the job ended without a tree.
func (j Job) Failed() bool { return j.Status == StatusFailed }

// Done reports whether the job ended, either way.
func (j Job) Done() bool { return j.Succeeded() || j.Failed() }

// Error is a failed call to the service.
type Error struct {
	// Op is the call: "create scaffold job" or "get scaffold job <id>".
	Op string
	// StatusCode is the HTTP status the service answered; 0 when no answer came.
	StatusCode int
	// Message says what went wrong, with the service's own message when it gave one.
	Message string
	// Transient is true when retrying can succeed: no answer, 5xx, 408, 429.
	Transient bool
	// Err is the cause: the network error, ErrUnauthorized, ErrJobNotFound, or nil.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("gitops-scaffolder: failed to %s: %s", e.Op, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Terminal reports whether retrying the call cannot fix it (a 4xx other than 408 and 429, a
// malformed request, a missing configuration): the reconcile skeleton stalls the
// object then.
func (e *Error) Terminal() bool { return !e.Transient }

// IsTransient reports whether err is a call to the service that may succeed when retried.
func IsTransient(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Transient
}

// Client calls gitops-scaffolder.
type Client struct {
	base   *url.URL
	apiKey string
	hc     *http.Client
}

// New returns a client of the service at baseURL (GITOPS_SCAFFOLDER_BASE_URL, e.g.
// http://gitops-scaffolder.kubeopera-provisioning:8080) sending apiKey
// (GITOPS_SCAFFOLDER_API_KEY; empty sends no key). hc nil uses a client with a 30 s timeout.
func New(baseURL, apiKey string, hc *http.Client) (*Client, error) {
	if strings.TrimSpace(baseURL) == "" {
		return nil, ErrNotConfigured
	}
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(baseURL), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("GITOPS_SCAFFOLDER_BASE_URL %q is not an http(s) URL", baseURL)
	}
	if u.User != nil {
		return nil, errors.New("GITOPS_SCAFFOLDER_BASE_URL must not carry credentials: set GITOPS_SCAFFOLDER_API_KEY")
	}
	if hc == nil {
		hc = &http.Client{Timeout: defaultTimeout}
	}
	return &Client{base: u, apiKey: apiKey, hc: hc}, nil
}

// Create starts a scaffold job: POST {base}/api/v1/scaffolds. The service answers 201 or 202
// (200 is accepted too) with the job.
func (c *Client) Create(ctx context.Context, r Request) (Job, error) {
	const op = "create scaffold job"
	if err := r.Validate(); err != nil {
		return Job{}, &Error{Op: op, Message: "invalid request: " + err.Error(), Err: err}
	}
	body, err := json.Marshal(r)
	if err != nil {
		return Job{}, &Error{Op: op, Message: err.Error(), Err: err}
	}
	return c.do(ctx, op, http.MethodPost, c.base.JoinPath(scaffoldsPath).String(), body, "")
}

// Get polls a scaffold job: GET {base}/api/v1/scaffolds/{id}, the id path-escaped. A job the
// service does not know is a terminal error wrapping ErrJobNotFound.
func (c *Client) Get(ctx context.Context, id string) (Job, error) {
	op := fmt.Sprintf("get scaffold job %q", id)
	if id == "" {
		return Job{}, &Error{Op: op, Message: "the job id is empty", Err: ErrJobNotFound}
	}
	u := c.base.JoinPath(scaffoldsPath).String() + "/" + url.PathEscape(id)
	job, err := c.do(ctx, op, http.MethodGet, u, nil, id)
	if err != nil {
		return Job{}, err
	}
	if job.ID == "" {
		job.ID = id
	}
	return job, nil
}

// do sends one request and reads the job from the answer. getID is the job a GET asks for; it is
// empty for the POST.
func (c *Client) do(ctx context.Context, op, method, u string, body []byte, getID string) (Job, error) {
	get := getID != ""
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return Job{}, &Error{Op: op, Message: err.Error(), Err: err}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set(APIKeyHeader, c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// net/http's *url.Error names the URL (without user info), never the headers.
		return Job{}, &Error{Op: op, Message: c.redact(err.Error()), Transient: true, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Job{}, &Error{Op: op, StatusCode: resp.StatusCode, Message: "failed to read the answer: " + c.redact(err.Error()), Transient: true, Err: err}
	}
	if len(raw) > maxBody {
		return Job{}, &Error{Op: op, StatusCode: resp.StatusCode, Message: fmt.Sprintf("the answer is larger than %d bytes", maxBody), Transient: true}
	}

	code := resp.StatusCode
	switch {
	case code == http.StatusOK || (!get && (code == http.StatusCreated || code == http.StatusAccepted)):
		var job Job
		if err := json.Unmarshal(raw, &job); err != nil {
			return Job{}, &Error{Op: op, StatusCode: code, Message: "the answer is not a job: " + err.Error(), Transient: true, Err: err}
		}
		if !get && job.ID == "" {
			// Retrying would start another job the controller could not track either.
			return Job{}, &Error{Op: op, StatusCode: code, Message: "the service answered without a job id"}
		}
		return job, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return Job{}, &Error{Op: op, StatusCode: code, Message: fmt.Sprintf("%s (HTTP %d)", ErrUnauthorized, code), Err: ErrUnauthorized}
	case get && code == http.StatusNotFound:
		return Job{}, &Error{Op: op, StatusCode: code, Message: fmt.Sprintf("scaffold job %s not found", getID), Err: ErrJobNotFound}
	case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		return Job{}, &Error{Op: op, StatusCode: code, Message: c.answer(code, raw), Transient: true}
	default:
		return Job{}, &Error{Op: op, StatusCode: code, Message: c.answer(code, raw)}
	}
}

// answer describes a non-successful answer: its status and the service's message, bounded.
func (c *Client) answer(code int, raw []byte) string {
	msg := serviceMessage(raw)
	if msg == "" {
		return fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	}
	return fmt.Sprintf("HTTP %d: %s", code, c.redact(msg))
}

// serviceMessage reads {"error": ...} or {"message": ...}, else the text, trimmed and bounded.
func serviceMessage(raw []byte) string {
	var m struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	msg := ""
	if err := json.Unmarshal(raw, &m); err == nil {
		msg = m.Error
		if msg == "" {
			msg = m.Message
		}
	} else {
		msg = string(raw)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "..."
	}
	return msg
}

// redact removes the API key from text that came from elsewhere (a service echoing headers).
func (c *Client) redact(s string) string {
	if c.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.apiKey, "[redacted]")
}
