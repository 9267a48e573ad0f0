package gitserver

import (
	"crypto/rand"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// git runs the git CLI in dir as a user with no configuration of their own would, never prompting.
func git(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com",
	)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

func withUser(t *testing.T, cloneURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(cloneURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

func start(t *testing.T, auth *BasicAuth) *Server {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	s, err := Start(t.TempDir(), auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestCloneCommitPushCloneWithCredentials(t *testing.T) {
	s := start(t, &BasicAuth{Username: "flux", Password: "p4ss"})
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %s, want http://127.0.0.1:<port>", s.URL)
	}
	cloneURL, err := s.CreateRepo("gitops-iac")
	if err != nil {
		t.Fatal(err)
	}
	if cloneURL != s.URL+"/gitops-iac.git" {
		t.Errorf("clone URL = %s", cloneURL)
	}
	authed := withUser(t, cloneURL, "flux", "p4ss")

	work := t.TempDir()
	mustGit(t, work, "clone", "--quiet", authed, "one")
	one := filepath.Join(work, "one")
	if branch := mustGit(t, one, "rev-parse", "--abbrev-ref", "HEAD"); branch != DefaultBranch {
		t.Errorf("cloned branch = %s, want %s", branch, DefaultBranch)
	}
	if n := mustGit(t, one, "rev-list", "--count", "HEAD"); n != "1" {
		t.Errorf("commits = %s, want the initial one", n)
	}
	if err := os.MkdirAll(filepath.Join(one, "fluxcd", "clusters", "my-cluster"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(one, "fluxcd", "clusters", "my-cluster", "kustomization.yaml"), []byte("resources: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// More than git's http.postBuffer (1 MiB): git sends the pack chunked.
	big := make([]byte, 3<<20)
	_, _ = rand.Read(big)
	if err := os.WriteFile(filepath.Join(one, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, one, "add", "-A")
	mustGit(t, one, "commit", "--quiet", "-m", "Add my-cluster")
	mustGit(t, one, "push", "--quiet", "origin", DefaultBranch)

	mustGit(t, work, "clone", "--quiet", authed, "two")
	got, err := os.ReadFile(filepath.Join(work, "two", "fluxcd", "clusters", "my-cluster", "kustomization.yaml"))
	if err != nil || string(got) != "resources: []\n" {
		t.Errorf("pushed file = %q, %v", got, err)
	}
	if st, err := os.Stat(filepath.Join(work, "two", "big.bin")); err != nil || st.Size() != int64(len(big)) {
		t.Errorf("pushed big file: %v", err)
	}

	for name, u := range map[string]string{
		"no credentials": cloneURL,
		"wrong password": withUser(t, cloneURL, "flux", "wrong"),
		"wrong user":     withUser(t, cloneURL, "other", "p4ss"),
	} {
		out, err := git(t, work, "clone", "--quiet", u, "denied-"+strings.ReplaceAll(name, " ", "-"))
		if err == nil {
			t.Errorf("%s: clone succeeded", name)
		} else if !strings.Contains(out, "Authentication failed") && !strings.Contains(out, "could not read Username") {
			t.Errorf("%s: unexpected failure: %s", name, out)
		}
	}
	// A push with the wrong credentials is refused too.
	mustGit(t, one, "commit", "--quiet", "--allow-empty", "-m", "Denied")
	if out, err := git(t, one, "push", "--quiet", withUser(t, cloneURL, "flux", "wrong"), DefaultBranch); err == nil {
		t.Errorf("push with a wrong password succeeded: %s", out)
	}
}

func TestWithoutAuthAndCreateRepoIsIdempotent(t *testing.T) {
	s := start(t, nil)
	cloneURL, err := s.CreateRepo("repo")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	mustGit(t, work, "clone", "--quiet", cloneURL, "a")
	mustGit(t, filepath.Join(work, "a"), "commit", "--quiet", "--allow-empty", "-m", "second")
	mustGit(t, filepath.Join(work, "a"), "push", "--quiet", "origin", DefaultBranch)

	again, err := s.CreateRepo("repo")
	if err != nil || again != cloneURL {
		t.Fatalf("CreateRepo again = %s, %v", again, err)
	}
	mustGit(t, work, "clone", "--quiet", cloneURL, "b")
	if n := mustGit(t, filepath.Join(work, "b"), "rev-list", "--count", "HEAD"); n != "2" {
		t.Errorf("commits after CreateRepo again = %s, want 2 (the repository kept)", n)
	}
	if out, err := git(t, work, "ls-remote", s.URL+"/missing.git"); err == nil {
		t.Errorf("ls-remote of a missing repository succeeded: %s", out)
	}
	for _, bad := range []string{"", "../x", "a/b", "x.git", ".hidden"} {
		if _, err := s.CreateRepo(bad); err == nil {
			t.Errorf("CreateRepo(%q) accepted", bad)
		}
	}
}

func TestStartOn(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs the git CLI")
	}
	if _, err := StartOn("127.0.0.1:0", t.TempDir(), &BasicAuth{Username: "u"}); err == nil {
		t.Error("basic auth without a password accepted")
	}
	s, err := StartOn("localhost:0", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.CreateRepo("r"); err != nil {
		t.Fatal(err)
	}
	if out, err := git(t, t.TempDir(), "ls-remote", s.URL+"/r.git"); err != nil || !strings.Contains(out, "refs/heads/main") {
		t.Errorf("ls-remote = %s, %v", out, err)
	}
}
