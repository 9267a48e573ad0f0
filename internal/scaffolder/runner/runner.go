// Package runner is the scaffold runner, the container of a gitops-scaffolder Job
// (docs/scaffolder.md#the-runner). It does the seed's two passes:
//
//  1. clone the branch of the repository (an empty repository or a missing branch is started);
//     write the infrastructure layer of the tree (internal/scaffolder/tree) at the path; commit
//     and push when anything changed;
//  2. wait for the target's sealed-secrets controller to be Available (Flux installs it from the
//     infrastructure layer), fetch its certificate through the target API server's service
//     proxy, seal fresh credentials (Postgres, RabbitMQ, authapi's internal key) and the
//     registry pull secret handed to the run against it with sealed-secrets' own library, write
//     the apps layer with them and push again.
//
// Run again on a repository it already populated, it changes nothing: the infrastructure layer
// renders to the same bytes, and a credential already sealed in the tree is kept as it is (a
// fresh password would break the database that uses the first one). A credential is sealed
// again only when its file is gone. Nothing is pushed then, and the target is not waited for.
//
// The runner reports each step on its status Secret (api.AnnotationStep, AnnotationMessage,
// AnnotationCommits), the one object its identity may write. The repository's and the target's
// addresses are the tenant's: every connection goes through the dial guard.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeopera/kubeopera/internal/authapi"
	"github.com/kubeopera/kubeopera/internal/scaffolder/api"
	"github.com/kubeopera/kubeopera/internal/scaffolder/tree"
)

// Defaults.
const (
	DefaultSealedSecretsTimeout = 15 * time.Minute
	// pollInterval is how often the controller's Deployment is looked at.
	pollInterval = 5 * time.Second
	// maxAttempts bounds the runs over a branch that keeps moving.
	maxAttempts = 3
)

// Reporter records the runner's progress (the status Secret).
type Reporter interface {
	Report(ctx context.Context, step, message string, commits []string) error
}

// Runner runs one scaffold.
type Runner struct {
	// Params are the cluster's values and the tree's path.
	Params tree.Params
	// RepoURL and Branch are the repository pushed to.
	RepoURL, Branch string
	// Auth authenticates to the repository.
	Auth GitAuth
	// Templates make the tree.
	Templates tree.Templates
	// Target is the target cluster (its stored kubeconfig, guarded and capped).
	Target kubernetes.Interface
	// RegistryPull is the .dockerconfigjson sealed as the platform's pull secret; nil for none.
	RegistryPull []byte
	// HTTP carries git's traffic; its dials are guarded.
	HTTP *http.Client
	// WorkDir holds the clone.
	WorkDir string
	// SealedSecretsTimeout bounds the wait for the controller.
	SealedSecretsTimeout time.Duration
	// Status gets the progress.
	Status Reporter
	// Log gets what the runner does (never a credential).
	Log *slog.Logger
	// Now is the clock of the commits; time.Now when nil.
	Now func() time.Time
	// PollInterval overrides how often the controller is looked at (tests).
	PollInterval time.Duration

	commits []string
}

// Run does the two passes and reports the outcome; the error it returns is reported too.
func (r *Runner) Run(ctx context.Context) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.SealedSecretsTimeout <= 0 {
		r.SealedSecretsTimeout = DefaultSealedSecretsTimeout
	}
	if r.PollInterval <= 0 {
		r.PollInterval = pollInterval
	}
	if r.Branch == "" {
		r.Branch = "main"
	}
	installGit(r.HTTP)
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		err = r.attempt(ctx)
		if !errors.Is(err, ErrBranchMoved) {
			break
		}
		r.Log.Info("The branch moved while the tree was generated; starting over", "attempt", attempt)
	}
	if err != nil {
		if rerr := r.Status.Report(context.WithoutCancel(ctx), api.StepFailed, err.Error(), r.commits); rerr != nil {
			r.Log.Error("Failed to report the failure", "error", rerr)
		}
		return err
	}
	msg := fmt.Sprintf("the tree at %s is complete", r.Params.Path)
	if len(r.commits) == 0 {
		msg += "; nothing changed, nothing pushed"
	} else {
		msg += fmt.Sprintf("; pushed %s to %s", strings.Join(r.commits, ", "), r.Branch)
	}
	return r.Status.Report(ctx, api.StepSucceeded, msg, r.commits)
}

func (r *Runner) report(ctx context.Context, step, msg string) error {
	r.Log.Info(msg, "step", step)
	return r.Status.Report(ctx, step, msg, r.commits)
}

