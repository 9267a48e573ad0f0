package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/test/framework"
)

// metricsTokens returns a token allowed to read /metrics (a ServiceAccount bound to ClusterRole
// kubeopera-metrics-reader, as an admin binds Prometheus) and a valid token of a ServiceAccount
// that is not.
func (e *env) metricsTokens(t *testing.T) (reader, stranger string) {
	t.Helper()
	ctx := context.Background()
	reader, err := framework.MetricsReaderToken(ctx, e.backend)
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "metrics-stranger"}}
	if err := e.backendC.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg, err := devenv.ServiceAccountConfig(ctx, e.backend.Config, sa.Namespace, sa.Name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return reader, cfg.BearerToken
}

// metricsGet GETs url over HTTPS (the manager's certificate is self-signed, so it is not
// verified) with token as bearer token when set, and returns the status code and body.
func metricsGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the manager's self-signed certificate
	}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
