package sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The gitops-scaffolder API (docs/hostcluster.md#gitops-scaffolder-api).
const (
	ScaffoldsPath         = "/api/v1/scaffolds"
	ScaffolderKeyHeader   = "X-Api-Key"
	DefaultScaffoldPrefix = "fluxcd/clusters"
	// ScaffoldAppsKustomization is the Flux Kustomization the tree declares for the platform's
	// application layer; the HostCluster controller waits for it to be Ready.
	ScaffoldAppsKustomization = "apps"
	// ScaffoldSourceName is the GitRepository the tree's Kustomization reads from: the name
	// `flux bootstrap` gives it, and the one the HostCluster controller creates.
	ScaffoldSourceName = "flux-system"
	// ScaffoldNamespace is the platform's namespace on the target, where authapi runs.
	ScaffoldNamespace = "kubeopera"
)

// Scaffold job statuses.
const (
	ScaffoldQueued    = "queued"
	ScaffoldRunning   = "running"
	ScaffoldSucceeded = "succeeded"
	ScaffoldFailed    = "failed"
)

// maxScaffoldRequest bounds a POST body.
const maxScaffoldRequest = 64 << 10

// ScaffoldRequest is the body of POST /api/v1/scaffolds.
type ScaffoldRequest struct {
	Slug                      string `json:"slug"`
	Domain                    string `json:"domain"`
	Region                    string `json:"region"`
	KubeconfigSecretName      string `json:"kubeconfigSecretName"`
	KubeconfigSecretNamespace string `json:"kubeconfigSecretNamespace"`
	GitCredentialsSecretRef   string `json:"gitCredentialsSecretRef,omitempty"`
	RegistryPullSecretRef     string `json:"registryPullSecretRef,omitempty"`
	// Workspace and OwnerUID say whose job it is (the HostCluster's logical cluster and UID):
	// optional, as the seed's API has neither; recorded and answered with the job.
	Workspace string `json:"workspace,omitempty"`
	OwnerUID  string `json:"ownerUID,omitempty"`
}

// ScaffoldJob is a job as the service reports it, with the request that started it.
type ScaffoldJob struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
	// Workspace and OwnerUID are the request's, answered with every job.
	Workspace string          `json:"workspace,omitempty"`
	OwnerUID  string          `json:"ownerUID,omitempty"`
	Request   ScaffoldRequest `json:"-"`
	// Commit is the commit the job pushed (empty when the tree was already there).
	Commit string `json:"-"`
}

