package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeopera/kubeopera/internal/reconcile"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/devenv/gitserver"
	"github.com/kubeopera/kubeopera/internal/scaffolder"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

const scaffolderKey = "scaffolder-api-key"

// startScaffolder starts a git server with one repository and a Scaffolder writing to it.
func startScaffolder(t *testing.T, configure func(*sim.Scaffolder)) (*sim.Scaffolder, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	gs, err := gitserver.Start(t.TempDir(), &gitserver.BasicAuth{Username: "git", Password: "git-pass"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gs.Close() })
	repo, err := gs.CreateRepo("gitops-iac")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(repo)
	u.User = url.UserPassword("git", "git-pass")
	s := &sim.Scaffolder{APIKey: scaffolderKey, RepoURL: u.String()}
	if configure != nil {
		configure(s)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, u.String()
}

func waitScaffoldJob(t *testing.T, c *scaffolder.Client, id string, done func(scaffolder.Job) bool) scaffolder.Job {
	t.Helper()
	var job scaffolder.Job
	framework.Eventually(t, 30*time.Second, "scaffold job "+id, func() (bool, string) {
		var err error
		job, err = c.Get(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		return done(job), job.Status + " " + job.Message + " " + job.Error
	})
	return job
}

func cloneScaffolded(t *testing.T, repo string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	cmd := exec.Command("git", "clone", "--quiet", repo, dir)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v: %s", err, out)
	}
	return dir
}

func scaffoldRequest(slug string) scaffolder.Request {
	return scaffolder.Request{
		Slug: slug, Domain: slug + ".acme.com", Region: "eu-north-1",
		KubeconfigSecretName: "hostcluster-7e9d-kubeconfig", KubeconfigSecretNamespace: "kcp-d37f1981a6be",
		Workspace: "1bg4baqdjkcw9lz4", OwnerUID: "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f",
	}
}

func TestScaffolderPushesTheTree(t *testing.T) {
	hold := make(chan struct{})
	s, repo := startScaffolder(t, func(s *sim.Scaffolder) { s.Hold = hold })
	c, err := scaffolder.New(s.URL, scaffolderKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	slug, err := scaffolder.SlugFromPath("fluxcd/clusters/my-cluster")
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.Create(context.Background(), scaffoldRequest(slug))
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != scaffolder.StatusQueued || job.ID == "" || !job.BelongsTo("1bg4baqdjkcw9lz4", "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f") {
		t.Errorf("created job = %+v, want queued with an id, of the object that asked", job)
	}
	// Held: the job runs and does not end.
	waitScaffoldJob(t, c, job.ID, func(j scaffolder.Job) bool { return j.Status == scaffolder.StatusRunning })
	time.Sleep(300 * time.Millisecond)
	if j, _ := c.Get(context.Background(), job.ID); j.Done() {
		t.Fatalf("a held job ended: %+v", j)
	}
	close(hold)
	job = waitScaffoldJob(t, c, job.ID, scaffolder.Job.Done)
	if !job.Succeeded() {
		t.Fatalf("job = %+v, want succeeded", job)
	}
	if !job.BelongsTo("1bg4baqdjkcw9lz4", "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f") {
		t.Errorf("polled job = %+v: the owner the request named is not answered", job)
	}
	if s.Posts() != 1 {
		t.Errorf("posts = %d, want 1", s.Posts())
	}

	dir := cloneScaffolded(t, repo)
	tree := filepath.Join(dir, "fluxcd", "clusters", "my-cluster")
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(tree, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var root struct{ Resources []string }
	if err := yaml.Unmarshal(read("kustomization.yaml"), &root); err != nil || len(root.Resources) != 1 || root.Resources[0] != "apps.yaml" {
		t.Errorf("kustomization.yaml resources = %v, %v", root.Resources, err)
	}
	var apps kustomizev1.Kustomization
	if err := yaml.UnmarshalStrict(read("apps.yaml"), &apps); err != nil {
		t.Fatalf("apps.yaml is not a Flux Kustomization: %v", err)
	}
	if apps.APIVersion != "kustomize.toolkit.fluxcd.io/v1" || apps.Kind != "Kustomization" || apps.Name != "apps" || apps.Namespace != "flux-system" ||
		apps.Spec.Path != "./fluxcd/clusters/my-cluster/apps" || !apps.Spec.Prune || !apps.Spec.Wait ||
		apps.Spec.Interval.Duration != time.Minute || apps.Spec.Timeout == nil || apps.Spec.Timeout.Duration != 2*time.Minute ||
		apps.Spec.SourceRef.Kind != "GitRepository" || apps.Spec.SourceRef.Name != "flux-system" {
		t.Errorf("apps Kustomization = %+v", apps)
	}
	var appsKust struct{ Resources []string }
	if err := yaml.Unmarshal(read("apps/kustomization.yaml"), &appsKust); err != nil || len(appsKust.Resources) != 3 {
		t.Fatalf("apps/kustomization.yaml resources = %v, %v", appsKust.Resources, err)
	}
	objs := map[string]map[string]any{}
	for _, r := range appsKust.Resources {
		var obj map[string]any
		if err := yaml.Unmarshal(read(filepath.Join("apps", r)), &obj); err != nil {
			t.Fatalf("apps/%s: %v", r, err)
		}
		objs[obj["kind"].(string)] = obj
	}
	var ns corev1.Namespace
	var cm corev1.ConfigMap
	var svc corev1.Service
	for kind, into := range map[string]any{"Namespace": &ns, "ConfigMap": &cm, "Service": &svc} {
		b, _ := yaml.Marshal(objs[kind])
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	if ns.Name != "kubeopera" {
		t.Errorf("Namespace = %s", ns.Name)
	}
	if cm.Namespace != "kubeopera" || cm.Name != "kubeopera-platform" || cm.Data["domain"] != "my-cluster.acme.com" || cm.Data["region"] != "eu-north-1" {
		t.Errorf("ConfigMap = %+v", cm)
	}
	if svc.Namespace != "kubeopera" || svc.Name != "authapi" || svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Selector["app"] != "authapi" ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("Service = %+v", svc.Spec)
	}

	// Scaffolding the same cluster again succeeds without a new commit.
	again, err := c.Create(context.Background(), scaffoldRequest(slug))
	if err != nil {
		t.Fatal(err)
	}
	if j := waitScaffoldJob(t, c, again.ID, scaffolder.Job.Done); !j.Succeeded() {
		t.Errorf("second job = %+v", j)
	}
	if j, _ := s.Job(again.ID); j.Commit != "" {
		t.Errorf("second job committed %s, want nothing to commit", j.Commit)
	}
}

func TestScaffolderRefusesAndFails(t *testing.T) {
	s, _ := startScaffolder(t, func(s *sim.Scaffolder) {
		s.FailSlugs = map[string]string{"broken": "generate-gitops-env: template ingress-nginx failed"}
	})
	wrong, _ := scaffolder.New(s.URL, "wrong", nil)
	if _, err := wrong.Create(context.Background(), scaffoldRequest("my-cluster")); !errors.Is(err, scaffolder.ErrUnauthorized) || scaffolder.IsTransient(err) {
		t.Errorf("wrong key: err = %v, want a terminal ErrUnauthorized", err)
	}
	if _, err := wrong.Get(context.Background(), "x"); !errors.Is(err, scaffolder.ErrUnauthorized) {
		t.Errorf("wrong key on GET: err = %v", err)
	}

	// The service validates what the client would let through, naming the field.
	for body, field := range map[string]string{
		`{"slug":"a","domain":"","kubeconfigSecretName":"k","kubeconfigSecretNamespace":"n"}`:                                "domain",
		`{"slug":"A_b","domain":"x.y","kubeconfigSecretName":"k","kubeconfigSecretNamespace":"n"}`:                           "slug",
		`{"slug":"a","domain":"x.y","kubeconfigSecretName":"k"}`:                                                             "kubeconfigSecretNamespace",
		`{"slug":"a","domain":"x.y","kubeconfigSecretName":"k","kubeconfigSecretNamespace":"n","workspace":"Not:A_Cluster"}`: "workspace",
		`{"slug":"a","domain":"x.y","kubeconfigSecretName":"k","kubeconfigSecretNamespace":"n","ownerUID":"a b"}`:            "ownerUID",
		`not json`: "JSON",
	} {
		req, _ := http.NewRequest(http.MethodPost, s.URL+sim.ScaffoldsPath, strings.NewReader(body))
		req.Header.Set(sim.ScaffolderKeyHeader, scaffolderKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var msg strings.Builder
		buf := make([]byte, 512)
		n, _ := resp.Body.Read(buf)
		msg.Write(buf[:n])
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg.String(), field) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, resp.StatusCode, msg.String(), field)
		}
	}

	c, _ := scaffolder.New(s.URL, scaffolderKey, nil)
	job, err := c.Create(context.Background(), scaffoldRequest("broken"))
	if err != nil {
		t.Fatal(err)
	}
	job = waitScaffoldJob(t, c, job.ID, scaffolder.Job.Done)
	if !job.Failed() || job.Error != "generate-gitops-env: template ingress-nginx failed" {
		t.Errorf("job = %+v, want failed with the configured error", job)
	}
	if _, err := c.Get(context.Background(), "scaffold-unknown"); !errors.Is(err, scaffolder.ErrJobNotFound) || !reconcile.IsTerminal(err) {
		t.Errorf("unknown job: err = %v", err)
	}
	if s.Posts() != 1 {
		t.Errorf("posts = %d, want 1 (refused requests create no job)", s.Posts())
	}
}

// A client that predates the owner fields still gets its job, which then says nobody's.
func TestScaffolderTakesARequestWithoutAnOwner(t *testing.T) {
	s, _ := startScaffolder(t, nil)
	body := `{"slug":"legacy","domain":"legacy.acme.com","region":"eu-north-1","kubeconfigSecretName":"k","kubeconfigSecretNamespace":"n"}`
	req, _ := http.NewRequest(http.MethodPost, s.URL+sim.ScaffoldsPath, strings.NewReader(body))
	req.Header.Set(sim.ScaffolderKeyHeader, scaffolderKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var job scaffolder.Job
	err = json.NewDecoder(resp.Body).Decode(&job)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted || job.ID == "" || job.Workspace != "" || job.OwnerUID != "" {
		t.Fatalf("POST without owner: %d %+v %v, want 202 with a job of nobody", resp.StatusCode, job, err)
	}
	if job.BelongsTo("1bg4baqdjkcw9lz4", "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f") {
		t.Error("a job without owner belongs to an object")
	}
}

// TestScaffolderReachesTheTarget: with Backend set, a job reads the stored kubeconfig from the
// backend and uses it, so a wrong Secret reference fails the job.
func TestScaffolderReachesTheTarget(t *testing.T) {
	cluster := framework.StartCluster(t, framework.ClusterOptions{})
	s, _ := startScaffolder(t, func(s *sim.Scaffolder) { s.Backend = cluster.Config })
	cs := kubernetes.NewForConfigOrDie(cluster.Config)
	ctx := context.Background()
	kc := filepath.Join(t.TempDir(), "target.kubeconfig")
	if err := devenv.WriteKubeconfig(cluster.Config, kc, "target"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kcp-d37f1981a6be"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("kcp-d37f1981a6be").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hostcluster-7e9d-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": raw},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, _ := scaffolder.New(s.URL, scaffolderKey, nil)
	ok, err := c.Create(ctx, scaffoldRequest("my-cluster"))
	if err != nil {
		t.Fatal(err)
	}
	if j := waitScaffoldJob(t, c, ok.ID, scaffolder.Job.Done); !j.Succeeded() {
		t.Errorf("job = %+v, want succeeded", j)
	}
	r := scaffoldRequest("other")
	r.KubeconfigSecretNamespace = "kcp-000000000000"
	bad, err := c.Create(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if j := waitScaffoldJob(t, c, bad.ID, scaffolder.Job.Done); !j.Failed() || !strings.Contains(j.Error, "kcp-000000000000/hostcluster-7e9d-kubeconfig") {
		t.Errorf("job = %+v, want failed naming the Secret", j)
	}
}
