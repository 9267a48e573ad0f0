package server_test

// The server on a real run store on a real kube-apiserver (framework.StartCluster: no kubelet, no
// controllers). jobruntest plays the Job controller and jobstest the runner where a run must move
// on.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs/jobstest"
	"github.com/kubeopera/kubeopera/internal/provisioner/server"
	"github.com/kubeopera/kubeopera/test/framework"
)

const (
	apiKey     = "test-api-key-0123456789abcdef"
	accessKey  = "AKIASERVERTESTACCESS"
	secretKey  = "server/test/secret/key"
	kubeconfig = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]\n"
)

type testServer struct {
	t      *testing.T
	cs     kubernetes.Interface
	url    string
	ns     string
	logs   *bytes.Buffer
	jobCtl jobruntest.JobController
	runner jobstest.Runner
}

func render(req api.CreateRequest) (map[string]string, error) {
	return map[string]string{"main.tf": "# " + req.ClusterID + "\n"}, nil
}

func start(t *testing.T) *testServer {
	t.Helper()
	c := framework.StartCluster(t, framework.ClusterOptions{})
	cs := kubernetes.NewForConfigOrDie(c.Config)
	ctx := t.Context()
	ns := "provisioning"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cred := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cred"},
		StringData: map[string]string{"access_key": accessKey, "secret_key": secretKey}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, cred, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runs, err := jobs.New(cs, jobs.Config{Namespace: ns, Render: render})
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
	return &testServer{t: t, cs: cs, url: hs.URL, ns: ns, logs: logs,
		jobCtl: jobruntest.JobController{Client: cs, Namespace: ns, JobName: api.JobName}, runner: jobstest.Runner{Config: c.Config, Namespace: ns}}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %d %q: %v", a.status, a.body, err)
	}
}

