package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	gitclient "github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/kubeopera/kubeopera/internal/scaffolder/tree"
)

// Author of the scaffolder's commits.
const (
	authorName  = "gitops-scaffolder"
	authorEmail = "gitops-scaffolder@kubeopera.invalid"
)

// GitAuth is how the runner authenticates to the repository: Flux's Secret keys (username and
// password, or bearerToken); none for a public repository.
type GitAuth struct {
	Username, Password, BearerToken string
}

func (a GitAuth) method() transport.AuthMethod {
	switch {
	case a.BearerToken != "":
		return &githttp.TokenAuth{Token: a.BearerToken}
	case a.Username != "" || a.Password != "":
		return &githttp.BasicAuth{Username: a.Username, Password: a.Password}
	}
	return nil
}

// checkout is a clone of the repository's branch in a directory of its own.
type checkout struct {
	repo   *git.Repository
	dir    string
	branch plumbing.ReferenceName
	auth   transport.AuthMethod
	// empty: the branch does not exist on the remote yet (an empty repository, or a new branch).
	empty bool
}

// installGit makes go-git's smart-HTTP transport use hc (whose dials the runner's guard checks)
// for http and https: go-git keeps one transport per scheme, for the whole process.
func installGit(hc *http.Client) {
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	t := githttp.NewClient(hc)
	gitclient.InstallProtocol("https", t)
	gitclient.InstallProtocol("http", t)
}

// clone clones branch of url into a new directory under dir. An empty repository, or one
// without the branch, gives a checkout whose first push creates the branch.
func clone(ctx context.Context, dir, url, branch string, auth GitAuth) (*checkout, error) {
	work, err := os.MkdirTemp(dir, "repo-")
	if err != nil {
		return nil, err
	}
	ref := plumbing.NewBranchReferenceName(branch)
	c := &checkout{dir: work, branch: ref, auth: auth.method()}
	repo, err := git.PlainCloneContext(ctx, work, false, &git.CloneOptions{
		URL: url, Auth: c.auth, ReferenceName: ref, SingleBranch: true, Tags: git.NoTags,
	})
	switch {
	case err == nil:
		c.repo = repo
		return c, nil
	case errors.Is(err, transport.ErrEmptyRemoteRepository), errors.Is(err, git.NoMatchingRefSpecError{}), isMissingRef(err):
		// Start the branch: an empty repository of its own, whose first commit is pushed as
		// the branch (the branch's history starts with the tree).
		if rmErr := os.RemoveAll(work); rmErr != nil {
			return nil, rmErr
		}
		if err := os.MkdirAll(work, 0o700); err != nil {
			return nil, err
		}
		repo, err := git.PlainInit(work, false)
		if err != nil {
			return nil, err
		}
		if _, err := repo.CreateRemote(&config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}}); err != nil {
			return nil, err
		}
		if err := repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, ref)); err != nil {
			return nil, err
		}
		c.repo, c.empty = repo, true
		return c, nil
	}
	return nil, gitError("clone", url, c.auth != nil, err)
}

// isMissingRef reports whether err says the branch is not on the remote.
func isMissingRef(err error) bool {
	return errors.Is(err, plumbing.ErrReferenceNotFound) || strings.Contains(err.Error(), "couldn't find remote ref")
}

// gitError describes a failed git operation without the credentials (they never are in url:
// api.ValidateRepoURL refuses user info).
func gitError(op, url string, withAuth bool, err error) error {
	switch {
	case withAuth && (errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed)):
		return fmt.Errorf("git %s %s: the repository refused the credentials of the HostCluster's gitCredentialsSecretRef", op, url)
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return fmt.Errorf("git %s %s: the repository needs credentials: set the HostCluster's gitCredentialsSecretRef (keys username and password, or bearerToken)", op, url)
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("git %s %s: access denied", op, url)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("git %s %s: repository not found", op, url)
	}
	return fmt.Errorf("git %s %s: %w", op, url, err)
}

// write puts files into the worktree and reports which of them changed (new or different
// content); files already as wanted are left alone.
func (c *checkout) write(files tree.Files) ([]string, error) {
	var changed []string
	for name, content := range files {
		p := filepath.Join(c.dir, filepath.FromSlash(name))
		if !strings.HasPrefix(p, c.dir+string(filepath.Separator)) {
			return nil, fmt.Errorf("file %q is outside the repository", name)
		}
		if cur, err := os.ReadFile(p); err == nil && bytes.Equal(cur, content) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, content, 0o600); err != nil {
			return nil, err
		}
		changed = append(changed, name)
	}
	sort.Strings(changed)
	return changed, nil
}

// read returns the content of a file of the worktree; ok is false when it does not exist.
func (c *checkout) read(name string) ([]byte, bool, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, filepath.FromSlash(name)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// commitAndPush commits the changed files with message and pushes the branch; it returns the
// commit. A push the remote refuses because the branch moved meanwhile is ErrBranchMoved.
func (c *checkout) commitAndPush(ctx context.Context, url string, changed []string, message string, now time.Time) (string, error) {
	wt, err := c.repo.Worktree()
	if err != nil {
		return "", err
	}
	for _, name := range changed {
		if _, err := wt.Add(name); err != nil {
			return "", fmt.Errorf("git add %s: %w", name, err)
		}
	}
	sig := &object.Signature{Name: authorName, Email: authorEmail, When: now}
	hash, err := wt.Commit(message, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: false})
	if err != nil {
		return "", fmt.Errorf("git commit: %w", err)
	}
	spec := config.RefSpec(c.branch.String() + ":" + c.branch.String())
	err = c.repo.PushContext(ctx, &git.PushOptions{RemoteName: git.DefaultRemoteName, RefSpecs: []config.RefSpec{spec}, Auth: c.auth})
	switch {
	case err == nil:
		c.empty = false
		return hash.String(), nil
	case strings.Contains(err.Error(), "non-fast-forward"), errors.Is(err, git.ErrForceNeeded):
		return "", fmt.Errorf("%w: %v", ErrBranchMoved, err)
	}
	return "", gitError("push", url, c.auth != nil, err)
}

// ErrBranchMoved: someone pushed to the branch between the clone and the push; the run starts
// over from a fresh clone.
var ErrBranchMoved = errors.New("the branch moved while the tree was generated")
