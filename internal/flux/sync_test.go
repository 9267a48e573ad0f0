package flux_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/test/framework"
)

// TestSync: the credentials Secret, the GitRepository and Kustomization flux-system (written only
// when they change, adopted when they sync the same thing, never overwritten for another owner),
// and KustomizationReady, on a real API server with Flux's CRDs.
func TestSync(t *testing.T) {
	target := framework.StartBackend(t)
	c := targetClient(t, target.Config)
	ctx := t.Context()
	if _, err := newInstaller(t, nil).Ensure(ctx, target.Config); err != nil { // the CRDs and the namespace
		t.Fatal(err)
	}

	// Credentials.
	secret := func() *corev1.Secret {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: "flux-system"}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	basic := map[string][]byte{"username": []byte("git"), "password": []byte("s3cret")}
	if err := flux.SeedGitCredentials(ctx, c, basic); err != nil {
		t.Fatal(err)
	}
	s := secret()
	if s.Labels[flux.ManagedByLabel] != flux.ManagedByValue || string(s.Data["password"]) != "s3cret" || len(s.Data) != 2 {
		t.Fatalf("Secret = labels %v, keys %d", s.Labels, len(s.Data))
	}
	if err := flux.SeedGitCredentials(ctx, c, basic); err != nil {
		t.Fatal(err)
	}
	if rv := secret().ResourceVersion; rv != s.ResourceVersion {
		t.Errorf("unchanged credentials rewrote the Secret (resourceVersion %s -> %s)", s.ResourceVersion, rv)
	}
	ssh := map[string][]byte{"identity": []byte("KEY"), "known_hosts": []byte("github.com ssh-ed25519 AAAA")}
	if err := flux.SeedGitCredentials(ctx, c, ssh); err != nil {
		t.Fatal(err)
	}
	if s := secret(); len(s.Data) != 2 || s.Data["password"] != nil || string(s.Data["identity"]) != "KEY" {
		t.Errorf("switching to SSH credentials left keys %v", keysOf(s.Data))
	}

	// Sync.
	ownerA := map[string]string{"kubeopera.io/host-cluster-id": "a"}
	syncA := flux.Sync{URL: "https://git.example.com/a.git", Branch: "main", Path: "clusters/a", SecretName: "flux-system", Interval: 30 * time.Second, Owner: ownerA}
	if err := flux.EnsureSync(ctx, c, syncA); err != nil {
		t.Fatal(err)
	}
	repo, ks := &sourcev1.GitRepository{}, &kustomizev1.Kustomization{}
	read := func() {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: "flux-system"}, repo); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: "flux-system"}, ks); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if repo.Spec.URL != syncA.URL || repo.Spec.Reference == nil || repo.Spec.Reference.Branch != "main" || repo.Spec.SecretRef == nil ||
		repo.Spec.SecretRef.Name != "flux-system" || repo.Spec.Interval.Duration != 30*time.Second || repo.Labels["kubeopera.io/host-cluster-id"] != "a" {
		t.Errorf("GitRepository = %+v, labels %v", repo.Spec, repo.Labels)
	}
	if ks.Spec.Path != "./clusters/a" || !ks.Spec.Prune || ks.Spec.Interval.Duration != 10*time.Minute ||
		ks.Spec.SourceRef != (kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "flux-system"}) || ks.Labels["kubeopera.io/host-cluster-id"] != "a" {
		t.Errorf("Kustomization = %+v, labels %v", ks.Spec, ks.Labels)
	}
	repoRV, ksRV := repo.ResourceVersion, ks.ResourceVersion
	if err := flux.EnsureSync(ctx, c, syncA); err != nil {
		t.Fatal(err)
	}
	read()
	if repo.ResourceVersion != repoRV || ks.ResourceVersion != ksRV {
		t.Error("an unchanged sync rewrote its objects")
	}

	// The same owner moves its sync; another owner with the same URL and path adopts it; another
	// owner with another URL or path conflicts and nothing is written.
	syncA.Path, syncA.SecretName = "./clusters/a2/", ""
	if err := flux.EnsureSync(ctx, c, syncA); err != nil {
		t.Fatal(err)
	}
	read()
	if ks.Spec.Path != "./clusters/a2" || repo.Spec.SecretRef != nil {
		t.Errorf("moved sync: path %q, secretRef %v", ks.Spec.Path, repo.Spec.SecretRef)
	}
	ownerB := map[string]string{"kubeopera.io/host-cluster-id": "b"}
	if err := flux.EnsureSync(ctx, c, flux.Sync{URL: syncA.URL + "/", Path: "clusters/a2", Owner: ownerB}); err != nil {
		t.Fatalf("another owner with the same URL and path: %v", err)
	}
	read()
	if repo.Labels["kubeopera.io/host-cluster-id"] != "b" || ks.Labels["kubeopera.io/host-cluster-id"] != "b" {
		t.Errorf("adopted sync labels: %v, %v", repo.Labels, ks.Labels)
	}
	repoRV, ksRV = repo.ResourceVersion, ks.ResourceVersion
	for name, sync := range map[string]flux.Sync{
		"other URL":  {URL: "https://git.example.com/other.git", Path: "clusters/a2", Owner: ownerA},
		"other path": {URL: syncA.URL, Path: "clusters/other", Owner: ownerA},
		"no owner":   {URL: syncA.URL, Path: "clusters/other"},
	} {
		err := flux.EnsureSync(ctx, c, sync)
		var conflict *flux.ConflictError
		if !errors.As(err, &conflict) || conflict.URL != syncA.URL+"/" || conflict.Path != "./clusters/a2" {
			t.Fatalf("%s: EnsureSync = %v, want a ConflictError naming the existing sync", name, err)
		}
		if sync.Owner != nil && (conflict.Owner["kubeopera.io/host-cluster-id"] != "b" || !strings.Contains(err.Error(), "kubeopera.io/host-cluster-id=b")) {
			t.Errorf("%s: conflict owner %v: %v", name, conflict.Owner, err)
		}
		// What a HostCluster's tenant reads: the sync on their cluster, never whose it is (another
		// workspace's cluster ID and fingerprint).
		public := conflict.PublicMessage()
		if !strings.Contains(public, syncA.URL) || !strings.Contains(public, "clusters/a2") || strings.Contains(public, "host-cluster-id") || strings.Contains(public, "=b") {
			t.Errorf("%s: public message %q", name, public)
		}
		t.Logf("%s: %v", name, err)
	}
	read()
	if repo.ResourceVersion != repoRV || ks.ResourceVersion != ksRV {
		t.Error("a conflicting sync wrote the objects")
	}

	// A Kustomization's readiness.
	if _, _, _, err := flux.KustomizationReady(ctx, c, flux.Namespace, "apps"); !apierrors.IsNotFound(err) {
		t.Errorf("KustomizationReady of a missing Kustomization = %v, want NotFound", err)
	}
	ready, reason, msg, err := flux.KustomizationReady(ctx, c, flux.Namespace, "flux-system")
	if err != nil || ready || reason != meta.ProgressingReason || msg != "generation 2 not reconciled yet" {
		t.Errorf("KustomizationReady before kustomize-controller = %v, %q, %q, %v", ready, reason, msg, err)
	}
	for _, tc := range []struct {
		observed  int64
		status    metav1.ConditionStatus
		reason    string
		wantReady bool
	}{
		{observed: 2, status: metav1.ConditionFalse, reason: "BuildFailed"},
		{observed: 2, status: metav1.ConditionTrue, reason: meta.ReconciliationSucceededReason, wantReady: true},
	} {
		read()
		ks.Status.ObservedGeneration = tc.observed
		ks.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: tc.status, Reason: tc.reason, Message: "m",
			ObservedGeneration: tc.observed, LastTransitionTime: metav1.Now()}}
		if err := c.Status().Update(ctx, ks); err != nil {
			t.Fatal(err)
		}
		ready, reason, msg, err := flux.KustomizationReady(ctx, c, flux.Namespace, "flux-system")
		if err != nil || ready != tc.wantReady || reason != tc.reason || msg != "m" {
			t.Errorf("KustomizationReady = %v, %q, %q, %v; want %v, %q", ready, reason, msg, err, tc.wantReady, tc.reason)
		}
	}
	// A new generation is not ready until reconciled.
	syncB := flux.Sync{URL: syncA.URL, Path: "clusters/a2", Owner: ownerB, Interval: time.Minute}
	syncB.Path = "clusters/b"
	if err := flux.EnsureSync(ctx, c, syncB); err != nil {
		t.Fatal(err)
	}
	if ready, reason, _, err := flux.KustomizationReady(ctx, c, flux.Namespace, "flux-system"); err != nil || ready || reason != meta.ProgressingReason {
		t.Errorf("KustomizationReady after a spec change = %v, %q, %v; want not ready", ready, reason, err)
	}
}

func keysOf(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
