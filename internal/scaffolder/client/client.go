// Package client is the HostCluster controller's client of gitops-scaffolder
// (docs/scaffolder.md#http-api; the contract is internal/scaffolder/api): POST /api/v1/scaffolds
// starts a scaffold, GET /api/v1/scaffolds/{id} polls it. Both carry the shared secret in the
// X-Api-Key header (GITOPS_SCAFFOLDER_API_KEY, the service's own API_KEY). A scaffold that does
// not say whose it is (api.Scaffold.BelongsTo) is never followed.
//
// Errors are *Error values that say whether retrying can help (IsTransient): no answer, 5xx, 408
// and 429 are transient; every other 4xx is terminal and carries the service's own message. The
// API key never appears in an error.
package client

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

	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
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
func (c *Client) Create(ctx context.Context, r api.Request) (api.Scaffold, error) {
	const op = "create scaffold job"
	if err := r.Validate(); err != nil {
		return api.Scaffold{}, &Error{Op: op, Message: "invalid request: " + err.Error(), Err: err}
	}
	body, err := json.Marshal(r)
	if err != nil {
		return api.Scaffold{}, &Error{Op: op, Message: err.Error(), Err: err}
	}
	return c.do(ctx, op, http.MethodPost, c.base.JoinPath(api.ScaffoldsPath).String(), body, "")
}

// Get polls a scaffold job: GET {base}/api/v1/scaffolds/{id}, the id path-escaped. A job the
// service does not know is a terminal error wrapping ErrJobNotFound.
func (c *Client) Get(ctx context.Context, id string) (api.Scaffold, error) {
	op := fmt.Sprintf("get scaffold job %q", id)
	if id == "" {
		return api.Scaffold{}, &Error{Op: op, Message: "the job id is empty", Err: ErrJobNotFound}
	}
	u := c.base.JoinPath(api.ScaffoldsPath).String() + "/" + url.PathEscape(id)
	job, err := c.do(ctx, op, http.MethodGet, u, nil, id)
	if err != nil {
		return api.Scaffold{}, err
	}
	if job.ID == "" {
		job.ID = id
	}
	return job, nil
}

// do sends one request and reads the job from the answer. getID is the job a GET asks for; it is
// empty for the POST.
func (c *Client) do(ctx context.Context, op, method, u string, body []byte, getID string) (api.Scaffold, error) {
	get := getID != ""
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return api.Scaffold{}, &Error{Op: op, Message: err.Error(), Err: err}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set(api.APIKeyHeader, c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// net/http's *url.Error names the URL (without user info), never the headers.
		return api.Scaffold{}, &Error{Op: op, Message: c.redact(err.Error()), Transient: true, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return api.Scaffold{}, &Error{Op: op, StatusCode: resp.StatusCode, Message: "failed to read the answer: " + c.redact(err.Error()), Transient: true, Err: err}
	}
	if len(raw) > maxBody {
		return api.Scaffold{}, &Error{Op: op, StatusCode: resp.StatusCode, Message: fmt.Sprintf("the answer is larger than %d bytes", maxBody), Transient: true}
	}

	code := resp.StatusCode
	switch {
	case code == http.StatusOK || (!get && (code == http.StatusCreated || code == http.StatusAccepted)):
		var job api.Scaffold
		if err := json.Unmarshal(raw, &job); err != nil {
			return api.Scaffold{}, &Error{Op: op, StatusCode: code, Message: "the answer is not a job: " + err.Error(), Transient: true, Err: err}
		}
		if !get && job.ID == "" {
			// Retrying would start another job the controller could not track either.
			return api.Scaffold{}, &Error{Op: op, StatusCode: code, Message: "the service answered without a job id"}
		}
		return job, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return api.Scaffold{}, &Error{Op: op, StatusCode: code, Message: fmt.Sprintf("%s (HTTP %d)", ErrUnauthorized, code), Err: ErrUnauthorized}
	case get && code == http.StatusNotFound:
		return api.Scaffold{}, &Error{Op: op, StatusCode: code, Message: fmt.Sprintf("scaffold job %s not found", getID), Err: ErrJobNotFound}
	case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		return api.Scaffold{}, &Error{Op: op, StatusCode: code, Message: c.answer(code, raw), Transient: true}
	default:
		return api.Scaffold{}, &Error{Op: op, StatusCode: code, Message: c.answer(code, raw)}
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
