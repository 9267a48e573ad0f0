package flux

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// SyncName is the name of the GitRepository, the Kustomization and the git credentials Secret
	// in Namespace, as `flux bootstrap` names them (fluxcd/flux2 pkg/manifestgen/sync, options.go
	// MakeDefaultOptions: Name, Namespace and Secret "flux-system").
	SyncName = "flux-system"

	// ManagedByLabel (value ManagedByValue) marks the objects this package writes on a target.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "kubeopera"

	// Defaults of `flux bootstrap` (fluxcd/flux2 pkg/manifestgen/sync: options.go
	// MakeDefaultOptions, Interval 1m and Branch "main"; sync.go Generate, the Kustomization's
	// interval of 10m).
	defaultSourceInterval = time.Minute
	defaultBranch         = "main"
	kustomizationInterval = 10 * time.Minute
	gitRepositoryKind     = sourcev1.GitRepositoryKind
)

// SeedGitCredentials writes Secret SyncName in Namespace (the Secret `flux bootstrap` makes
// for the GitRepository's secretRef) with exactly data, whose keys are those Flux's
// GitRepository secretRef reads: "username" and "password" (HTTPS basic auth), "bearerToken",
// or "identity" and "known_hosts" (SSH). The Secret is labelled ManagedByLabel=ManagedByValue.
// It is written only when its data or label differ, so calling it every pass costs one read.
// The data is never logged nor put in an error.
func SeedGitCredentials(ctx context.Context, c client.Client, data map[string][]byte) error {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: SyncName}, s)
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: SyncName, Labels: map[string]string{ManagedByLabel: ManagedByValue}},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
		if err := c.Create(ctx, s); err != nil {
			return fmt.Errorf("failed to create Secret %s/%s: %w", Namespace, SyncName, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to read Secret %s/%s: %w", Namespace, SyncName, err)
	}
	if s.Labels[ManagedByLabel] == ManagedByValue && sameData(s.Data, data) {
		return nil
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[ManagedByLabel] = ManagedByValue
	s.Data = data
	s.StringData = nil
	if err := c.Update(ctx, s); err != nil {
		return fmt.Errorf("failed to update Secret %s/%s: %w", Namespace, SyncName, err)
	}
	return nil
}

// sameData reports whether two Secrets' data are equal (nil and empty alike).
func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// Sync is where Flux on a target syncs from.
type Sync struct {
	// URL is the git repository, e.g. https://github.com/org/repo.git.
	URL string
	// Branch is the branch to follow; "" is "main", as for `flux bootstrap`.
	Branch string
	// Path is the directory in the repository the Kustomization applies, e.g.
	// "clusters/my-cluster" (written "./clusters/my-cluster", as `flux bootstrap` does).
	Path string
	// SecretName is the GitRepository's secretRef in Namespace; "" means none (a public
	// repository). SeedGitCredentials writes SyncName.
	SecretName string
	// Interval is how often source-controller fetches the repository; 0 is 1m, as for `flux
	// bootstrap`. The Kustomization is applied on every new revision and every 10m, as `flux
	// bootstrap` writes it.
	Interval time.Duration
	// Owner are labels saying who wrote the sync (e.g. which HostCluster of which workspace); they
	// are put on both objects, and an existing object carrying all of them is the caller's own.
	Owner map[string]string
}

// ConflictError is returned by EnsureSync when Flux on the target already syncs from another
// repository or path for another owner: that sync is not overwritten.
type ConflictError struct {
	// Kind and Name name the object in Namespace that belongs to someone else.
	Kind, Name string
	// URL and Path are what the existing sync points at ("" when that object does not exist).
	URL, Path string
	// Owner are the existing object's values of the Sync.Owner keys it carries (empty when it
	// carries none, e.g. written by `flux bootstrap`).
	Owner map[string]string
	// WantURL and WantPath are what the caller asked for.
	WantURL, WantPath string
}

// Error implements error.
func (e *ConflictError) Error() string {
	owner := "another owner"
	if len(e.Owner) > 0 {
		keys := make([]string, 0, len(e.Owner))
		for k := range e.Owner {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + e.Owner[k]
		}
		owner = "another owner (" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprintf("%s %s/%s already syncs %s path %s for %s; not overwriting it with %s path %s",
		e.Kind, Namespace, e.Name, e.URL, e.Path, owner, e.WantURL, e.WantPath)
}

// PublicMessage is Error without the other owner's labels (another workspace's fingerprint and
// cluster ID, when another HostCluster wrote the sync): what the caller may show its tenant.
func (e *ConflictError) PublicMessage() string {
	return fmt.Sprintf("%s %s/%s already syncs %s path %s for another owner; not overwriting it with %s path %s",
		e.Kind, Namespace, e.Name, e.URL, e.Path, e.WantURL, e.WantPath)
}

// EnsureSync points Flux on the target at s: GitRepository and Kustomization SyncName in
// Namespace, shaped as `flux bootstrap` writes them (fluxcd/flux2 pkg/manifestgen/sync/sync.go,
// Generate: the GitRepository with url, ref.branch, secretRef and interval; the Kustomization
// with interval 10m, path "./<path>", prune true and sourceRef GitRepository SyncName).
//
// Existing objects carrying all of s.Owner's labels are the caller's and are updated. Objects of
// another owner (or of none, e.g. `flux bootstrap`'s) that already sync the same URL and path are
// adopted: updated and labelled. Objects of another owner syncing another URL or path are left
// alone and a *ConflictError is returned; nothing is written then. Objects are written only
// when what this package sets on them differs (the GitRepository's whole ref is replaced by the
// branch), and fields it does not set are kept.
func EnsureSync(ctx context.Context, c client.Client, s Sync) error {
	if s.URL == "" {
		return fmt.Errorf("failed to write Flux's sync: the repository URL is empty")
	}
	branch := s.Branch
	if branch == "" {
		branch = defaultBranch
	}
	interval := s.Interval
	if interval <= 0 {
		interval = defaultSourceInterval
	}
	wantPath := syncPath(s.Path)

	repo := &sourcev1.GitRepository{}
	repoExists, err := get(ctx, c, repo)
	if err != nil {
		return err
	}
	ks := &kustomizev1.Kustomization{}
	ksExists, err := get(ctx, c, ks)
	if err != nil {
		return err
	}

	// The sync in place: what the existing objects point at.
	var haveURL, havePath string
	if repoExists {
		haveURL = repo.Spec.URL
	}
	if ksExists {
		havePath = ks.Spec.Path
	}
	sameSync := (!repoExists || sameURL(haveURL, s.URL)) && (!ksExists || samePath(havePath, wantPath))
	for _, o := range []struct {
		exists bool
		kind   string
		obj    client.Object
	}{{repoExists, gitRepositoryKind, repo}, {ksExists, kustomizev1.KustomizationKind, ks}} {
		if o.exists && !ownedBy(o.obj, s.Owner) && !sameSync {
			return &ConflictError{Kind: o.kind, Name: SyncName, URL: haveURL, Path: havePath,
				Owner: ownerValues(o.obj, s.Owner), WantURL: s.URL, WantPath: wantPath}
		}
	}

	// GitRepository.
	before := repo.DeepCopy()
	repo.Namespace, repo.Name = Namespace, SyncName
	repo.Labels = withLabels(repo.Labels, s.Owner)
	repo.Spec.URL = s.URL
	repo.Spec.Interval = metav1.Duration{Duration: interval}
	repo.Spec.Reference = &sourcev1.GitRepositoryRef{Branch: branch} // a tag or commit would win over the branch
	repo.Spec.SecretRef = nil
	if s.SecretName != "" {
		repo.Spec.SecretRef = &meta.LocalObjectReference{Name: s.SecretName}
	}
	if err := write(ctx, c, repoExists, repo, func() bool {
		return labelsEqual(before.Labels, repo.Labels) && before.Spec.URL == repo.Spec.URL &&
			before.Spec.Interval == repo.Spec.Interval && refEqual(before.Spec.Reference, repo.Spec.Reference) &&
			secretRefEqual(before.Spec.SecretRef, repo.Spec.SecretRef)
	}); err != nil {
		return err
	}

	// Kustomization.
	ksBefore := ks.DeepCopy()
	ks.Namespace, ks.Name = Namespace, SyncName
	ks.Labels = withLabels(ks.Labels, s.Owner)
	ks.Spec.Interval = metav1.Duration{Duration: kustomizationInterval}
	ks.Spec.Path = wantPath
	ks.Spec.Prune = true
	ks.Spec.SourceRef = kustomizev1.CrossNamespaceSourceReference{Kind: gitRepositoryKind, Name: SyncName}
	return write(ctx, c, ksExists, ks, func() bool {
		return labelsEqual(ksBefore.Labels, ks.Labels) && ksBefore.Spec.Interval == ks.Spec.Interval &&
			ksBefore.Spec.Path == ks.Spec.Path && ksBefore.Spec.Prune == ks.Spec.Prune && ksBefore.Spec.SourceRef == ks.Spec.SourceRef
	})
}

// get reads obj's SyncName in Namespace into obj and reports whether it exists.
func get(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: SyncName}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("failed to read %s %s/%s: %w", kindOf(obj), Namespace, SyncName, err)
	}
	return true, nil
}

