package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/test/framework"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	c, err := configFromEnv(env(map[string]string{"API_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	want := config{APIKey: "k", ListenAddr: ":8080", JobsNamespace: api.DefaultJobsNamespace, Retention: 168 * time.Hour,
		Deadline: 2 * time.Hour, RunnerImage: jobs.RunnerImage, LogLevel: slog.LevelInfo}
	if c != want {
		t.Errorf("defaults: got %+v, want %+v", c, want)
	}
	c, err = configFromEnv(env(map[string]string{"API_KEY": "k", "KUBECONFIG": "/kc", "LISTEN_ADDR": ":9090", "JOBS_NAMESPACE": "runs",
		"RUN_RETENTION": "24h", "RUN_DEADLINE": "90m", "RUNNER_IMAGE": "mirror.example/runner:v1", "LOG_LEVEL": "debug"}))
	if err != nil {
		t.Fatal(err)
	}
	want = config{APIKey: "k", Kubeconfig: "/kc", ListenAddr: ":9090", JobsNamespace: "runs", Retention: 24 * time.Hour,
		Deadline: 90 * time.Minute, RunnerImage: "mirror.example/runner:v1", LogLevel: slog.LevelDebug}
	if c != want {
		t.Errorf("set: got %+v, want %+v", c, want)
	}
	for name, m := range map[string]map[string]string{
		"no API key":          {},
		"bad namespace":       {"API_KEY": "k", "JOBS_NAMESPACE": "Runs_1"},
		"bad retention":       {"API_KEY": "k", "RUN_RETENTION": "a week"},
		"zero retention":      {"API_KEY": "k", "RUN_RETENTION": "0s"},
		"deadline too short":  {"API_KEY": "k", "RUN_DEADLINE": "1s"},
		"unknown log level":   {"API_KEY": "k", "LOG_LEVEL": "loud"},
		"negative retention":  {"API_KEY": "k", "RUN_RETENTION": "-1h"},
		"deadline not a time": {"API_KEY": "k", "RUN_DEADLINE": "2"},
	} {
		if _, err := configFromEnv(env(m)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err = configFromEnv(env(map[string]string{"API_KEY": "secret-api-key", "RUN_RETENTION": "x"}))
	if err == nil || strings.Contains(err.Error(), "secret-api-key") {
		t.Errorf("error %v carries the API key", err)
	}
}

// The binary's wiring, on a real kube-apiserver through KUBECONFIG: the real renderer fills the
// run's ConfigMap, and the server stops when its context ends.
func TestRunWiring(t *testing.T) {
	c := framework.StartCluster(t, framework.ClusterOptions{})
	kubeconfig := framework.KubeconfigFile(t, c.Config)
	cs := kubernetes.NewForConfigOrDie(c.Config)
	ctx := t.Context()
	ns := api.DefaultJobsNamespace
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cred := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cred"}, StringData: map[string]string{"role_arn": "arn:aws:iam::123456789012:role/p"}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, cred, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := framework.FreeAddr(t)
	cfg, err := configFromEnv(env(map[string]string{"API_KEY": "k", "KUBECONFIG": kubeconfig, "LISTEN_ADDR": addr}))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, cfg, slog.New(slog.DiscardHandler)) }()
	framework.WaitHealthy(t, "http://"+addr+"/health")

	body := `{"clusterID":"prod-1","region":"eu-north-1","topology":"eks","nodeCount":2,"instanceType":"t3.medium",` +
		`"kubernetesVersion":"1.31","terraformEnvironment":"prod-1","credentialSecretRef":{"namespace":"` + ns + `","name":"cred"},` +
		`"workspace":"1bg4baqdjkcw9lz4","workspaceFingerprint":"d37f1981a6be","ownerUID":"6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f"}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/v1/provisions", strings.NewReader(body))
	req.Header.Set("X-Api-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var p api.Provision
	err = json.NewDecoder(resp.Body).Decode(&p)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %s, %+v, %v", resp.Status, p, err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, api.ModuleConfigMapName(p.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["backend.tf"], api.StateBucketName("d37f1981a6be", "prod-1")) || cm.Data["main.tf"] == "" {
		t.Errorf("the rendered module: %v", keys(cm.Data))
	}
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, api.JobName(p.ID), metav1.GetOptions{})
	if err != nil || job.Spec.Template.Spec.Containers[0].Image != jobs.RunnerImage {
		t.Fatalf("Job: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop")
	}
}

func keys(m map[string]string) string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return fmt.Sprint(k)
}
