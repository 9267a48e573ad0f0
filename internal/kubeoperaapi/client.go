// Package kubeoperaapi is the client of kubeopera-api's CloudSpace callback.
package kubeoperaapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// CloudSpaceUpdate is the body of PATCH /api/v1/cloudspaces/{id}.
type CloudSpaceUpdate struct {
	VClusterID       string `json:"vcluster_id"`
	Namespace        string `json:"namespace"`
	KubeconfigSecret string `json:"kubeconfig_secret"`
	Status           string `json:"status"`
}

// Client patches CloudSpaces in kubeopera-api.
type Client struct {
	// BaseURL, e.g. http://kubeopera-api:8080. Empty disables the callback.
	BaseURL string
	// Token is sent as a bearer token when set (INTERNAL_SERVICE_TOKEN).
	Token string
	// HTTP is the HTTP client; nil uses one with a 10 s timeout.
	HTTP *http.Client
}

// Enabled reports whether a base URL is configured.
func (c *Client) Enabled() bool { return c != nil && c.BaseURL != "" }

// PatchCloudSpace sends the update for cloudSpaceID.
func (c *Client) PatchCloudSpace(ctx context.Context, cloudSpaceID string, update CloudSpaceUpdate) error {
	body, err := json.Marshal(update)
	if err != nil {
		return err
	}
	u := strings.TrimRight(c.BaseURL, "/") + "/api/v1/cloudspaces/" + url.PathEscape(cloudSpaceID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("failed to build kubeopera-api request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("kubeopera-api PATCH cloudspace %s failed: %w", cloudSpaceID, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("kubeopera-api PATCH cloudspace %s answered %s", cloudSpaceID, resp.Status)
	}
	return nil
}
