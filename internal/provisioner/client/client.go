// Package client is the HostCluster controller's client of the provisioner's HTTP API
// (internal/provisioner/api): start a run, poll it, fetch the kubeconfig once it succeeded. Every
// call carries the shared key in X-Api-Key.
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

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

// Client talks to one provisioner.
type Client struct {
	// BaseURL is CLUSTER_PROVISIONER_BASE_URL, e.g. http://provisioner.kubeopera-system.
	BaseURL string
	// APIKey is CLUSTER_PROVISIONER_API_KEY.
	APIKey string
	// HTTP; a client with a 30 s timeout when nil.
	HTTP *http.Client
}

// New returns a client of the provisioner at baseURL; an empty baseURL gives nil (provisioning is
// not offered).
func New(baseURL, apiKey string) (*Client, error) {
	if baseURL == "" {
		return nil, nil
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cluster provisioner base URL %q is not an http(s) URL", baseURL)
	}
	return &Client{BaseURL: strings.TrimSuffix(baseURL, "/"), APIKey: apiKey}, nil
}

// Error is an answer other than success.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is the provisioner's error text, Field the request field at fault (400).
	Message, Field string
	// ActiveRun is the run still active for the cluster when a create was refused (409).
	ActiveRun string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("provisioner answered %d", e.StatusCode)
	if e.Field != "" {
		msg += ": " + e.Field
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Terminal reports whether retrying the same call cannot help: the request is wrong (400), the
// key is refused (401, 403), the run is unknown (404).
func (e *Error) Terminal() bool {
	switch e.StatusCode {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}

// IsNotFound reports an unknown run; IsConflict a kubeconfig asked for before the run succeeded.
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsConflict reports a 409.
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

// ActiveRun returns the run named by a create refused because another run of the same cluster
// is still active (409 with activeRun): the caller waits for it to end.
func ActiveRun(err error) (string, bool) {
	var e *Error
	if errors.As(err, &e) && e.StatusCode == http.StatusConflict && e.ActiveRun != "" {
		return e.ActiveRun, true
	}
	return "", false
}

func statusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// Create starts a run; it returns as soon as the provisioner accepted it.
func (c *Client) Create(ctx context.Context, req api.CreateRequest) (api.Provision, error) {
	var p api.Provision
	return p, c.do(ctx, http.MethodPost, "/api/v1/provisions", req, http.StatusAccepted, &p)
}

// Get reads a run's status.
func (c *Client) Get(ctx context.Context, id string) (api.Provision, error) {
	var p api.Provision
	return p, c.do(ctx, http.MethodGet, "/api/v1/provisions/"+url.PathEscape(id), nil, http.StatusOK, &p)
}

// Kubeconfig fetches the kubeconfig of a run that succeeded (a 409 before).
func (c *Client) Kubeconfig(ctx context.Context, id string) ([]byte, error) {
	var k api.KubeconfigResponse
	if err := c.do(ctx, http.MethodGet, "/api/v1/provisions/"+url.PathEscape(id)+"/kubeconfig", nil, http.StatusOK, &k); err != nil {
		return nil, err
	}
	if k.Kubeconfig == "" {
		return nil, errors.New("provisioner returned an empty kubeconfig")
	}
	return []byte(k.Kubeconfig), nil
}

// maxResponse bounds what is read of an answer (a kubeconfig with certificates is a few KB).
const maxResponse = 1 << 20

func (c *Client) do(ctx context.Context, method, path string, in any, want int, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-Api-Key", c.APIKey)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("provisioner %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("provisioner %s %s: %w", method, path, err)
	}
	if resp.StatusCode != want {
		e := &Error{StatusCode: resp.StatusCode}
		var er api.ErrorResponse
		if json.Unmarshal(raw, &er) == nil {
			e.Message, e.Field, e.ActiveRun = er.Error, er.Field, er.ActiveRun
		}
		return e
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("provisioner %s %s: unreadable answer: %w", method, path, err)
	}
	return nil
}
