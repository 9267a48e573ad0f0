package server_test

// The server on a real run store on a real kube-apiserver (framework.StartCluster: no kubelet, no
// controllers), called by the manager's own client (internal/scaffolder/client) and, for what the
// client never sends, by plain HTTP.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/jobrun"
	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/client"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/internal/scaffolder/server"
	"github.com/kubeopera/kubeopera/test/framework"
)

const (
	apiKey          = "test-api-key-0123456789abcdef"
	kubeconfigValue = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]\n"
	ns              = "provisioning"
)

func request() api.Request {
	return api.Request{
		ClusterID: "prod-1", Slug: "prod-1", Domain: "prod-1.example.com", Region: "eu-north-1",
		RepoURL: "https://git.example.com/acme/fleet.git", Path: "fluxcd/clusters/prod-1",
		KubeconfigSecretRef: api.SecretRef{Namespace: ns, Name: "hostcluster-prod-1-kubeconfig"},
		Workspace:           "1bg4baqdjkcw9lz4", OwnerUID: "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f",
	}
}

func TestAPI(t *testing.T) {
	c := framework.StartCluster(t, framework.ClusterOptions{})
	cs := kubernetes.NewForConfigOrDie(c.Config)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostcluster-prod-1-kubeconfig"}, StringData: map[string]string{"kubeconfig": kubeconfigValue}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, kc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runs, err := jobs.New(cs, jobs.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	srv, err := server.New(server.Config{APIKey: apiKey, Runs: runs, Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	post := func(key, body string) (int, http.Header, api.ErrorResponse) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+api.ScaffoldsPath, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set(api.APIKeyHeader, key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var e api.ErrorResponse
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &e)
		return resp.StatusCode, resp.Header, e
	}
	valid, _ := json.Marshal(request())
	withField := func(field string, value any) string {
		m := map[string]any{}
		_ = json.Unmarshal(valid, &m)
		m[field] = value
		b, _ := json.Marshal(m)
		return string(b)
	}

	// 401: no key, a wrong key; nothing is created.
	for _, key := range []string{"", "wrong-key"} {
		if code, _, e := post(key, string(valid)); code != http.StatusUnauthorized || e.Error != "unauthorized" {
			t.Errorf("key %q: %d %+v", key, code, e)
		}
	}
	if list, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Fatalf("unauthorized requests created %d Jobs (%v)", len(list.Items), err)
	}
	// 400 naming the field, 413, 415.
	for name, tc := range map[string]struct {
		body  string
		code  int
		field string
	}{
		"invalid slug":             {withField("slug", "Prod_1"), 400, "slug"},
		"unknown field":            {withField("kubeconfigSecretName", "x"), 400, "kubeconfigSecretName"},
		"wrong type":               {withField("domain", 7), 400, "domain"},
		"kubeconfig Secret absent": {withField("kubeconfigSecretRef", map[string]string{"namespace": ns, "name": "nothing"}), 400, "kubeconfigSecretRef"},
		"too large":                {withField("domain", strings.Repeat("a", jobservice.MaxBodyBytes)), 413, ""},
	} {
		if code, _, e := post(apiKey, tc.body); code != tc.code || e.Field != tc.field || e.Error == "" {
			t.Errorf("%s: %d %+v, want %d on %q", name, code, e, tc.code, tc.field)
		}
	}

	// 202 with the job, then GET through the manager's client; 404 for an unknown job.
	code, header, _ := post(apiKey, string(valid))
	if code != http.StatusAccepted || !strings.HasPrefix(header.Get("Location"), api.ScaffoldsPath+"/") {
		t.Fatalf("POST: %d %v", code, header)
	}
	cl, err := client.New(hs.URL, apiKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Create(ctx, request())
	if err != nil || !jobrun.ValidID(s.ID) || s.Status != api.StatusQueued || !s.BelongsTo("1bg4baqdjkcw9lz4", "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f") {
		t.Fatalf("client Create: %+v, %v", s, err)
	}
	jobCtl := jobruntest.JobController{Client: cs, Namespace: ns, JobName: api.JobName}
	if _, err := jobCtl.Complete(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.Get(ctx, s.ID); err != nil || !got.Succeeded() || got.ID != s.ID {
		t.Errorf("client Get: %+v, %v", got, err)
	}
	if _, err := cl.Get(ctx, "nothing123"); !errors.Is(err, client.ErrJobNotFound) {
		t.Errorf("client Get of an unknown job: %v, want ErrJobNotFound", err)
	}
	bad, err := client.New(hs.URL, "wrong-key", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Get(ctx, s.ID); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("client with a wrong key: %v", err)
	}
	resp, err := http.Get(hs.URL + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health without a key: %v %v", resp, err)
	}
	_ = resp.Body.Close()

	for _, v := range []string{apiKey, kubeconfigValue, "kind: Config", "prod-1.example.com"} {
		if strings.Contains(logs.String(), v) {
			t.Errorf("the log carries %q", v)
		}
	}
	if !strings.Contains(logs.String(), `"msg":"Started a scaffold","run":"`+s.ID) {
		t.Errorf("the log does not say which scaffold started:\n%s", logs)
	}
}

// Serve sweeps on its interval and stops when its context ends.
func TestServeSweepsAndStops(t *testing.T) {
	sweeps := make(chan time.Duration, 10)
	srv, err := server.New(server.Config{APIKey: apiKey, Runs: sweepOnly(sweeps), Retention: time.Hour, SweepInterval: 10 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	for range 2 {
		select {
		case r := <-sweeps:
			if r != time.Hour {
				t.Errorf("swept with retention %s", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no sweep")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := server.New(server.Config{Runs: sweepOnly(sweeps)}); err == nil {
		t.Error("New without an API key")
	}
}

// sweepOnly is a run store that only sweeps.
type sweepOnly chan time.Duration

func (s sweepOnly) Create(context.Context, api.Request) (api.Scaffold, error) {
	return api.Scaffold{}, errors.New("not here")
}
func (s sweepOnly) Get(context.Context, string) (api.Scaffold, error) {
	return api.Scaffold{}, jobrun.ErrNotFound
}
func (s sweepOnly) Sweep(_ context.Context, retention time.Duration) (int, error) {
	select {
	case s <- retention:
	default: // the test has seen enough sweeps
	}
	return 0, nil
}