// attempt is one run over a fresh clone.
func (r *Runner) attempt(ctx context.Context) error {
	if err := r.report(ctx, api.StepCloning, fmt.Sprintf("cloning branch %s of %s", r.Branch, r.RepoURL)); err != nil {
		return err
	}
	co, err := clone(ctx, r.WorkDir, r.RepoURL, r.Branch, r.Auth)
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(co.dir) }()

	// Credentials sealed already are kept; the tree is complete when all are there.
	creds, err := r.credentials()
	if err != nil {
		return err
	}
	kept, missing, err := r.sealedInTree(co, creds)
	if err != nil {
		return err
	}
	var sealed []tree.Sealed
	if len(missing) == 0 {
		sealed = kept // the full tree, rendered again: changes only if the templates did
	}
	if err := r.report(ctx, api.StepInfrastructure, "writing the infrastructure layer"); err != nil {
		return err
	}
	if err := r.push(ctx, co, sealed, "Scaffold "+r.Params.Path+": infrastructure layer"); err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}

	if err := r.report(ctx, api.StepSealedSecrets, fmt.Sprintf("waiting for the sealed-secrets controller %s/%s to be Available", ControllerNamespace, ControllerName)); err != nil {
		return err
	}
	err = pollUntil(ctx, r.PollInterval, r.SealedSecretsTimeout, func(ctx context.Context) (bool, string, error) {
		return controllerState(ctx, r.Target)
	}, func(msg string) {
		_ = r.report(ctx, api.StepSealedSecrets, "waiting for the sealed-secrets controller: "+msg)
	})
	if err != nil {
		return fmt.Errorf("the target's sealed-secrets controller %s/%s: %w", ControllerNamespace, ControllerName, err)
	}
	key, err := fetchCert(ctx, r.Target)
	if err != nil {
		return err
	}
	if err := r.report(ctx, api.StepSealing, fmt.Sprintf("sealing %d credentials and writing the apps layer", len(missing))); err != nil {
		return err
	}
	sealed = kept
	for _, c := range missing {
		raw, err := seal(key, c)
		if err != nil {
			return err
		}
		sealed = append(sealed, tree.Sealed{Name: c.Name, YAML: raw})
	}
	return r.push(ctx, co, sealed, "Scaffold "+r.Params.Path+": apps layer with sealed credentials")
}

// push renders the tree (the apps layer when sealed is not nil), writes it and, when anything
// changed, commits and pushes it.
func (r *Runner) push(ctx context.Context, co *checkout, sealed []tree.Sealed, message string) error {
	files, err := r.Templates.Render(r.Params, sealed)
	if err != nil {
		return err
	}
	changed, err := co.write(files)
	if err != nil {
		return err
	}
	if len(changed) == 0 {
		r.Log.Info("The tree is as generated already", "step", message)
		return nil
	}
	commit, err := co.commitAndPush(ctx, r.RepoURL, changed, message, r.Now())
	if err != nil {
		return err
	}
	r.commits = append(r.commits, commit)
	r.Log.Info("Pushed", "commit", commit, "files", len(changed), "branch", r.Branch)
	return nil
}

// sealedFile is where credential name's SealedSecret lives in the tree.
func (r *Runner) sealedFile(name string) string {
	return path.Join(r.Params.Path, tree.Apps, tree.SealedDir, name+".yaml")
}

// sealedInTree splits creds into those already sealed in the checkout (kept as they are) and
// those to seal.
func (r *Runner) sealedInTree(co *checkout, creds []Credential) ([]tree.Sealed, []Credential, error) {
	var kept []tree.Sealed
	var missing []Credential
	for _, c := range creds {
		raw, ok, err := co.read(r.sealedFile(c.Name))
		if err != nil {
			return nil, nil, err
		}
		if ok {
			kept = append(kept, tree.Sealed{Name: c.Name, YAML: raw})
		} else {
			missing = append(missing, c)
		}
	}
	return kept, missing, nil
}

// AppsNamespace is where the platform's services and their credentials live on the target: the
// namespace of authapi, whose key the HostCluster controller reads for the admin bootstrap.
var AppsNamespace = authapi.DefaultOptions().Namespace

// Names of the sealed credentials.
const (
	PostgresSecret     = "postgres-credentials"
	RabbitMQSecret     = "rabbitmq-credentials"
	RegistryPullSecret = "registry-pull"
	// appsUser is the database's and the queue's user.
	appsUser = "kubeopera"
)

// credentials are the Secrets the apps layer seals: fresh values, made now (only those that are
// not in the tree yet are used), and the registry pull secret when the run has one.
func (r *Runner) credentials() ([]Credential, error) {
	tok := func() ([]byte, error) {
		s, err := randomToken(24)
		return []byte(s), err
	}
	pg, err := tok()
	if err != nil {
		return nil, err
	}
	mq, err := tok()
	if err != nil {
		return nil, err
	}
	key, err := tok()
	if err != nil {
		return nil, err
	}
	opts := authapi.DefaultOptions()
	out := []Credential{
		{Namespace: AppsNamespace, Name: PostgresSecret, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{
			"POSTGRES_USER": []byte(appsUser), "POSTGRES_PASSWORD": pg, "POSTGRES_DB": []byte(appsUser)}},
		{Namespace: AppsNamespace, Name: RabbitMQSecret, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{
			"RABBITMQ_DEFAULT_USER": []byte(appsUser), "RABBITMQ_DEFAULT_PASS": mq}},
		{Namespace: opts.Namespace, Name: opts.Secret, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{
			opts.SecretKey: key}},
	}
	if r.RegistryPull != nil {
		out = append(out, Credential{Namespace: AppsNamespace, Name: RegistryPullSecret, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: r.RegistryPull}})
	}
	return out, nil
}
