package main

import (
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/jobservice"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/client"
	"github.com/kubeopera/kubeopera/internal/scaffolder/jobs"
	"github.com/kubeopera/kubeopera/test/framework"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	c, err := configFromEnv(env(map[string]string{"API_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	want := config{Settings: jobservice.Settings{APIKey: "k", ListenAddr: ":8080", JobsNamespace: api.DefaultJobsNamespace,
		Retention: 168 * time.Hour, Deadline: jobs.DefaultActiveDeadline, RunnerImage: jobs.RunnerImage, LogLevel: slog.LevelInfo}}
	if c != want {
		t.Errorf("defaults: got %+v, want %+v", c, want)
	}
	set := map[string]string{"API_KEY": "k", "KUBECONFIG": "/kc", "LISTEN_ADDR": ":9090", "JOBS_NAMESPACE": "runs",
		"RUN_RETENTION": "24h", "RUN_DEADLINE": "45m", "RUNNER_IMAGE": "mirror.example/scaffold-runner:v1", "LOG_LEVEL": "debug",
		"TEMPLATES_CONFIGMAP": "admin-templates", "CHART_MIRROR": "https://charts.mirror.example", "ALLOW_NETWORKS": "10.0.0.0/8, 192.168.1.0/24",
		"SEALED_SECRETS_TIMEOUT": "5m"}
	c, err = configFromEnv(env(set))
	if err != nil {
		t.Fatal(err)
	}
	want = config{Settings: jobservice.Settings{APIKey: "k", Kubeconfig: "/kc", ListenAddr: ":9090", JobsNamespace: "runs",
		Retention: 24 * time.Hour, Deadline: 45 * time.Minute, RunnerImage: "mirror.example/scaffold-runner:v1", LogLevel: slog.LevelDebug},
		TemplatesConfigMap: "admin-templates", ChartMirror: "https://charts.mirror.example", AllowNetworks: "10.0.0.0/8, 192.168.1.0/24",
		SealedSecretsTimeout: 5 * time.Minute}
	if c != want {
		t.Errorf("set: got %+v, want %+v", c, want)
	}
	for name, m := range map[string]map[string]string{
		"no API key":               {},
		"bad namespace":            {"JOBS_NAMESPACE": "Runs_1"},
		"zero retention":           {"RUN_RETENTION": "0s"},
		"deadline too short":       {"RUN_DEADLINE": "1s"},
		"unknown log level":        {"LOG_LEVEL": "loud"},
		"templates not a name":     {"TEMPLATES_CONFIGMAP": "Admin Templates"},
		"chart mirror not a URL":   {"CHART_MIRROR": "charts.mirror.example"},
		"chart mirror with a user": {"CHART_MIRROR": "https://user:pw@charts.mirror.example"},
		"allow networks not CIDRs": {"ALLOW_NETWORKS": "10.0.0.0/8,git.example.com"},
		"sealed-secrets timeout":   {"SEALED_SECRETS_TIMEOUT": "soon"},
	} {
		if name != "no API key" {
			m["API_KEY"] = "k"
		}
		if _, err := configFromEnv(env(m)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err = configFromEnv(env(map[string]string{"API_KEY": "secret-api-key", "RUN_RETENTION": "x"}))
	if err == nil || strings.Contains(err.Error(), "secret-api-key") {
		t.Errorf("error %v carries the API key", err)
	}
}

// The built binary, on a real kube-apiserver through KUBECONFIG, as devenv and e2e start it: it
// serves /health and the API, starts a scaffold's Job with the configured environment, and stops
// cleanly on SIGTERM.
func TestBinary(t *testing.T) {
	c := framework.StartCluster(t, framework.ClusterOptions{})
	bin := framework.MustCommand(t, "gitops-scaffolder")
	kubeconfig := framework.KubeconfigFile(t, c.Config)
	cs := kubernetes.NewForConfigOrDie(c.Config)
	ctx := t.Context()
	ns := api.DefaultJobsNamespace
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostcluster-prod-1-kubeconfig"}, StringData: map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\n"}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, kc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := framework.FreeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "API_KEY=k", "KUBECONFIG="+kubeconfig, "LISTEN_ADDR="+addr,
		"TEMPLATES_CONFIGMAP=admin-templates", "SEALED_SECRETS_TIMEOUT=2m", "LOG_LEVEL=debug")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	proc, err := devenv.StartTied(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = proc.Wait() })
	framework.WaitHealthy(t, "http://"+addr+"/health")

	cl, err := client.New("http://"+addr, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Create(ctx, api.Request{
		ClusterID: "prod-1", Slug: "prod-1", Domain: "prod-1.example.com", RepoURL: "https://git.example.com/acme/fleet.git",
		Path: "clusters/prod-1", KubeconfigSecretRef: api.SecretRef{Namespace: ns, Name: kc.Name},
		Workspace: "1bg4baqdjkcw9lz4", OwnerUID: "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f",
	})
	if err != nil {
		t.Fatalf("Create: %v\n%s", err, logs.String())
	}
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, api.JobName(s.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		got[e.Name] = e.Value
	}
	want := map[string]string{api.EnvTemplatesDir: jobs.TemplatesMountPath, api.EnvSealedSecretsTimeout: "2m0s"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("the Job's %s = %q, want %q (env %v)", k, got[k], v, got)
		}
	}
	if job.Spec.Template.Spec.Containers[0].Image != jobs.RunnerImage {
		t.Errorf("image %s", job.Spec.Template.Spec.Containers[0].Image)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.Done():
		if err := proc.Wait(); err != nil {
			t.Errorf("the binary stopped with %v\n%s", err, logs.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the binary did not stop on SIGTERM")
	}
	if strings.Contains(logs.String(), "apiVersion: v1") {
		t.Errorf("the log carries the kubeconfig:\n%s", logs.String())
	}
}
