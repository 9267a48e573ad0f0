package flux_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/devenv/gitserver"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
)

// git runs the git CLI in dir.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@kubeopera.invalid", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@kubeopera.invalid")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// commitTree commits files (path -> content) on top of the bare repository's main and pushes.
func commitTree(t *testing.T, bare string, files map[string]string, message string) {
	t.Helper()
	work := t.TempDir()
	git(t, work, "clone", "--quiet", bare, ".")
	for name, content := range files {
		path := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, work, "add", "-A")
	git(t, work, "commit", "--quiet", "-m", message)
	git(t, work, "push", "--quiet", "origin", "HEAD:main")
}

func configMapTree(greeting string) map[string]string {
	return map[string]string{
		"clusters/proof/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- configmap.yaml\n",
		"clusters/proof/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flux-proof\n  namespace: default\ndata:\n  greeting: " +
			greeting + "\n",
	}
}

// TestRealFluxSyncsFromGit is the proof that Flux's real controllers work here: the local chart
// installed by Ensure, its Deployments run by sim.FluxPods (the real source-controller and
// kustomize-controller as processes, as their ServiceAccounts), CheckHealth turning true, and a
// GitRepository + Kustomization written by EnsureSync against a real git server (git
// http-backend, basic auth with the credentials SeedGitCredentials wrote) applying a ConfigMap
// on the target, then a new commit updating it. A controller that exits makes Flux unhealthy
// until the kubelet's restart. KUBEOPERA_TEST_FLUX_LOG=1 shows the controllers' log.
func TestRealFluxSyncsFromGit(t *testing.T) {
	target := framework.StartBackend(t)
	c := targetClient(t, target.Config)
	ctx := ensureCtx(t, 5*time.Minute)
	dir := t.TempDir()

	logPath := filepath.Join(dir, "flux.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = logFile.Close()
		if t.Failed() || os.Getenv("KUBEOPERA_TEST_FLUX_LOG") != "" {
			if raw, err := os.ReadFile(logPath); err == nil {
				t.Logf("controllers' log (last 20000 bytes):\n%s", raw[max(0, len(raw)-20000):])
			}
		}
	})
	start := time.Now()
	res, err := newInstaller(t, nil).Ensure(ctx, target.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), res.Message)
	h, err := flux.CheckHealth(ctx, c)
	if err != nil || h.Healthy {
		t.Fatalf("CheckHealth before the controllers run = %+v, %v; want unhealthy", h, err)
	}

	pods := &sim.FluxPods{Target: target.Config, BinDir: framework.ToolsBin(), WorkDir: filepath.Join(dir, "pods"), Log: logFile}
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- pods.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil {
			t.Errorf("FluxPods: %v", err)
		}
	})

	healthy := func(what string) {
		t.Helper()
		framework.Eventually(t, 2*time.Minute, what, func() (bool, string) {
			h, err := flux.CheckHealth(ctx, c)
			if err != nil {
				return false, err.Error()
			}
			return h.Healthy, h.Message
		})
	}
	healthy("Flux to be healthy")
	h, _ = flux.CheckHealth(ctx, c)
	t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), h.Message)
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: flux.SourceController}, d); err != nil {
		t.Fatal(err)
	}
	for _, cond := range d.Status.Conditions {
		want := map[appsv1.DeploymentConditionType]string{appsv1.DeploymentAvailable: "MinimumReplicasAvailable", appsv1.DeploymentProgressing: "NewReplicaSetAvailable"}[cond.Type]
		if cond.Status != corev1.ConditionTrue || cond.Reason != want {
			t.Errorf("source-controller condition %s = %s/%s, want True/%s", cond.Type, cond.Status, cond.Reason, want)
		}
	}

	// A real git server with basic auth, holding a kustomization with one ConfigMap.
	auth := &gitserver.BasicAuth{Username: "flux", Password: "pa55word"}
	gs, err := gitserver.Start(filepath.Join(dir, "git"), auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gs.Close() })
	url, err := gs.CreateRepo("fleet")
	if err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(gs.Dir, "fleet.git")
	commitTree(t, bare, configMapTree("hello"), "Add the proof ConfigMap")

	if err := flux.SeedGitCredentials(ctx, c, map[string][]byte{"username": []byte(auth.Username), "password": []byte(auth.Password)}); err != nil {
		t.Fatal(err)
	}
	sync := flux.Sync{URL: url, Branch: "main", Path: "clusters/proof", SecretName: flux.SyncName, Interval: 2 * time.Second,
		Owner: map[string]string{"kubeopera.io/host-cluster-id": "proof"}}
	if err := flux.EnsureSync(ctx, c, sync); err != nil {
		t.Fatal(err)
	}
	synced := time.Now()
	configMap := func(want string) {
		t.Helper()
		framework.Eventually(t, 2*time.Minute, "the ConfigMap from git with greeting "+want, func() (bool, string) {
			ready, reason, msg, err := flux.KustomizationReady(ctx, c, flux.Namespace, flux.SyncName)
			if err != nil || !ready {
				repo := &sourcev1.GitRepository{}
				_ = c.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: flux.SyncName}, repo)
				return false, fmt.Sprintf("Kustomization: ready=%v %s: %s (%v); GitRepository conditions %v", ready, reason, msg, err, repo.Status.Conditions)
			}
			cm := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "flux-proof"}, cm); err != nil {
				return false, err.Error()
			}
			return cm.Data["greeting"] == want, fmt.Sprintf("greeting %q; Kustomization: %s", cm.Data["greeting"], msg)
		})
	}
	configMap("hello")
	ks := &kustomizev1.Kustomization{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: flux.SyncName}, ks); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s after EnsureSync: Kustomization Ready at revision %s", time.Since(synced).Round(time.Millisecond), ks.Status.LastAppliedRevision)
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "flux-proof"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels["kustomize.toolkit.fluxcd.io/name"] != flux.SyncName {
		t.Errorf("ConfigMap labels = %v, want kustomize-controller's", cm.Labels)
	}

	// A new commit is applied.
	commitTree(t, bare, configMapTree("again"), "Change the greeting")
	pushed := time.Now()
	configMap("again")
	t.Logf("%s after the push: the new commit applied", time.Since(pushed).Round(time.Millisecond))

	// kustomize-controller crashes: Flux is unhealthy until the kubelet restarts it (10s back-off).
	pid := pods.PIDs()[flux.KustomizeController]
	if pid == 0 {
		t.Fatalf("no kustomize-controller process: %v", pods.PIDs())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "Flux to be unhealthy after kustomize-controller exited", func() (bool, string) {
		h, err := flux.CheckHealth(ctx, c)
		if err != nil {
			return false, err.Error()
		}
		return h.Message == "kustomize-controller: Deployment not Available (MinimumReplicasUnavailable)", h.Message
	})
	killed := time.Now()
	healthy("Flux to be healthy again after the restart")
	t.Logf("%s after the crash: healthy again", time.Since(killed).Round(time.Millisecond))
	if p := pods.PIDs()[flux.KustomizeController]; p == 0 || p == pid {
		t.Errorf("kustomize-controller pid after the restart = %d (was %d)", p, pid)
	}
}