// Scaffolder plays gitops-scaffolder, the service the HostCluster controller delegates the GitOps
// tree to (docs/hostcluster.md#gitops-scaffolder-api): an HTTP server (127.0.0.1 by default) that takes
// POST /api/v1/scaffolds {slug, domain, region, kubeconfigSecretName, kubeconfigSecretNamespace,
// gitCredentialsSecretRef?, registryPullSecretRef?, workspace?, ownerUID?} and GET
// /api/v1/scaffolds/{id}, both behind the shared secret in X-Api-Key (401 without it). workspace
// and ownerUID (whose job it is) are this platform's addition to the seed's API: optional, so a
// client that predates them still works, and recorded and answered with the job (an empty
// workspace and ownerUID when the request had none). A POST is validated (400 naming the field),
// answered 202 {id, status: "queued", workspace, ownerUID}, and the job then runs on its own, as
// the real service runs a Kubernetes Job (scaffold-runner): it clones RepoURL, writes the tree at
// <PathPrefix>/<slug>, commits and pushes with the git CLI, and ends succeeded (or failed, with
// the real error).
//
// The tree is smaller than generate-gitops-env's (no cert-manager, ingress, sealed-secrets:
// nothing that needs a kubelet), but has the same shape the controller relies on:
//
//	<path>/kustomization.yaml      kustomize: resources [apps.yaml]
//	<path>/apps.yaml               Flux Kustomization "apps" in flux-system: interval 1m, prune,
//	                               wait, timeout 2m, path ./<path>/apps, sourceRef GitRepository
//	                               flux-system
//	<path>/apps/kustomization.yaml kustomize: the three objects below
//	<path>/apps/namespace.yaml     Namespace kubeopera
//	<path>/apps/platform.yaml      ConfigMap kubeopera/kubeopera-platform {domain, region}
//	<path>/apps/authapi.yaml       Service kubeopera/authapi: ClusterIP, port 8080 named http,
//	                               targetPort http, selector app=authapi
//
// The real job also uses the stored kubeconfig to reach the target (it waits for the target's
// sealed-secrets controller); with Backend set, this one reads that Secret
// (kubeconfigSecretNamespace/kubeconfigSecretName, key "kubeconfig") from the backend and asks
// the target for its version, so a wrong reference fails the job as it would fail the real one.
// It does not read gitCredentialsSecretRef: it pushes with the credentials in RepoURL, the
// service's own configuration.
//
// Set the fields before Start; they are not changed afterwards.
type Scaffolder struct {
	// APIKey is the service's API_KEY (GITOPS_SCAFFOLDER_API_KEY on the controller's side).
	APIKey string
	// RepoURL is the git repository the service writes, with credentials in its user info when
	// the server needs them.
	RepoURL string
	// Branch is the branch it pushes; default main.
	Branch string
	// PathPrefix is where cluster trees live; default fluxcd/clusters.
	PathPrefix string
	// Backend, when set, is the cluster holding the stored kubeconfig Secrets.
	Backend *rest.Config
	// FailSlugs makes the job of a slug end failed with that error text (after Hold).
	FailSlugs map[string]string
	// Hold, when set, keeps every job running until it is closed (or receives).
	Hold <-chan struct{}
	// HoldSlugs keeps the jobs of these slugs running until the scaffolder stops (then they end
	// failed), as a real job that waits long for the target's sealed-secrets controller does.
	HoldSlugs map[string]bool
	// Addr is the address to listen on; default 127.0.0.1:0 (a free port).
	Addr string

	// URL is the service's base URL, set by Start.
	URL string

	mu     sync.Mutex
	jobs   map[string]*ScaffoldJob
	posts  int
	srv    *http.Server
	done   chan error
	wg     sync.WaitGroup
	stop   chan struct{}
	closed bool
	gitMu  sync.Mutex // one push at a time: jobs of one repository would race otherwise
}

// Start serves the API on Addr (default 127.0.0.1 on a free port) and sets URL.
func (s *Scaffolder) Start() error {
	if s.APIKey == "" {
		return errors.New("the scaffolder needs an API key")
	}
	if s.RepoURL == "" {
		return errors.New("the scaffolder needs a repository URL")
	}
	if _, err := exec.LookPath("git"); err != nil {
		return fmt.Errorf("the scaffolder needs the git CLI: %w", err)
	}
	if s.Branch == "" {
		s.Branch = "main"
	}
	if s.PathPrefix == "" {
		s.PathPrefix = DefaultScaffoldPrefix
	}
	s.PathPrefix = strings.Trim(s.PathPrefix, "/")
	if s.srv != nil {
		return errors.New("the scaffolder is already started")
	}
	addr := s.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.jobs = map[string]*ScaffoldJob{}
	s.stop = make(chan struct{})
	s.done = make(chan error, 1)
	s.URL = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ScaffoldsPath, s.create)
	mux.HandleFunc("GET "+ScaffoldsPath+"/{id}", s.get)
	s.srv = &http.Server{Handler: s.authenticated(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return nil
}

// Close stops the server and waits for running jobs; held jobs end failed.
func (s *Scaffolder) Close() error {
	if s.srv == nil || s.closed {
		return nil
	}
	s.closed = true
	close(s.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; err == nil && serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = serveErr
	}
	s.wg.Wait()
	return err
}

// Posts is how many jobs POST /api/v1/scaffolds created.
func (s *Scaffolder) Posts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts
}

// Job returns a copy of job id.
func (s *Scaffolder) Job(id string) (ScaffoldJob, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return ScaffoldJob{}, false
	}
	return *j, true
}

// Jobs returns copies of every job.
func (s *Scaffolder) Jobs() []ScaffoldJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ScaffoldJob, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, *j)
	}
	return out
}

// TreePath is where the tree of slug is written: <PathPrefix>/<slug>.
func (s *Scaffolder) TreePath(slug string) string {
	prefix := strings.Trim(s.PathPrefix, "/")
	if prefix == "" {
		prefix = DefaultScaffoldPrefix
	}
	return path.Join(prefix, slug)
}

