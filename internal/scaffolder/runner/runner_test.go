package runner

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ssv1alpha1 "github.com/bitnami-labs/sealed-secrets/pkg/apis/sealedsecrets/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/kubeopera/kubeopera/internal/devenv/gitserver"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/tree"
	"github.com/kubeopera/kubeopera/test/framework"
)

// What seal writes is a SealedSecret that only the holder of the private key opens, into
// exactly the Secret it was made of (strict scope: name and namespace are part of the label).
func TestSealRoundTrip(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	c := Credential{Namespace: "kubeopera", Name: "postgres-credentials", Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"POSTGRES_PASSWORD": []byte("s3cret")}}
	raw, err := seal(&key.PublicKey, c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "s3cret") {
		t.Fatal("the sealed secret holds the value in clear")
	}
	ss := &ssv1alpha1.SealedSecret{}
	if err := yaml.Unmarshal(raw, ss); err != nil {
		t.Fatal(err)
	}
	if ss.Kind != "SealedSecret" || ss.APIVersion != "bitnami.com/v1alpha1" || ss.Namespace != "kubeopera" {
		t.Errorf("sealed secret = %s", raw)
	}
	keys := map[string]*rsa.PrivateKey{"k": key}
	s, err := ss.Unseal(scheme.Codecs, keys)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["POSTGRES_PASSWORD"]) != "s3cret" || s.Name != "postgres-credentials" {
		t.Errorf("unsealed = %+v", s)
	}
	// Strict scope: renamed, it does not open.
	ss.Name, ss.Spec.Template.Name = "other", "other"
	if _, err := ss.Unseal(scheme.Codecs, keys); err == nil {
		t.Error("a renamed sealed secret opened")
	}
}

// recorder keeps what the runner reports.
type recorder struct {
	mu    sync.Mutex
	steps []string
	last  string
}

func (r *recorder) Report(_ context.Context, step, message string, _ []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.steps) == 0 || r.steps[len(r.steps)-1] != step {
		r.steps = append(r.steps, step)
	}
	r.last = message
	return nil
}

// lsTree lists the files of the branch's head in the bare repository.
func lsTree(t *testing.T, bare string) []string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", bare, "ls-tree", "-r", "--name-only", "main").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

func commits(t *testing.T, bare string) int {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", bare, "rev-list", "--count", "main").Output()
	if err != nil {
		t.Fatal(err)
	}
	n := strings.TrimSpace(string(out))
	var c int
	for _, r := range n {
		c = c*10 + int(r-'0')
	}
	return c
}

// Against a real git server and a real API server without a sealed-secrets controller, the
// first pass is pushed and the run then gives up waiting, saying what it waited for; run again,
// it pushes nothing new.
func TestFirstPassThenNoController(t *testing.T) {
	target := framework.StartCluster(t, framework.ClusterOptions{})
	cs, err := kubernetes.NewForConfig(target.Config)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	auth := &gitserver.BasicAuth{Username: "scaffolder", Password: "pa55word"}
	gs, err := gitserver.Start(filepath.Join(dir, "git"), auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gs.Close() })
	url, err := gs.CreateRepo("fleet")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tree.Load("")
	if err != nil {
		t.Fatal(err)
	}
	run := func(auth GitAuth) (*recorder, error) {
		rec := &recorder{}
		r := &Runner{
			Params:  tree.Params{Path: "fluxcd/clusters/my-cluster", Slug: "my-cluster", Domain: "my-cluster.acme.com", Region: "eu-north-1", ClusterID: "7e9d"},
			RepoURL: url, Branch: "main", Auth: auth, Templates: tpl, Target: cs,
			WorkDir: dir, SealedSecretsTimeout: 2 * time.Second, PollInterval: 100 * time.Millisecond,
			Status: rec, Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		}
		return rec, r.Run(context.Background())
	}

	rec, err := run(GitAuth{Username: "scaffolder", Password: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong credentials: err = %v", err)
	}
	if rec.steps[len(rec.steps)-1] != api.StepFailed {
		t.Errorf("steps = %v", rec.steps)
	}

	good := GitAuth{Username: auth.Username, Password: auth.Password}
	rec, err = run(good)
	if err == nil || !strings.Contains(err.Error(), "sealed-secrets-controller") || !strings.Contains(err.Error(), "does not exist yet") {
		t.Fatalf("err = %v", err)
	}
	want := []string{api.StepCloning, api.StepInfrastructure, api.StepSealedSecrets, api.StepFailed}
	if strings.Join(rec.steps, ",") != strings.Join(want, ",") {
		t.Errorf("steps = %v, want %v", rec.steps, want)
	}
	bare := filepath.Join(gs.Dir, "fleet.git")
	files := lsTree(t, bare)
	if !contains(files, "fluxcd/clusters/my-cluster/infrastructure/sealed-secrets.yaml") || contains(files, "fluxcd/clusters/my-cluster/apps.yaml") {
		t.Errorf("files after the first pass = %v", files)
	}
	if n := commits(t, bare); n != 2 {
		t.Errorf("%d commits, want the initial one and the first pass", n)
	}

	if _, err := run(good); err == nil {
		t.Fatal("the second run found a controller")
	}
	if n := commits(t, bare); n != 2 {
		t.Errorf("%d commits after running again, want 2: nothing changed", n)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
