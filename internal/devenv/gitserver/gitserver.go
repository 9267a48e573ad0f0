// Package gitserver is a real git server for tests and the local environment: git's own
// `git http-backend` (the smart HTTP protocol, git-http-backend(1)) run through Go's net/http/cgi
// over bare repositories in one directory. Clients (the git CLI, Flux's source-controller through
// go-git) clone, fetch and push exactly as against any git hosting; with BasicAuth set every
// request must carry those credentials, so a wrong or missing git credentials Secret really
// fails. It has no testing dependency: bin/devenv uses it as well as the tests.
package gitserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// DefaultBranch is the branch CreateRepo creates and points HEAD at.
const DefaultBranch = "main"

// maxChunkedBody bounds a chunked request body (git sends pushes larger than http.postBuffer,
// 1 MiB by default, chunked), which is read whole because CGI needs a CONTENT_LENGTH.
const maxChunkedBody = 256 << 20

// BasicAuth is the one account the server accepts.
type BasicAuth struct {
	Username string
	Password string
}

// Server serves the bare repositories <Dir>/<name>.git at <URL>/<name>.git.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:<port> by default.
	URL string
	// Dir holds the bare repositories.
	Dir string

	auth    *BasicAuth
	git     string
	backend string
	srv     *http.Server
	done    chan error
}

// Start serves the repositories in dir on 127.0.0.1 on a free port.
func Start(dir string, auth *BasicAuth) (*Server, error) {
	return StartOn("127.0.0.1:0", dir, auth)
}

// StartOn serves the repositories in dir on addr (host:port; port 0 picks a free one), e.g. a
// fixed port for the local environment, or an address other machines' processes can reach.
func StartOn(addr, dir string, auth *BasicAuth) (*Server, error) {
	if auth != nil && (auth.Username == "" || auth.Password == "") {
		return nil, errors.New("basic auth needs a username and a password")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("the git server needs the git CLI: %w", err)
	}
	out, err := exec.Command(git, "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("failed to find git's exec path: %w", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("git-http-backend is not installed: %w", err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the git server cannot listen on %s: %w", addr, err)
	}
	s := &Server{
		URL:     "http://" + ln.Addr().String(),
		Dir:     dir,
		auth:    auth,
		git:     git,
		backend: backend,
		done:    make(chan error, 1),
	}
	s.srv = &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// handler checks the credentials and hands the request to git http-backend.
func (s *Server) handler() http.Handler {
	cgiHandler := &cgi.Handler{
		Path: s.backend,
		Root: "/",
		Dir:  s.Dir,
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.Dir,
			// Serve every repository under the root without a git-daemon-export-ok file.
			"GIT_HTTP_EXPORT_ALL=1",
			// Only the repositories' own configuration counts, not this machine's.
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + s.Dir,
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := ""
		if s.auth != nil {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.auth.Username)) != 1 ||
				subtle.ConstantTimeCompare([]byte(p), []byte(s.auth.Password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
			user = u
		}
		// net/http/cgi refuses chunked request bodies (CGI needs CONTENT_LENGTH): read them here.
		if r.ContentLength < 0 || len(r.TransferEncoding) > 0 {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxChunkedBody+1))
			if err != nil {
				http.Error(w, "failed to read the request body", http.StatusBadRequest)
				return
			}
			if len(body) > maxChunkedBody {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.TransferEncoding = nil
		}
		h := cgiHandler
		if user != "" {
			c := *cgiHandler
			c.Env = append(append([]string(nil), cgiHandler.Env...), "REMOTE_USER="+user)
			h = &c
		}
		h.ServeHTTP(w, r)
	})
}

var repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// CreateRepo creates the bare repository <name>.git with one empty commit on branch main (so
// clones check out a branch and Flux's GitRepository finds its ref), pushes enabled, and
// returns its clone URL, without credentials. A repository that already exists is kept as it is.
func (s *Server) CreateRepo(name string) (cloneURL string, err error) {
	if !repoName.MatchString(name) || strings.HasSuffix(name, ".git") {
		return "", fmt.Errorf("invalid repository name %q: use letters, digits, '.', '_' and '-', without .git", name)
	}
	path := filepath.Join(s.Dir, name+".git")
	cloneURL = s.URL + "/" + name + ".git"
	if _, err := os.Stat(filepath.Join(path, "HEAD")); err == nil {
		return cloneURL, s.gitIn(path, nil, "config", "http.receivepack", "true")
	}
	if err := s.gitIn(s.Dir, nil, "init", "--quiet", "--bare", "--initial-branch="+DefaultBranch, path); err != nil {
		return "", err
	}
	// git http-backend serves receive-pack only to authenticated users unless the repository
	// enables it explicitly (git-http-backend(1), "http.receivepack").
	if err := s.gitIn(path, nil, "config", "http.receivepack", "true"); err != nil {
		return "", err
	}
	emptyTree, err := s.output(path, nil, nil, "hash-object", "-t", "tree", "-w", "--stdin")
	if err != nil {
		return "", err
	}
	author := []string{
		"GIT_AUTHOR_NAME=gitserver", "GIT_AUTHOR_EMAIL=gitserver@kubeopera.invalid",
		"GIT_COMMITTER_NAME=gitserver", "GIT_COMMITTER_EMAIL=gitserver@kubeopera.invalid",
	}
	commit, err := s.output(path, author, nil, "commit-tree", emptyTree, "-m", "Initial commit")
	if err != nil {
		return "", err
	}
	if err := s.gitIn(path, nil, "update-ref", "refs/heads/"+DefaultBranch, commit); err != nil {
		return "", err
	}
	return cloneURL, nil
}

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

func (s *Server) gitIn(dir string, env []string, args ...string) error {
	_, err := s.output(dir, env, nil, args...)
	return err
}

// output runs git in dir with the machine's configuration ignored and returns its trimmed stdout.
func (s *Server) output(dir string, env []string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command(s.git, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	cmd.Env = append(cmd.Env, env...)
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s failed: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
