// Package api is gitops-scaffolder's HTTP contract (docs/scaffolder.md#http-api), shared by the
// service (cmd/gitops-scaffolder), its client (the HostCluster controller, internal/scaffolder/
// client) and the scaffold runner's Job (cmd/scaffold-runner: the names, environment and keys the
// Job and its Secrets carry). Every route below /api/v1 takes the shared key in header X-Api-Key.
// JSON in and out.
//
//	POST /api/v1/scaffolds        Request -> 202 Scaffold (never blocks)
//	GET  /api/v1/scaffolds/{id}   -> 200 Scaffold (sync-on-read from the Job)
//	GET  /health                  -> 200 (no key)
//
// Errors are ErrorResponse with 400 (naming the field), 401 (no detail), 404 (unknown id), 413
// (a body over 64 KiB), 415 (not application/json), 500 (no detail; the service logs the cause).
package api

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Routes and the key's header.
const (
	ScaffoldsPath = "/api/v1/scaffolds"
	APIKeyHeader  = "X-Api-Key"
)

// Status of a scaffold.
type Status string

// A scaffold's statuses (the seed's): queued (its Job has no running pod yet), running (the
// runner reports its step in the message), succeeded, failed (the runner's real error).
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
)

// Done reports whether the scaffold has ended.
func (s Status) Done() bool { return s == StatusSucceeded || s == StatusFailed }

// SecretRef names a Secret on the scaffolder's cluster (the backend).
type SecretRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (r SecretRef) String() string { return r.Namespace + "/" + r.Name }

// Request starts a scaffold. Slug, Domain and Region are the seed's. The seed names the stored
// kubeconfig by Secret name only; on kcp every workspace has its own backend namespace
// kcp-<fingerprint>, so every Secret a request names is a SecretRef with its namespace, and all
// of them must be in one namespace (a request cannot mix two workspaces' Secrets). The
// repository, path and branch are the HostCluster's (spec.gitOpsRepoURL, spec.gitOpsPath, the
// manager's branch): each tenant has their own repository, where the seed's service had one.
type Request struct {
	// ClusterID is the HostCluster's spec.clusterID: it labels the run's objects.
	ClusterID string `json:"clusterID"`
	// Slug names the cluster's tree and what the tree names after it (SlugFromPath).
	Slug string `json:"slug"`
	// Domain feeds every generated service's ingress hostname (spec.domain).
	Domain string `json:"domain"`
	// Region is spec.region; it may be empty.
	Region string `json:"region,omitempty"`
	// RepoURL is the https URL of the git repository the tree is pushed to (spec.gitOpsRepoURL).
	RepoURL string `json:"repoURL"`
	// Path is where the tree goes in the repository (spec.gitOpsPath); its last element is Slug.
	Path string `json:"path"`
	// Branch is the branch pushed to; "main" when empty.
	Branch string `json:"branch,omitempty"`
	// KubeconfigSecretRef is the stored kubeconfig of the target (key "kubeconfig"):
	// kcp-<fp>/hostcluster-<clusterID>-kubeconfig on the backend.
	KubeconfigSecretRef SecretRef `json:"kubeconfigSecretRef"`
	// GitCredentialsSecretRef, when set, holds the credentials to push with, in Flux's keys
	// (username and password, or bearerToken).
	GitCredentialsSecretRef *SecretRef `json:"gitCredentialsSecretRef,omitempty"`
	// RegistryPullSecretRef, when set, is a kubernetes.io/dockerconfigjson Secret sealed into the
	// tree as the platform's image pull secret.
	RegistryPullSecretRef *SecretRef `json:"registryPullSecretRef,omitempty"`
	// Workspace is the kcp logical cluster of the HostCluster and OwnerUID its metadata.uid: the
	// run records both and every answer carries them (Scaffold.BelongsTo). Required.
	Workspace string `json:"workspace"`
	OwnerUID  string `json:"ownerUID"`
}