func (s *Scaffolder) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(ScaffolderKeyHeader)), []byte(s.APIKey)) != 1 {
			respondJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid or missing API key"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Scaffolder) create(w http.ResponseWriter, r *http.Request) {
	var req ScaffoldRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxScaffoldRequest)).Decode(&req); err != nil {
		respondJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid JSON body: " + err.Error()})
		return
	}
	if msg := validateScaffold(req); msg != "" {
		respondJSON(w, http.StatusBadRequest, map[string]string{"error": msg})
		return
	}
	id, err := randomHexID(8)
	if err != nil {
		respondJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	job := &ScaffoldJob{ID: "scaffold-" + id, Status: ScaffoldQueued, Message: "queued", Workspace: req.Workspace, OwnerUID: req.OwnerUID, Request: req}
	s.mu.Lock()
	s.jobs[job.ID] = job
	s.posts++
	answer := *job
	s.mu.Unlock()
	s.wg.Add(1)
	go s.run(job.ID, req)
	respondJSON(w, http.StatusAccepted, answer)
}

func (s *Scaffolder) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	job, ok := s.Job(id)
	if !ok {
		respondJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("scaffold job %s not found", id)})
		return
	}
	respondJSON(w, http.StatusOK, job)
}

// validateScaffold names the first invalid field, or returns "".
func validateScaffold(r ScaffoldRequest) string {
	switch {
	case r.Slug == "":
		return "slug is required"
	case len(validation.IsDNS1123Label(r.Slug)) > 0:
		return "slug must be a DNS label: " + strings.Join(validation.IsDNS1123Label(r.Slug), "; ")
	case r.Domain == "":
		return "domain is required"
	case len(validation.IsDNS1123Subdomain(r.Domain)) > 0:
		return "domain must be a DNS name: " + strings.Join(validation.IsDNS1123Subdomain(r.Domain), "; ")
	case r.KubeconfigSecretName == "":
		return "kubeconfigSecretName is required"
	case r.KubeconfigSecretNamespace == "":
		return "kubeconfigSecretNamespace is required"
	case r.Workspace != "" && len(validation.IsDNS1123Label(r.Workspace)) > 0:
		return "workspace must be a kcp logical cluster name: " + strings.Join(validation.IsDNS1123Label(r.Workspace), "; ")
	case r.OwnerUID != "" && len(validation.IsValidLabelValue(r.OwnerUID)) > 0:
		return "ownerUID must be an object UID: " + strings.Join(validation.IsValidLabelValue(r.OwnerUID), "; ")
	}
	return ""
}

func (s *Scaffolder) update(id string, fn func(*ScaffoldJob)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.jobs[id])
}

// run is the job: running, held while Hold says so, then the tree pushed or the error kept.
func (s *Scaffolder) run(id string, req ScaffoldRequest) {
	defer s.wg.Done()
	s.update(id, func(j *ScaffoldJob) { j.Status, j.Message = ScaffoldRunning, "generating the GitOps tree" })
	hold := s.Hold
	if s.HoldSlugs[req.Slug] {
		hold = make(chan struct{}) // never closed: held until the scaffolder stops
	}
	if hold != nil {
		select {
		case <-hold:
		case <-s.stop:
			s.update(id, func(j *ScaffoldJob) { j.Status, j.Message, j.Error = ScaffoldFailed, "", "the scaffolder stopped" })
			return
		}
	}
	commit, err := s.scaffold(req)
	s.update(id, func(j *ScaffoldJob) {
		if err != nil {
			j.Status, j.Message, j.Error = ScaffoldFailed, "", err.Error()
			return
		}
		j.Status, j.Commit, j.Message = ScaffoldSucceeded, commit, "pushed "+s.TreePath(req.Slug)
		if commit != "" {
			j.Message += " at " + commit
		}
	})
}

