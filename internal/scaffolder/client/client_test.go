package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
)

const testKey = "s3cr3t-api-key"

func validRequest() api.Request {
	ref := api.SecretRef{Namespace: "kcp-d37f1981a6be", Name: "hostcluster-7e9d-kubeconfig"}
	return api.Request{
		ClusterID: "7e9d", Slug: "my-cluster", Domain: "my-cluster.acme.com", Region: "eu-north-1",
		RepoURL: "https://git.example.com/acme/gitops.git", Path: "fluxcd/clusters/my-cluster",
		KubeconfigSecretRef:     ref,
		GitCredentialsSecretRef: &api.SecretRef{Namespace: ref.Namespace, Name: "hostcluster-7e9d-git-credentials"},
		Workspace:               "1bg4baqdjkcw9lz4", OwnerUID: "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f",
	}
}

func TestNew(t *testing.T) {
	if _, err := New("", "k", nil); !errors.Is(err, ErrNotConfigured) || err.Error() != "GITOPS_SCAFFOLDER_BASE_URL is not set" {
		t.Errorf("New(\"\") = %v, want ErrNotConfigured", err)
	}
	for _, bad := range []string{"ftp://x", "not a url", "http://", "http://u:p@host"} {
		if _, err := New(bad, "k", nil); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	if _, err := New("http://gitops-scaffolder.kubeopera-provisioning:8080/", "", nil); err != nil {
		t.Errorf("New: %v", err)
	}
}

func TestCreateAndGet(t *testing.T) {
	var got struct {
		method, path, rawPath, key, ctype string
		body                              map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.method, got.path, got.rawPath, got.key, got.ctype = r.Method, r.URL.Path, r.URL.EscapedPath(), r.Header.Get("X-Api-Key"), r.Header.Get("Content-Type")
		switch r.Method {
		case http.MethodPost:
			got.body = nil
			_ = json.NewDecoder(r.Body).Decode(&got.body)
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"id":"job-1","status":"queued"}`)
		case http.MethodGet:
			_, _ = io.WriteString(w, `{"id":"job/1","status":"failed","error":"git push: rejected","workspace":"1bg4baqdjkcw9lz4","ownerUID":"6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f"}`)
		}
	}))
	defer srv.Close()

	c, err := New(srv.URL+"/", testKey, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.Create(context.Background(), validRequest())
	if err != nil {
		t.Fatal(err)
	}
	if job.ID != "job-1" || job.Status != api.StatusQueued || job.Done() {
		t.Errorf("job = %+v", job)
	}
	if got.method != http.MethodPost || got.path != "/api/v1/scaffolds" || got.key != testKey || got.ctype != "application/json" {
		t.Errorf("request = %+v", got)
	}
	want := map[string]any{
		"clusterID": "7e9d", "slug": "my-cluster", "domain": "my-cluster.acme.com", "region": "eu-north-1",
		"repoURL": "https://git.example.com/acme/gitops.git", "path": "fluxcd/clusters/my-cluster",
		"kubeconfigSecretRef":     map[string]any{"namespace": "kcp-d37f1981a6be", "name": "hostcluster-7e9d-kubeconfig"},
		"gitCredentialsSecretRef": map[string]any{"namespace": "kcp-d37f1981a6be", "name": "hostcluster-7e9d-git-credentials"},
		"workspace":               "1bg4baqdjkcw9lz4", "ownerUID": "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f",
	}
	if !reflect.DeepEqual(got.body, want) {
		t.Errorf("body = %v, want %v (branch and registryPullSecretRef omitted when empty)", got.body, want)
	}

	job, err = c.Get(context.Background(), "job/1")
	if err != nil {
		t.Fatal(err)
	}
	if got.method != http.MethodGet || got.rawPath != "/api/v1/scaffolds/job%2F1" || got.key != testKey {
		t.Errorf("request = %+v", got)
	}
	if !job.Failed() || job.Succeeded() || job.Error != "git push: rejected" {
		t.Errorf("job = %+v", job)
	}
	if !job.BelongsTo("1bg4baqdjkcw9lz4", "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f") {
		t.Errorf("job %+v does not belong to the object it names", job)
	}
}

func TestCreateRefusesAnInvalidRequest(t *testing.T) {
	c, err := New("http://127.0.0.1:1", testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	for field, mutate := range map[string]func(*api.Request){
		"slug":                          func(r *api.Request) { r.Slug = "" },
		"domain":                        func(r *api.Request) { r.Domain = "" },
		"kubeconfigSecretRef.namespace": func(r *api.Request) { r.KubeconfigSecretRef.Namespace = "" },
		"workspace":                     func(r *api.Request) { r.Workspace = "" },
		"ownerUID":                      func(r *api.Request) { r.OwnerUID = "" },
	} {
		r := validRequest()
		mutate(&r)
		_, err := c.Create(context.Background(), r)
		if err == nil || !strings.Contains(err.Error(), field) || !reconcile.IsTerminal(err) {
			t.Errorf("%s: err = %v, want a terminal error naming the field", field, err)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := map[string]struct {
		code      int
		body      string
		get       bool
		transient bool
		is        error
		contains  string
	}{
		"bad request carries the service's message": {code: 400, body: `{"error":"domain must be a DNS name"}`, contains: "HTTP 400: domain must be a DNS name"},
		"plain text message":                        {code: 422, body: "  no such\n template ", contains: "HTTP 422: no such template"},
		"unauthorized":                              {code: 401, is: ErrUnauthorized, contains: "the scaffolder refused the API key"},
		"forbidden":                                 {code: 403, is: ErrUnauthorized, contains: "the scaffolder refused the API key"},
		"unknown job":                               {code: 404, get: true, is: ErrJobNotFound, contains: "scaffold job j-1 not found"},
		"404 on create is terminal":                 {code: 404, contains: "HTTP 404"},
		"server error":                              {code: 500, body: `{"message":"boom"}`, transient: true, contains: "HTTP 500: boom"},
		"unavailable":                               {code: 503, transient: true, contains: "HTTP 503 Service Unavailable"},
		"rate limited":                              {code: 429, transient: true},
		"ok without a job":                          {code: 200, body: "<html>", transient: true, contains: "not a job"},
		"create answered without an id":             {code: 202, body: `{"status":"queued"}`, contains: "without a job id"},
		"echoed key is redacted":                    {code: 400, body: `{"error":"bad key ` + testKey + `"}`, contains: "bad key [redacted]"},
		"201 is not a GET answer":                   {code: 201, get: true, body: `{"id":"j-1"}`, contains: "HTTP 201"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.code)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			c, err := New(srv.URL, testKey, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.get {
				_, err = c.Get(context.Background(), "j-1")
			} else {
				_, err = c.Create(context.Background(), validRequest())
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.StatusCode != tt.code || IsTransient(err) != tt.transient || reconcile.IsTerminal(err) == tt.transient {
				t.Errorf("err = %+v, want status %d transient %v", e, tt.code, tt.transient)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("err = %q, want it to contain %q", err, tt.contains)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("err = %q carries the API key", err)
			}
		})
	}
}

func TestNetworkErrorIsTransientAndKeyless(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := New(url, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(context.Background(), "j-1")
	if !IsTransient(err) || strings.Contains(err.Error(), testKey) {
		t.Errorf("err = %v, want a transient error without the key", err)
	}
}

func TestResponseBodyIsBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id":"j-1","status":"running","message":"`)
		_, _ = io.WriteString(w, strings.Repeat("x", 2<<20))
		_, _ = io.WriteString(w, `"}`)
	}))
	defer srv.Close()
	c, err := New(srv.URL, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), "j-1"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("err = %v, want the answer refused as too large", err)
	}

	long := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, strings.Repeat("y", 10000))
	}))
	defer long.Close()
	c, _ = New(long.URL, testKey, nil)
	if _, err := c.Create(context.Background(), validRequest()); err == nil || len(err.Error()) > 1000 {
		t.Errorf("a long message must be truncated, got %d bytes", len(err.Error()))
	}
}