// Scaffold is a scaffold job, as every answer carries it.
type Scaffold struct {
	ID        string `json:"id"`
	ClusterID string `json:"clusterID,omitempty"`
	// Workspace and OwnerUID are the request's: whose scaffold this is.
	Workspace string `json:"workspace,omitempty"`
	OwnerUID  string `json:"ownerUID,omitempty"`
	Status    Status `json:"status"`
	// Step is the runner's step while it runs (Step*), empty before it reports one.
	Step string `json:"step,omitempty"`
	// Message says what the runner is doing, or what it did.
	Message string `json:"message,omitempty"`
	// Error is the real underlying error of a failed scaffold.
	Error string `json:"error,omitempty"`
	// Commits are the commits the run pushed, oldest first (none when the tree was already
	// there).
	Commits    []string   `json:"commits,omitempty"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// BelongsTo reports whether the scaffold was started for the object ownerUID of workspace: a
// caller follows a scaffold only then. One that does not say whose it is belongs to nobody.
func (s Scaffold) BelongsTo(workspace, ownerUID string) bool {
	return workspace != "" && ownerUID != "" && s.Workspace == workspace && s.OwnerUID == ownerUID
}

// Succeeded reports whether the tree is pushed.
func (s Scaffold) Succeeded() bool { return s.Status == StatusSucceeded }

// Failed reports whether the scaffold ended without a tree.
func (s Scaffold) Failed() bool { return s.Status == StatusFailed }

// Done reports whether it ended, either way.
func (s Scaffold) Done() bool { return s.Status.Done() }

// InfrastructurePushed reports whether a running scaffold has pushed its first pass: it waits
// for the target's sealed-secrets controller, or seals. Flux must apply the infrastructure layer
// from then on (it installs that controller).
func (s Scaffold) InfrastructurePushed() bool {
	return s.Status == StatusRunning && (s.Step == StepSealedSecrets || s.Step == StepSealing)
}

// ErrorResponse is every error's body.
type ErrorResponse struct {
	Error string `json:"error"`
	// Field names the request field at fault (400 only).
	Field string `json:"field,omitempty"`
}

// FieldError says which field of a request is wrong.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

var (
	clusterIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,62}$`)
	// regionRe admits every cloud's region names (eu-north-1, eu-de, europe-west4).
	regionRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$`)
	// pathElemRe is one element of spec.gitOpsPath (the HostCluster schema's rule).
	pathElemRe = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	// logicalClusterRe is a kcp logical cluster name (lowercase letters, digits, hyphens).
	logicalClusterRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,61}[a-z0-9]$`)
	// uidRe is a Kubernetes object UID.
	uidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	// branchRe is a conservative git branch name (git check-ref-format, without the rarer forms).
	branchRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$`)
)

// maxPath bounds spec.gitOpsPath (the HostCluster schema's maxLength).
const maxPath = 1024

// maxRepoURL bounds the repository URL.
const maxRepoURL = 2048

// Validate checks every field; the first wrong one is returned as a *FieldError. Nothing that
// passes can carry anything but the documented characters into the tree, a label or a path.
func (r *Request) Validate() error {
	switch {
	case !clusterIDRe.MatchString(r.ClusterID):
		return &FieldError{"clusterID", "must match " + clusterIDRe.String()}
	case len(validation.IsDNS1123Label(r.Slug)) > 0:
		return &FieldError{"slug", "must be a DNS label: " + strings.Join(validation.IsDNS1123Label(r.Slug), "; ")}
	case r.Domain == "" || len(validation.IsDNS1123Subdomain(r.Domain)) > 0:
		return &FieldError{"domain", "must be a DNS name, e.g. my-cluster.example.com"}
	case r.Region != "" && !regionRe.MatchString(r.Region):
		return &FieldError{"region", "must be a region name of lowercase letters, digits and hyphens"}
	case !logicalClusterRe.MatchString(r.Workspace):
		return &FieldError{"workspace", "must be the kcp logical cluster name of the caller's workspace"}
	case !uidRe.MatchString(r.OwnerUID):
		return &FieldError{"ownerUID", "must be the UID of the object the scaffold is for"}
	case r.Branch != "" && (!branchRe.MatchString(r.Branch) || strings.Contains(r.Branch, "..") || strings.HasSuffix(r.Branch, "/") || strings.HasSuffix(r.Branch, ".lock")):
		return &FieldError{"branch", "must be a git branch name"}
	}
	if err := ValidateRepoURL(r.RepoURL); err != nil {
		return err
	}
	if err := validatePath(r.Path, r.Slug); err != nil {
		return err
	}
	return r.validateRefs()
}

// ValidateRepoURL checks that raw is an http(s) repository URL without credentials, query or
// fragment: credentials come from the git credentials Secret, never from a URL that ends up in
// logs and status.
func ValidateRepoURL(raw string) error {
	if raw == "" || len(raw) > maxRepoURL {
		return &FieldError{"repoURL", fmt.Sprintf("must be an https URL of at most %d characters", maxRepoURL)}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil, u.Host == "", u.Opaque != "":
		return &FieldError{"repoURL", "must be an https URL of a git repository"}
	case u.Scheme != "https" && u.Scheme != "http":
		return &FieldError{"repoURL", fmt.Sprintf("scheme %q is not supported: the scaffolder pushes over https (or http)", u.Scheme)}
	case u.User != nil:
		return &FieldError{"repoURL", "must not carry credentials: name a git credentials Secret instead"}
	case u.RawQuery != "" || u.Fragment != "":
		return &FieldError{"repoURL", "must not have a query or fragment"}
	}
	return nil
}

// validatePath checks spec.gitOpsPath's rules and that its last element is slug.
func validatePath(p, slug string) error {
	if p == "" || len(p) > maxPath {
		return &FieldError{"path", fmt.Sprintf("must be a relative path of at most %d characters", maxPath)}
	}
	elems := strings.Split(strings.Trim(p, "/"), "/")
	for _, e := range elems {
		if e == "" || e == "." || e == ".." || !pathElemRe.MatchString(e) {
			return &FieldError{"path", fmt.Sprintf("element %q is not allowed: elements are [A-Za-z0-9._-]+, never . or ..", e)}
		}
	}
	if elems[len(elems)-1] != slug {
		return &FieldError{"path", fmt.Sprintf("must end with the slug %q", slug)}
	}
	return nil
}

// validateRefs checks the Secret references: valid names, all in the kubeconfig's namespace.
func (r *Request) validateRefs() error {
	refs := []struct {
		field string
		ref   *SecretRef
	}{
		{"kubeconfigSecretRef", &r.KubeconfigSecretRef},
		{"gitCredentialsSecretRef", r.GitCredentialsSecretRef},
		{"registryPullSecretRef", r.RegistryPullSecretRef},
	}
	for _, f := range refs {
		if f.ref == nil {
			continue
		}
		switch {
		case len(validation.IsDNS1123Label(f.ref.Namespace)) > 0:
			return &FieldError{f.field + ".namespace", "must be a namespace name"}
		case len(validation.IsDNS1123Subdomain(f.ref.Name)) > 0:
			return &FieldError{f.field + ".name", "must be a Secret name"}
		case f.ref.Namespace != r.KubeconfigSecretRef.Namespace:
			return &FieldError{f.field + ".namespace", "must be the kubeconfig Secret's namespace: a request names the Secrets of one workspace"}
		}
	}
	return nil
}

// SlugFromPath derives the slug from spec.gitOpsPath: its last non-empty element, which must be
// a DNS label (RFC 1123), since the generated tree names namespaces, releases and hostnames after
// it. "fluxcd/clusters/my-cluster" -> "my-cluster".
func SlugFromPath(gitOpsPath string) (string, error) {
	elems := strings.FieldsFunc(gitOpsPath, func(r rune) bool { return r == '/' })
	if len(elems) == 0 {
		return "", fmt.Errorf("gitOpsPath %q has no element to name the cluster's tree after (e.g. fluxcd/clusters/my-cluster)", gitOpsPath)
	}
	slug := elems[len(elems)-1]
	if msgs := validation.IsDNS1123Label(slug); len(msgs) > 0 {
		return "", fmt.Errorf("the last element of gitOpsPath %q, %q, cannot be the cluster's slug: %w", gitOpsPath, slug, errors.New(strings.Join(msgs, "; ")))
	}
	return slug, nil
}

// Keys of the Secrets a request names.
const (
	// KubeconfigKey holds the stored kubeconfig.
	KubeconfigKey = "kubeconfig"
	// Git credentials, in Flux's GitRepository Secret keys (the same Secret seeds Flux).
	GitUsernameKey    = "username"
	GitPasswordKey    = "password"
	GitBearerTokenKey = "bearerToken"
	// RegistryPullKey is a kubernetes.io/dockerconfigjson Secret's key.
	RegistryPullKey = ".dockerconfigjson"
)

// Names and labels of a run's objects in the jobs' namespace (default kubeopera-provisioning),
// next to the provisioner's runs. A scaffold's ID is its Job's name suffix: scaffold-<id>.
const (
	DefaultJobsNamespace = "kubeopera-provisioning"
	LabelRun             = "scaffolder.kubeopera.io/run"
	LabelCluster         = "scaffolder.kubeopera.io/cluster-id"
	LabelOwnerUID        = "scaffolder.kubeopera.io/owner-uid"
	AnnotationWorkspace  = "scaffolder.kubeopera.io/workspace"
	AnnotationClusterID  = "scaffolder.kubeopera.io/cluster-id"
	// The runner reports on its status Secret (the one object it may write): AnnotationStep is
	// the step it is at (Step*), AnnotationMessage the sentence that goes with it (the real
	// error on failure), AnnotationCommits the commits it pushed, space-separated.
	AnnotationStep    = "scaffolder.kubeopera.io/step"
	AnnotationMessage = "scaffolder.kubeopera.io/message"
	AnnotationCommits = "scaffolder.kubeopera.io/commits"
)

// The runner's steps, in order.
const (
	StepCloning        = "cloning"
	StepInfrastructure = "pushing-infrastructure"
	StepSealedSecrets  = "waiting-for-sealed-secrets"
	StepSealing        = "pushing-sealed-secrets"
	StepSucceeded      = "succeeded"
	StepFailed         = "failed"
)

// JobName is a scaffold's Job.
func JobName(id string) string { return "scaffold-" + id }

// InputsSecretName is the per-run copy of the Secrets the request named, mounted into the Job:
// the kubeconfig, the git credentials and the registry pull secret, under InputKey*.
func InputsSecretName(id string) string { return "scaffold-" + id + "-inputs" }

// StatusSecretName is the Secret the runner reports on.
func StatusSecretName(id string) string { return "scaffold-" + id + "-status" }

// ServiceAccountName is the run's own identity: it may get and update its status Secret only.
func ServiceAccountName(id string) string { return "scaffold-" + id + "-runner" }

// Keys of the inputs Secret (files in EnvInputsDir).
const (
	InputKubeconfig   = "kubeconfig"
	InputGitUsername  = "git-username"
	InputGitPassword  = "git-password"
	InputGitToken     = "git-bearer-token"
	InputRegistryPull = "registry-pull.dockerconfigjson"
)

// The runner's environment, set on the Job's container.
const (
	EnvRunID        = "SCAFFOLD_ID"
	EnvClusterID    = "SCAFFOLD_CLUSTER_ID"
	EnvSlug         = "SCAFFOLD_SLUG"
	EnvDomain       = "SCAFFOLD_DOMAIN"
	EnvRegion       = "SCAFFOLD_REGION"
	EnvRepoURL      = "SCAFFOLD_REPO_URL"
	EnvBranch       = "SCAFFOLD_BRANCH"
	EnvPath         = "SCAFFOLD_PATH"
	EnvInputsDir    = "SCAFFOLD_INPUTS_DIR"
	EnvTemplatesDir = "SCAFFOLD_TEMPLATES_DIR" // empty: the templates built into the runner
	EnvChartMirror  = "SCAFFOLD_CHART_MIRROR"  // optional: every HelmRepository's URL
	EnvStatusSecret = "SCAFFOLD_STATUS_SECRET"
	EnvNamespace    = "POD_NAMESPACE"
	// EnvAllowNetworks lists CIDRs the runner may dial although the dial guard refuses their
	// class (loopback, private: the admin's own git server or a local target), comma-separated.
	EnvAllowNetworks = "SCAFFOLD_ALLOW_NETWORKS"
	// EnvAWSEndpointURL, when set, is the STS endpoint EKS tokens are signed for (an admin's
	// private endpoint, or a test's).
	EnvAWSEndpointURL = "SCAFFOLD_AWS_ENDPOINT_URL"
	// EnvSealedSecretsTimeout bounds the wait for the target's sealed-secrets controller.
	EnvSealedSecretsTimeout = "SCAFFOLD_SEALED_SECRETS_TIMEOUT"
)