func (s *Scaffolder) scaffold(req ScaffoldRequest) (string, error) {
	if msg, ok := s.FailSlugs[req.Slug]; ok {
		return "", errors.New(msg)
	}
	if s.Backend != nil {
		if err := s.reachTarget(req); err != nil {
			return "", err
		}
	}
	s.gitMu.Lock()
	defer s.gitMu.Unlock()
	dir, err := os.MkdirTemp("", "scaffold-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if _, err := s.git(dir, "clone", "--quiet", "--branch", s.Branch, s.RepoURL, "repo"); err != nil {
		return "", err
	}
	repo := filepath.Join(dir, "repo")
	treePath := s.TreePath(req.Slug)
	for name, content := range scaffoldTree(treePath, req) {
		file := filepath.Join(repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := s.git(repo, "add", "--all", "--", treePath); err != nil {
		return "", err
	}
	changed, err := s.git(repo, "status", "--porcelain", "--", treePath)
	if err != nil {
		return "", err
	}
	if changed == "" {
		return "", nil
	}
	if _, err := s.git(repo, "commit", "--quiet", "-m", "Scaffold "+treePath); err != nil {
		return "", err
	}
	if _, err := s.git(repo, "push", "--quiet", "origin", s.Branch); err != nil {
		return "", err
	}
	return s.git(repo, "rev-parse", "HEAD")
}

// reachTarget reads the stored kubeconfig from the backend and asks the target its version.
func (s *Scaffolder) reachTarget(req ScaffoldRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(s.Backend)
	if err != nil {
		return err
	}
	sec, err := cs.CoreV1().Secrets(req.KubeconfigSecretNamespace).Get(ctx, req.KubeconfigSecretName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read the kubeconfig Secret %s/%s: %w", req.KubeconfigSecretNamespace, req.KubeconfigSecretName, err)
	}
	raw := sec.Data["kubeconfig"]
	if len(raw) == 0 {
		return fmt.Errorf("the kubeconfig Secret %s/%s has no key kubeconfig", req.KubeconfigSecretNamespace, req.KubeconfigSecretName)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return fmt.Errorf("the kubeconfig in Secret %s/%s is invalid: %w", req.KubeconfigSecretNamespace, req.KubeconfigSecretName, err)
	}
	cfg.Timeout = 20 * time.Second
	target, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := target.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("failed to reach the target with the kubeconfig in Secret %s/%s: %w", req.KubeconfigSecretNamespace, req.KubeconfigSecretName, err)
	}
	return nil
}

// git runs the git CLI in dir with this machine's configuration ignored, never prompting, and
// returns its trimmed output; errors carry git's message with RepoURL's password removed.
func (s *Scaffolder) git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=gitops-scaffolder", "GIT_AUTHOR_EMAIL=gitops-scaffolder@kubeopera.invalid",
		"GIT_COMMITTER_NAME=gitops-scaffolder", "GIT_COMMITTER_EMAIL=gitops-scaffolder@kubeopera.invalid",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if u, perr := url.Parse(s.RepoURL); perr == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				msg = strings.ReplaceAll(msg, p, "[redacted]")
			}
		}
		return "", fmt.Errorf("git %s failed: %v: %s", args[0], err, msg)
	}
	return strings.TrimSpace(string(out)), nil
}

// scaffoldTree is the tree of one cluster, file name (relative to the repository) -> content.
func scaffoldTree(treePath string, req ScaffoldRequest) map[string]string {
	return map[string]string{
		treePath + "/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - apps.yaml
`,
		treePath + "/apps.yaml": fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: %s
  namespace: flux-system
spec:
  interval: 1m
  path: ./%s/apps
  prune: true
  wait: true
  timeout: 2m
  sourceRef:
    kind: GitRepository
    name: %s
`, ScaffoldAppsKustomization, treePath, ScaffoldSourceName),
		treePath + "/apps/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - namespace.yaml
  - platform.yaml
  - authapi.yaml
`,
		treePath + "/apps/namespace.yaml": fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
`, ScaffoldNamespace),
		treePath + "/apps/platform.yaml": fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: kubeopera-platform
  namespace: %s
data:
  domain: %q
  region: %q
`, ScaffoldNamespace, req.Domain, req.Region),
		treePath + "/apps/authapi.yaml": fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: authapi
  namespace: %s
  labels:
    app: authapi
spec:
  type: ClusterIP
  selector:
    app: authapi
  ports:
    - name: http
      port: 8080
      targetPort: http
      protocol: TCP
`, ScaffoldNamespace),
	}
}

func respondJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func randomHexID(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