// write creates obj, or updates it unless unchanged() says it is as it was.
func write(ctx context.Context, c client.Client, exists bool, obj client.Object, unchanged func() bool) error {
	kind := kindOf(obj)
	if !exists {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("failed to create %s %s/%s: %w", kind, Namespace, SyncName, err)
		}
		return nil
	}
	if unchanged() {
		return nil
	}
	if err := c.Update(ctx, obj); err != nil {
		return fmt.Errorf("failed to update %s %s/%s: %w", kind, Namespace, SyncName, err)
	}
	return nil
}

// kindOf names the kind of obj for messages, e.g. "GitRepository".
func kindOf(obj client.Object) string {
	kind := fmt.Sprintf("%T", obj)
	return kind[strings.LastIndex(kind, ".")+1:]
}

// syncPath writes path as `flux bootstrap` does: "./" followed by the path without its "./".
func syncPath(p string) string {
	p = strings.TrimPrefix(strings.TrimSpace(p), "./")
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "./"
	}
	return "./" + p
}

// samePath compares two Kustomization paths, "x", "./x" and "./x/" alike.
func samePath(a, b string) bool { return syncPath(a) == syncPath(b) }

// sameURL compares two repository URLs, ignoring a trailing slash.
func sameURL(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

// ownedBy reports whether obj carries every owner label (an empty owner owns nothing).
func ownedBy(obj client.Object, owner map[string]string) bool {
	if len(owner) == 0 {
		return false
	}
	labels := obj.GetLabels()
	for k, v := range owner {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// ownerValues returns obj's values of the owner keys it carries.
func ownerValues(obj client.Object, owner map[string]string) map[string]string {
	out := map[string]string{}
	for k := range owner {
		if v, ok := obj.GetLabels()[k]; ok {
			out[k] = v
		}
	}
	return out
}

// withLabels returns labels with owner's set.
func withLabels(labels, owner map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+len(owner))
	for k, v := range labels {
		out[k] = v
	}
	for k, v := range owner {
		out[k] = v
	}
	return out
}

func labelsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func refEqual(a, b *sourcev1.GitRepositoryRef) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func secretRefEqual(a, b *meta.LocalObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// KustomizationReady reads Kustomization namespace/name and reports its Ready condition: ready
// is true only when Ready is True and kustomize-controller observed the current generation (the
// object's status.observedGeneration and the condition's). reason and message are the
// condition's; while the current generation is not reconciled yet, or there is no Ready
// condition yet, reason is "Progressing" and message says what is awaited. A Kustomization that does not exist is an error for which apierrors.IsNotFound
// holds; every other error is a failed read.
func KustomizationReady(ctx context.Context, c client.Client, namespace, name string) (ready bool, reason, message string, err error) {
	ks := &kustomizev1.Kustomization{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ks); err != nil {
		return false, "", "", fmt.Errorf("failed to read Kustomization %s/%s: %w", namespace, name, err)
	}
	cond := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
	switch {
	case ks.Status.ObservedGeneration < ks.Generation || (cond != nil && cond.ObservedGeneration != 0 && cond.ObservedGeneration < ks.Generation):
		return false, meta.ProgressingReason, fmt.Sprintf("generation %d not reconciled yet", ks.Generation), nil
	case cond == nil:
		return false, meta.ProgressingReason, "no Ready condition yet", nil
	}
	return cond.Status == metav1.ConditionTrue, cond.Reason, cond.Message, nil
}