func (s *testServer) do(method, path, key, contentType string, body io.Reader) answer {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.url+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(server.APIKeyHeader, key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// validBody is a valid CreateRequest as a JSON object, edited by mutate.
func validBody(mutate func(map[string]any)) string {
	m := map[string]any{
		"clusterID": "prod-1", "region": "eu-north-1", "topology": "vanilla_kubeadm", "controlPlaneCount": 3,
		"nodeCount": 2, "instanceType": "t3.medium", "kubernetesVersion": "1.31", "terraformEnvironment": "prod-1",
		"credentialSecretRef": map[string]any{"namespace": "provisioning", "name": "cred"},
		"workspace":           "1bg4baqdjkcw9lz4", "workspaceFingerprint": "d37f1981a6be", "ownerUID": "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f",
	}
	if mutate != nil {
		mutate(m)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func TestAPI(t *testing.T) {
	s := start(t)
	post := func(body string) answer {
		return s.do(http.MethodPost, "/api/v1/provisions", apiKey, "application/json", strings.NewReader(body))
	}

	t.Run("health needs no key", func(t *testing.T) {
		if a := s.do(http.MethodGet, "/health", "", "", nil); a.status != http.StatusOK {
			t.Fatalf("GET /health: %d %s", a.status, a.body)
		}
	})

	var unauthorized []byte
	t.Run("401 without the right key, saying nothing more", func(t *testing.T) {
		for _, tc := range []struct{ method, path, key string }{
			{http.MethodPost, "/api/v1/provisions", ""},
			{http.MethodPost, "/api/v1/provisions", "wrong"},
			{http.MethodPost, "/api/v1/provisions", strings.Repeat("x", len(apiKey))},
			{http.MethodPost, "/api/v1/provisions", apiKey + "x"},
			{http.MethodGet, "/api/v1/provisions/abcdefghij", ""},
			{http.MethodGet, "/api/v1/provisions/abcdefghij/logs", "wrong"},
			{http.MethodGet, "/api/v1/provisions/abcdefghij/kubeconfig", strings.ToUpper(apiKey)},
		} {
			a := s.do(tc.method, tc.path, tc.key, "application/json", strings.NewReader(validBody(nil)))
			if a.status != http.StatusUnauthorized {
				t.Errorf("%s %s key %q: %d, want 401", tc.method, tc.path, tc.key, a.status)
			}
			if unauthorized == nil {
				unauthorized = a.body
			}
			if !bytes.Equal(a.body, unauthorized) {
				t.Errorf("%s %s key %q: body %q differs from %q", tc.method, tc.path, tc.key, a.body, unauthorized)
			}
		}
		var e api.ErrorResponse
		answer{body: unauthorized}.decode(t, &e)
		if e != (api.ErrorResponse{Error: "unauthorized"}) {
			t.Errorf("401 body %+v", e)
		}
	})

	t.Run("400 names the field", func(t *testing.T) {
		set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
		tests := map[string]struct {
			mutate func(map[string]any)
			field  string
		}{
			"clusterID":                     {set("clusterID", "-bad"), "clusterID"},
			"region":                        {set("region", "mars"), "region"},
			"topology":                      {set("topology", "gke"), "topology"},
			"controlPlaneCount on eks":      {set("topology", "eks"), "controlPlaneCount"},
			"controlPlaneCount range":       {set("controlPlaneCount", 8), "controlPlaneCount"},
			"nodeCount":                     {set("nodeCount", -1), "nodeCount"},
			"instanceType":                  {set("instanceType", "big"), "instanceType"},
			"kubernetesVersion":             {set("kubernetesVersion", "latest"), "kubernetesVersion"},
			"terraformEnvironment":          {set("terraformEnvironment", "Prod_1"), "terraformEnvironment"},
			"terraformEnvironment reserved": {set("terraformEnvironment", "x-s3alias"), "terraformEnvironment"},
			"credentialSecretRef.namespace": {set("credentialSecretRef", map[string]any{"namespace": "", "name": "cred"}), "credentialSecretRef.namespace"},
			"credentialSecretRef.name":      {set("credentialSecretRef", map[string]any{"namespace": "provisioning", "name": "Bad Name"}), "credentialSecretRef.name"},
			"operation":                     {set("operation", "refresh"), "operation"},
			"planRun of a destroy":          {func(m map[string]any) { m["operation"] = "destroy"; m["planRun"] = "abcdefghij" }, "planRun"},
			"planRun not a run":             {set("planRun", "../x"), "planRun"},
			"planRun of no run":             {set("planRun", "abcdefghij"), "planRun"},
			"no workspace":                  {func(m map[string]any) { delete(m, "workspace") }, "workspace"},
			"workspaceFingerprint":          {set("workspaceFingerprint", "../../etc"), "workspaceFingerprint"},
			"no ownerUID":                   {func(m map[string]any) { delete(m, "ownerUID") }, "ownerUID"},
			"missing credential Secret":     {set("credentialSecretRef", map[string]any{"namespace": "provisioning", "name": "absent"}), "credentialSecretRef"},
			"unknown field":                 {set("vpcID", "vpc-1"), "vpcID"},
			"wrong type":                    {set("nodeCount", "two"), "nodeCount"},
			"wrong nested type":             {set("credentialSecretRef", map[string]any{"namespace": 1, "name": "cred"}), "credentialSecretRef.namespace"},
		}
		for name, tc := range tests {
			a := post(validBody(tc.mutate))
			var e api.ErrorResponse
			a.decode(t, &e)
			if a.status != http.StatusBadRequest || e.Field != tc.field || !strings.HasPrefix(e.Error, tc.field) {
				t.Errorf("%s: %d %+v, want 400 naming %s", name, a.status, e, tc.field)
			}
		}
		for name, body := range map[string]string{
			"empty body":   "",
			"not JSON":     "clusterID=prod-1",
			"truncated":    `{"clusterID": "prod-1"`,
			"two objects":  validBody(nil) + validBody(nil),
			"not a object": `["prod-1"]`,
		} {
			a := post(body)
			var e api.ErrorResponse
			a.decode(t, &e)
			if a.status != http.StatusBadRequest || e.Error == "" {
				t.Errorf("%s: %d %+v, want 400 saying why", name, a.status, e)
			}
		}
	})

	t.Run("413 for an oversized body", func(t *testing.T) {
		big := validBody(func(m map[string]any) { m["clusterID"] = strings.Repeat("a", jobservice.MaxBodyBytes) })
		a := post(big)
		if a.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d %s, want 413", a.status, a.body)
		}
	})

	t.Run("415 for another content type", func(t *testing.T) {
		a := s.do(http.MethodPost, "/api/v1/provisions", apiKey, "application/x-www-form-urlencoded", strings.NewReader(validBody(nil)))
		if a.status != http.StatusUnsupportedMediaType {
			t.Fatalf("%d %s, want 415", a.status, a.body)
		}
	})

	t.Run("404 for an unknown run", func(t *testing.T) {
		for _, path := range []string{"/api/v1/provisions/zzzzzzzzzz", "/api/v1/provisions/Not_An_ID", "/api/v1/provisions/zzzzzzzzzz/logs", "/api/v1/provisions/zzzzzzzzzz/kubeconfig"} {
			if a := s.do(http.MethodGet, path, apiKey, "", nil); a.status != http.StatusNotFound {
				t.Errorf("GET %s: %d %s, want 404", path, a.status, a.body)
			}
		}
	})

	t.Run("202, then 409 and 200 for the kubeconfig", func(t *testing.T) {
		a := post(validBody(nil))
		if a.status != http.StatusAccepted {
			t.Fatalf("POST: %d %s, want 202", a.status, a.body)
		}
		var p api.Provision
		a.decode(t, &p)
		if p.Status != api.StatusQueued || !jobrun.ValidID(p.ID) || a.header.Get("Location") != "/api/v1/provisions/"+p.ID {
			t.Fatalf("POST answered %+v, Location %q", p, a.header.Get("Location"))
		}
		path := "/api/v1/provisions/" + p.ID
		if a := s.do(http.MethodGet, path, apiKey, "", nil); a.status != http.StatusOK {
			t.Fatalf("GET: %d %s", a.status, a.body)
		}
		// One run at a time per cluster: a second POST for it is refused, naming the active run.
		second := post(validBody(func(m map[string]any) { m["nodeCount"] = 5 }))
		var er api.ErrorResponse
		second.decode(t, &er)
		if second.status != http.StatusConflict || er.ActiveRun != p.ID || !strings.Contains(er.Error, "has an active run "+p.ID) {
			t.Fatalf("a second POST for the cluster while %s is queued: %d %s, want 409 naming it", p.ID, second.status, second.body)
		}
		if a := s.do(http.MethodGet, path+"/logs", apiKey, "", nil); a.status != http.StatusConflict {
			t.Fatalf("GET logs without a pod: %d %s, want 409", a.status, a.body)
		}
		if a := s.do(http.MethodGet, path+"/kubeconfig", apiKey, "", nil); a.status != http.StatusConflict {
			t.Fatalf("GET kubeconfig while queued: %d %s, want 409", a.status, a.body)
		}
		ctx := context.Background()
		if _, err := s.jobCtl.Start(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.runner.Report(ctx, p.ID, "succeeded", "kubeconfig published", kubeconfig); err != nil {
			t.Fatal(err)
		}
		if a := s.do(http.MethodGet, path+"/kubeconfig", apiKey, "", nil); a.status != http.StatusConflict {
			t.Fatalf("GET kubeconfig before the Job completed: %d %s, want 409", a.status, a.body)
		}
		if _, err := s.jobCtl.Complete(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
		a = s.do(http.MethodGet, path, apiKey, "", nil)
		a.decode(t, &p)
		if p.Status != api.StatusSucceeded || p.FinishedAt == nil {
			t.Fatalf("GET after completion: %+v", p)
		}
		a = s.do(http.MethodGet, path+"/kubeconfig", apiKey, "", nil)
		var kc api.KubeconfigResponse
		a.decode(t, &kc)
		if a.status != http.StatusOK || kc.Kubeconfig != kubeconfig || a.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("GET kubeconfig: %d %+v, Cache-Control %q", a.status, kc, a.header.Get("Cache-Control"))
		}
		// Ended: the next run of the cluster starts.
		if a := post(validBody(func(m map[string]any) { m["nodeCount"] = 5 })); a.status != http.StatusAccepted {
			t.Fatalf("POST after the cluster's run ended: %d %s, want 202", a.status, a.body)
		}
	})

	t.Run("logs carry no secret", func(t *testing.T) {
		logs := s.logs.String()
		for _, secret := range []string{apiKey, accessKey, secretKey, "https://10.0.0.1:6443"} {
			if strings.Contains(logs, secret) {
				t.Errorf("the server's log carries %q", secret)
			}
		}
		if !strings.Contains(logs, `"route":"POST /api/v1/provisions"`) || !strings.Contains(logs, `"status":202`) {
			t.Errorf("the access log lacks the POST: %s", logs)
		}
	})
}

// Serve sweeps at once, then every SweepInterval, serves until its context ends and then stops.
func TestServeSweepsAndStops(t *testing.T) {
	s := start(t)
	a := s.do(http.MethodPost, "/api/v1/provisions", apiKey, "application/json", strings.NewReader(validBody(nil)))
	var p api.Provision
	a.decode(t, &p)
	if _, err := s.jobCtl.Complete(t.Context(), p.ID); err != nil {
		t.Fatal(err)
	}
	// A store whose clock is past the run's retention.
	later := func() time.Time { return time.Now().Add(8 * 24 * time.Hour) }
	runs, err := jobs.New(s.cs, jobs.Config{Namespace: s.ns, Render: render, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{APIKey: apiKey, Runs: runs, Retention: 168 * time.Hour, Log: slog.New(slog.DiscardHandler)})
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
	served := &testServer{t: t, url: "http://" + ln.Addr().String()}
	framework.Eventually(t, 30*time.Second, "the sweep at start to delete the finished run", func() (bool, string) {
		a := served.do(http.MethodGet, "/api/v1/provisions/"+p.ID, apiKey, "", nil)
		return a.status == http.StatusNotFound, fmt.Sprintf("%d %s", a.status, a.body)
	})
	if a := served.do(http.MethodGet, "/health", "", "", nil); a.status != http.StatusOK {
		t.Fatalf("health: %d", a.status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not stop")
	}
	if _, err := server.New(server.Config{Runs: runs}); err == nil {
		t.Error("New accepted an empty API key")
	}
	noRetention, err := server.New(server.Config{APIKey: apiKey, Runs: runs})
	if err != nil {
		t.Fatal(err)
	}
	if err := noRetention.Run(t.Context(), "127.0.0.1:0"); err == nil {
		t.Error("Run without a retention did not refuse")
	}
}
