package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	scaffoldapi "github.com/kubeopera/kubeopera/internal/scaffolder/api"
	scaffolderclient "github.com/kubeopera/kubeopera/internal/scaffolder/client"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/workspaces"
)

const (
	// brokenRepo is a repository the git server does not have: its scaffold fails with git's
	// answer.
	brokenRepo = "no-such-repo"
	// clusterPath is the tree every HostCluster that goes to Ready uses: Flux on the one target
	// syncs one repository path (GitRepository and Kustomization flux-system), which HostClusters
	// of any workspace naming the same repository and path share.
	clusterPath = "fluxcd/clusters/my-cluster"
	// hcNamespace is where the tenants put their HostClusters, as the seed's YAML does.
	hcNamespace = "kubeopera-system"
)

var sharedTarget lazy[*sim.Target]

// hostTarget returns the suite's target cluster (started at the first call): a real kube-apiserver
// on which Flux's real controllers run as processes once Flux is installed, and authapi is played.
func (e *env) hostTarget(t *testing.T) *sim.Target {
	t.Helper()
	return sharedTarget.get(t, e, "the target cluster", func() (*sim.Target, func(), error) {
		return sim.StartTarget(filepath.Join(e.dir, "target"), framework.ToolsBin(), false)
	})
}

// scaffoldJobs are the gitops-scaffolder's Jobs for HostClusters of workspace lc, as an admin
// lists them: kubectl -n kubeopera-provisioning get jobs -l scaffolder.kubeopera.io/run.
func (e *env) scaffoldJobs(t *testing.T, lc string) []batchv1.Job {
	t.Helper()
	l := &batchv1.JobList{}
	if err := e.backendC.List(context.Background(), l, client.InNamespace(scaffoldapi.DefaultJobsNamespace), client.HasLabels{scaffoldapi.LabelRun}); err != nil {
		t.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range l.Items {
		if j.Annotations[scaffoldapi.AnnotationWorkspace] == lc {
			out = append(out, j)
		}
	}
	return out
}

// scaffold asks the gitops-scaffolder's API for scaffold id.
func (e *env) scaffold(t *testing.T, id string) scaffoldapi.Scaffold {
	t.Helper()
	c, err := scaffolderclient.New(e.scaffolding.URL, e.scaffolding.APIKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("scaffold %s: %v", id, err)
	}
	return s
}

func (e *env) targetClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(e.hostTarget(t).Cluster.Config, client.Options{Scheme: targetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func targetScheme() *runtime.Scheme {
	s := manager.Scheme()
	if err := flux.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// seedHostCluster is the example HostCluster (docs/hostcluster.md#example), connecting the suite's target.
func (e *env) seedHostCluster(t *testing.T, name, clusterID, gitOpsPath string, admin bool) *kov1alpha1.HostCluster {
	t.Helper()
	y := fmt.Sprintf(`
apiVersion: kubeopera.io/v1alpha1
kind: HostCluster
metadata:
  name: %s
  namespace: %s
spec:
  clusterID: %q
  mode: connect_existing
  provider: aws
  region: eu-north-1
  connectKubeconfigSecretRef: hostcluster-%s-input-kubeconfig
  gitOpsRepoURL: %s
  gitOpsPath: %s
  gitCredentialsSecretRef: gitops-iac-credentials
  domain: my-cluster.acme.com
`, name, hcNamespace, clusterID, clusterID, e.gitops.RepoURL, gitOpsPath)
	if admin {
		y += "  adminEmail: admin@acme.com\n  adminUsername: admin\n"
	}
	hc := &kov1alpha1.HostCluster{}
	if err := yaml.UnmarshalStrict([]byte(y), hc); err != nil {
		t.Fatal(err)
	}
	return hc
}

// connect does what the tenant does: the namespace, the kubeconfig and Git credentials Secrets
// (labelled so the platform may read them), and the HostCluster.
func (e *env) connect(t *testing.T, c client.Client, hc *kov1alpha1.HostCluster, kubeconfig []byte) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hcNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	access := map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: hcNamespace, Name: hc.Spec.ConnectKubeconfigSecretRef, Labels: access},
			Data: map[string][]byte{"kubeconfig": kubeconfig}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: hcNamespace, Name: "gitops-iac-credentials", Labels: access},
			Data: map[string][]byte{"username": []byte(sim.GitUsername), "password": []byte(sim.GitPassword)}},
	} {
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
}

func getHostCluster(t *testing.T, c client.Client, name string) *kov1alpha1.HostCluster {
	t.Helper()
	hc := &kov1alpha1.HostCluster{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: hcNamespace, Name: name}, hc); err != nil {
		t.Fatal(err)
	}
	return hc
}

func describeHC(hc *kov1alpha1.HostCluster) string {
	var conds []string
	for _, c := range hc.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s(%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %q message %q conditions %v", hc.Status.Phase, hc.Status.Message, conds)
}

func waitHostClusterPhase(t *testing.T, c client.Client, name string, phase kov1alpha1.HostClusterPhase, timeout time.Duration) *kov1alpha1.HostCluster {
	t.Helper()
	var hc *kov1alpha1.HostCluster
	framework.Eventually(t, timeout, "HostCluster "+name+" "+string(phase), func() (bool, string) {
		hc = getHostCluster(t, c, name)
		return hc.Status.Phase == phase, describeHC(hc)
	})
	return hc
}

func TestHostClusterConnectedInTwoWorkspacesWithTheSameNames(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	target := e.hostTarget(t)
	acme, acmeLC, acmeName := e.tenantWorkspace(t, "hc-acme")
	globex, globexLC, _ := e.tenantWorkspace(t, "hc-globex")
	watched := e.watchHostCluster(t, "root:orgs:"+acmeName, "my-cluster")
	phases := func() []string { p, _ := watched(); return p }
	// The target and its authapi are shared with parallel tests: count this test's account only.
	callsBefore, _ := target.AuthAPI.CallsFor("admin@acme.com")

	e.connect(t, acme, e.seedHostCluster(t, "my-cluster", "7e9d3a1b", clusterPath, true), target.Kubeconfig)
	e.connect(t, globex, e.seedHostCluster(t, "my-cluster", "7e9d3a1b", clusterPath, false), target.Kubeconfig)

	a := waitHostClusterPhase(t, acme, "my-cluster", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	g := waitHostClusterPhase(t, globex, "my-cluster", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)

	// Every phase, in order, as kubectl get -w shows them.
	want := []string{"", "Pending", "ValidatingAccess", "BootstrappingFlux", "GeneratingGitOpsTree", "InstallingKubeOpera", "Ready"}
	framework.Eventually(t, 10*time.Second, "phases seen", func() (bool, string) {
		got := phases()
		for len(got) > 0 && got[0] == "" {
			got = got[1:]
		}
		return slices.Equal(got, want[1:]), fmt.Sprint(got)
	})

	for name, hc := range map[string]*kov1alpha1.HostCluster{"acme": a, "globex": g} {
		for _, typ := range []string{kov1alpha1.ReadyCondition, kov1alpha1.BackendNamespaceReadyCondition, kov1alpha1.AccessValidatedCondition,
			kov1alpha1.KubeconfigDeliveredCondition, kov1alpha1.FluxReadyCondition, kov1alpha1.GitOpsTreeGeneratedCondition, kov1alpha1.KubeOperaInstalledCondition} {
			if !reconcile.IsTrue(hc, typ) {
				t.Errorf("%s: %s is not True: %s", name, typ, describeHC(hc))
			}
		}
		if !hc.Status.FluxHealthy || !hc.Status.KubeOperaInstalled || hc.Status.KubeconfigSecret != "hostcluster-7e9d3a1b-kubeconfig" {
			t.Errorf("%s: status %+v", name, hc.Status)
		}
		inv := hc.Status.Inventory
		if inv == nil || !strings.HasPrefix(inv.KubernetesVersion, "v1.36") || inv.Provider != "unknown" || inv.Nodes != "0/0" || ptr.Deref(inv.HealthScore, -1) != 100 || inv.HealthBand != "green" {
			t.Errorf("%s: inventory %+v", name, inv)
		}
		if hc.Annotations[kov1alpha1.ScaffoldJobIDAnnotation] == "" {
			t.Errorf("%s: no scaffold job ID in annotation %s", name, kov1alpha1.ScaffoldJobIDAnnotation)
		}
	}
	if !strings.Contains(a.Status.Message, "Super-admin account admin@acme.com created") || a.Status.AdminPasswordSecretRef != "hostcluster-7e9d3a1b-admin-password" {
		t.Errorf("acme: %s", describeHC(a))
	}
	if !strings.Contains(g.Status.Message, "No admin account was created") {
		t.Errorf("globex's message does not say plainly that no admin was created: %q", g.Status.Message)
	}
	if c := reconcile.GetCondition(g, kov1alpha1.AdminBootstrappedCondition); c == nil || c.Reason != kov1alpha1.AdminSkippedReason {
		t.Errorf("globex AdminBootstrapped = %+v", c)
	}

	// Delivered: the kubeconfig (as supplied) in both, the admin password in acme only.
	for name, c := range map[string]client.Client{"acme": acme, "globex": globex} {
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-7e9d3a1b-kubeconfig"}, sec); err != nil {
			t.Fatalf("%s: kubeconfig not delivered: %v", name, err)
		}
		if string(sec.Data["kubeconfig"]) != string(target.Kubeconfig) {
			t.Errorf("%s: the delivered kubeconfig is not the one supplied", name)
		}
		if sec.Labels[kov1alpha1.HostClusterIDLabel] != "7e9d3a1b" || sec.Labels[kov1alpha1.ManagedByLabel] != "host-cluster-controller" {
			t.Errorf("%s: delivered kubeconfig labels %v", name, sec.Labels)
		}
	}
	pw := &corev1.Secret{}
	if err := acme.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-7e9d3a1b-admin-password"}, pw); err != nil || len(pw.Data["password"]) < 16 {
		t.Errorf("acme: admin password not delivered (err %v)", err)
	}
	err := globex.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-7e9d3a1b-admin-password"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("globex has an admin password Secret it did not ask for (err %v)", err)
	}
	if calls, user := target.AuthAPI.CallsFor("admin@acme.com"); calls-callsBefore != 1 || user != "admin" {
		t.Errorf("authapi was called %d times for admin@acme.com (account %q), want once (acme only; globex asks for no admin)", calls-callsBefore, user)
	}

	// One gitops-scaffolder job per cluster: the job ID in the annotation is read back from the
	// API server before a job is started, so a pass working from an older cached copy never
	// starts a second one.
	for _, lc := range []string{acmeLC, globexLC} {
		if n := len(e.scaffoldJobs(t, lc)); n != 1 {
			t.Errorf("%d gitops-scaffolder jobs for the cluster of %s, want 1", n, lc)
		}
	}

	// Stored per workspace on the backend, apart.
	for _, lc := range []string{acmeLC, globexLC} {
		sec := &corev1.Secret{}
		if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(lc), Name: "hostcluster-7e9d3a1b-kubeconfig"}, sec); err != nil {
			t.Errorf("kubeconfig not stored in %s: %v", workspaces.Namespace(lc), err)
		}
	}

	// On the target, real Flux applied the tree: the apps Kustomization is Ready by itself and
	// what it holds exists.
	tc := e.targetClient(t)
	ks := &kustomizev1.Kustomization{}
	if err := tc.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: "apps"}, ks); err != nil {
		t.Fatal(err)
	}
	gr := &sourcev1.GitRepository{}
	if err := tc.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: "flux-system"}, gr); err != nil || gr.Spec.URL != e.gitops.RepoURL {
		t.Errorf("GitRepository flux-system: %v %+v", err, gr.Spec)
	}
	cm := &corev1.ConfigMap{}
	if err := tc.Get(ctx, client.ObjectKey{Namespace: "kubeopera", Name: "kubeopera-platform"}, cm); err != nil {
		t.Errorf("the tree's ConfigMap was not applied by Flux: %v", err)
	}
	if err := tc.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: "flux-system"}, &corev1.Secret{}); err != nil {
		t.Errorf("the Git credentials were not seeded on the target: %v", err)
	}

	// The tree is the two passes' two commits, however many scaffolds of HostClusters sharing
	// the path ran (concurrently: a push onto a moved branch starts over from a fresh clone, and
	// a run on a complete tree pushes nothing).
	log, err := exec.Command("git", "--git-dir", filepath.Join(e.gitops.Git.Dir, "gitops-iac.git"), "log", "--format=%s", "main", "--", clusterPath).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSpace(string(log)), "\n"); len(got) != 2 {
		t.Errorf("commits touching %s: %q, want the two passes' two", clusterPath, got)
	}

	// The scaffold's two passes, in the repository: the infrastructure layer, then the apps
	// layer with the credentials sealed against the target's real sealed-secrets controller,
	// which unsealed them into Secrets there (authapi's key among them: the admin bootstrap
	// above used it).
	files := gitFiles(t, filepath.Join(e.gitops.Git.Dir, "gitops-iac.git"), clusterPath)
	for _, f := range []string{"infrastructure/sealed-secrets.yaml", "apps/sealed/postgres-credentials.yaml", "apps/sealed/rabbitmq-credentials.yaml", "apps/sealed/authapi-secrets.yaml"} {
		if !slices.Contains(files, f) {
			t.Errorf("the tree lacks %s: %v", f, files)
		}
	}
	for _, name := range []string{"postgres-credentials", "rabbitmq-credentials", "authapi-secrets"} {
		sec := &corev1.Secret{}
		if err := tc.Get(ctx, client.ObjectKey{Namespace: "kubeopera", Name: name}, sec); err != nil {
			t.Errorf("Secret kubeopera/%s was not unsealed on the target: %v", name, err)
			continue
		}
		if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Kind != "SealedSecret" || len(sec.Data) == 0 {
			t.Errorf("Secret kubeopera/%s is not the sealed-secrets controller's: owners %v, %d keys", name, sec.OwnerReferences, len(sec.Data))
		}
	}
	// No credential is in the repository in clear: the database's password is in the target's
	// Secret only.
	pg := &corev1.Secret{}
	if err := tc.Get(ctx, client.ObjectKey{Namespace: "kubeopera", Name: "postgres-credentials"}, pg); err == nil {
		show, err := exec.Command("git", "--git-dir", filepath.Join(e.gitops.Git.Dir, "gitops-iac.git"), "log", "-p", "main").Output()
		if err != nil {
			t.Fatal(err)
		}
		if pw := pg.Data["POSTGRES_PASSWORD"]; len(pw) == 0 || strings.Contains(string(show), string(pw)) {
			t.Error("the database's password is in the repository's history in clear (or empty)")
		}
	}
}

// gitFiles lists the files under dir of branch main of the bare repository, relative to dir.
func gitFiles(t *testing.T, bare, dir string) []string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", bare, "ls-tree", "-r", "--name-only", "main", "--", dir).Output()
	if err != nil {
		t.Fatalf("git ls-tree: %v", err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		files = append(files, strings.TrimPrefix(f, dir+"/"))
	}
	return files
}

func TestHostClusterFailsWithTheScaffoldersError(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	target := e.hostTarget(t)
	c, _, _ := e.tenantWorkspace(t, "hc-broken")
	hc := e.seedHostCluster(t, "broken", "broken1", "fluxcd/clusters/broken", false)
	hc.Spec.GitOpsRepoURL = e.gitops.Git.URL + "/" + brokenRepo + ".git"
	e.connect(t, c, hc, target.Kubeconfig)
	hc = waitHostClusterPhase(t, c, "broken", kov1alpha1.HostClusterPhaseFailed, 4*time.Minute)
	// The runner's real error: git's answer for a repository the server does not have.
	const gitsError = "repository not found"
	cond := reconcile.GetCondition(hc, kov1alpha1.GitOpsTreeGeneratedCondition)
	if cond == nil || cond.Reason != kov1alpha1.ScaffoldFailedReason || !strings.Contains(cond.Message, gitsError) || !strings.Contains(cond.Message, brokenRepo) {
		t.Fatalf("GitOpsTreeGenerated = %+v, want ScaffoldFailed with the runner's error", cond)
	}
	if !strings.Contains(hc.Status.Message, gitsError) {
		t.Errorf("message %q lacks the runner's error", hc.Status.Message)
	}
}

func TestHostClusterRefusesAnExecKubeconfig(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c, _, _ := e.tenantWorkspace(t, "hc-exec")
	exec := []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "id"]}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	e.connect(t, c, e.seedHostCluster(t, "exec", "exec1", clusterPath, false), exec)
	hc := waitHostClusterPhase(t, c, "exec", kov1alpha1.HostClusterPhaseFailed, time.Minute)
	cond := reconcile.GetCondition(hc, kov1alpha1.AccessValidatedCondition)
	if cond == nil || cond.Reason != kov1alpha1.InvalidKubeconfigReason || !strings.Contains(cond.Message, "exec") {
		t.Fatalf("AccessValidated = %+v", cond)
	}
}

// TestHostClusterAdminBootstrapOnceAcrossRestarts stops the manager while the HostCluster is
// mid-way (its scaffold job in flight), lets a new one finish it, then asks for a new attempt of
// the Ready cluster and restarts the manager again: authapi is called exactly once. Finally the
// HostCluster is deleted: a disconnect that leaves everything on the target.
func TestHostClusterAdminBootstrapOnceAcrossRestarts(t *testing.T) {
	e := sharedEnv(t)
	t.Cleanup(func() { e.ensureManagerRunning(t) })
	ctx := context.Background()
	target := e.hostTarget(t)
	c, lc, _ := e.tenantWorkspace(t, "hc-restart")
	before := target.AuthAPI.Calls()
	e.connect(t, c, e.seedHostCluster(t, "restarted", "restart1", clusterPath, true), target.Kubeconfig)

	framework.Eventually(t, 4*time.Minute, "HostCluster mid-way", func() (bool, string) {
		hc := getHostCluster(t, c, "restarted")
		p := hc.Status.Phase
		return p == kov1alpha1.HostClusterPhaseGeneratingGitOpsTree || p == kov1alpha1.HostClusterPhaseInstallingKubeOpera, describeHC(hc)
	})
	e.stopManager()
	if err := e.startManager(); err != nil {
		t.Fatal(err)
	}
	hc := waitHostClusterPhase(t, c, "restarted", kov1alpha1.HostClusterPhaseReady, 4*time.Minute)
	if got := target.AuthAPI.Calls() - before; got != 1 {
		t.Fatalf("authapi called %d times, want 1", got)
	}
	pw := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-restart1-admin-password"}, pw); err != nil {
		t.Fatal(err)
	}

	// A new attempt of the Ready cluster, across another restart: no second call, same password.
	hc.Annotations[kov1alpha1.RetryAnnotation] = "again"
	if err := c.Update(ctx, hc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "retry handled", func() (bool, string) {
		hc := getHostCluster(t, c, "restarted")
		return hc.Status.LastHandledRetry == "again", describeHC(hc)
	})
	e.stopManager()
	if err := e.startManager(); err != nil {
		t.Fatal(err)
	}
	waitHostClusterPhase(t, c, "restarted", kov1alpha1.HostClusterPhaseReady, 4*time.Minute)
	framework.Consistently(t, 5*time.Second, "authapi called once", func() (bool, string) {
		got := target.AuthAPI.Calls() - before
		return got == 1, fmt.Sprintf("%d calls", got)
	})
	pw2 := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-restart1-admin-password"}, pw2); err != nil {
		t.Fatal(err)
	}
	if string(pw2.Data["password"]) != string(pw.Data["password"]) {
		t.Error("the delivered admin password changed")
	}

	// Deleting is a disconnect: the platform's Secrets go, the target keeps everything.
	tc := e.targetClient(t)
	snapshot := func() map[string]int {
		out := map[string]int{}
		for name, l := range map[string]client.ObjectList{"namespaces": &corev1.NamespaceList{}, "deployments": &appsv1.DeploymentList{},
			"gitrepositories": &sourcev1.GitRepositoryList{}, "kustomizations": &kustomizev1.KustomizationList{}, "configmaps": &corev1.ConfigMapList{}, "secrets": &corev1.SecretList{}} {
			if err := tc.List(ctx, l); err != nil {
				t.Fatal(err)
			}
			items, _ := meta.ExtractList(l)
			out[name] = len(items)
		}
		return out
	}
	onTarget := snapshot()
	if err := c.Delete(ctx, getHostCluster(t, c, "restarted")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "HostCluster restarted gone", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: "restarted"}, &kov1alpha1.HostCluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	for _, name := range []string{"hostcluster-restart1-kubeconfig", "hostcluster-restart1-admin-password"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("delivered Secret %s still there (err %v)", name, err)
		}
	}
	for _, name := range []string{"hostcluster-restart1-kubeconfig", "hostcluster-restart1-admin-password", "hostcluster-restart1-git-credentials"} {
		if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(lc), Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("stored Secret %s still on the backend (err %v)", name, err)
		}
	}
	if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(onTarget) {
		t.Errorf("objects on the target changed with the disconnect: before %v, after %v", onTarget, after)
	}
}

// TestHostClusterSecretsStayOutOfLogsEventsStatusAndMetrics: the kubeconfig's credentials, the
// admin password and the Git password never show in the manager's logs, the HostCluster's status,
// the events the tenant reads or the metrics.
func TestHostClusterSecretsStayOutOfLogsEventsStatusAndMetrics(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	target := e.hostTarget(t)
	c, lc, _ := e.tenantWorkspace(t, "hc-nosecrets")
	quiet := e.seedHostCluster(t, "quiet", "quiet1", clusterPath, true)
	quiet.Spec.AdminEmail = "admin@quiet.example.com" // not acme's: the authapi is shared with parallel tests
	e.connect(t, c, quiet, target.Kubeconfig)
	hc := waitHostClusterPhase(t, c, "quiet", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	pw := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-quiet1-admin-password"}, pw); err != nil {
		t.Fatal(err)
	}
	cfg := target.Cluster.Config
	material := []string{string(pw.Data["password"]), sim.GitPassword, b64(string(cfg.KeyData)), b64(sim.GitPassword)}
	if lines := strings.Split(strings.TrimSpace(string(cfg.KeyData)), "\n"); len(lines) > 2 {
		material = append(material, lines[1])
	}
	if cfg.BearerToken != "" {
		material = append(material, cfg.BearerToken)
	}

	logs := e.managerLogs()
	if !strings.Contains(logs, lc) || !strings.Contains(logs, "HostCluster") {
		t.Errorf("the manager logged nothing about workspace %s; the log check would prove nothing", lc)
	}
	raw, _ := yaml.Marshal(hc.Status)
	evs := &corev1.EventList{}
	if err := c.List(ctx, evs, client.InNamespace(hcNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 {
		t.Error("the tenant was told nothing: no events in their namespace")
	}
	metricsAddr, _ := e.addrs()
	reader, _ := e.metricsTokens(t)
	code, metrics := metricsGet(t, "https://"+metricsAddr+"/metrics", reader)
	if code != 200 || !strings.Contains(metrics, "controller_runtime_reconcile_total") {
		t.Errorf("metrics not read (HTTP %d)", code)
	}
	for _, secret := range material {
		if strings.Contains(metrics, secret) {
			t.Errorf("metrics contain secret material")
		}
		if strings.Contains(logs, secret) {
			t.Errorf("manager logs contain secret material")
		}
		if strings.Contains(string(raw), secret) {
			t.Errorf("status contains secret material")
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, secret) {
				t.Errorf("event carries secret material: %s", ev.Message)
			}
		}
	}
}

func TestHostClusterWithAnUnparsableKubeconfigFailsAtOnce(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c, _, _ := e.tenantWorkspace(t, "hc-garbage")
	e.connect(t, c, e.seedHostCluster(t, "garbage", "garbage1", clusterPath, false), []byte("clusters: [this is not"))
	hc := waitHostClusterPhase(t, c, "garbage", kov1alpha1.HostClusterPhaseFailed, time.Minute)
	cond := reconcile.GetCondition(hc, kov1alpha1.AccessValidatedCondition)
	if cond == nil || cond.Reason != kov1alpha1.InvalidKubeconfigReason || !strings.Contains(cond.Message, "not valid") {
		t.Fatalf("AccessValidated = %+v", cond)
	}
}

// TestHostClusterWithAnUnreachableTargetGivesUp: the manager runs with
// --hostcluster-access-give-up 20s; the target's address answers nothing.
func TestHostClusterWithAnUnreachableTargetGivesUp(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c, _, _ := e.tenantWorkspace(t, "hc-far")
	far := []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	start := time.Now()
	e.connect(t, c, e.seedHostCluster(t, "far", "far1", clusterPath, false), far)
	hc := waitHostClusterPhase(t, c, "far", kov1alpha1.HostClusterPhaseValidatingAccess, time.Minute)
	if hc.Annotations[kov1alpha1.ValidationStartedAnnotation] == "" {
		framework.Eventually(t, 10*time.Second, "give-up start annotated", func() (bool, string) {
			hc = getHostCluster(t, c, "far")
			return hc.Annotations[kov1alpha1.ValidationStartedAnnotation] != "", describeHC(hc)
		})
	}
	hc = waitHostClusterPhase(t, c, "far", kov1alpha1.HostClusterPhaseFailed, 2*time.Minute)
	if took := time.Since(start); took < 20*time.Second {
		t.Errorf("failed after %s, before the give-up time", took)
	}
	cond := reconcile.GetCondition(hc, kov1alpha1.AccessValidatedCondition)
	if cond == nil || cond.Reason != kov1alpha1.UnreachableReason || !strings.Contains(cond.Message, "connection refused") {
		t.Fatalf("AccessValidated = %+v, want Unreachable, saying the connection was refused", cond)
	}
}

// TestHostClusterFailsAtOnceWithoutAScaffolder restarts the manager without
// GITOPS_SCAFFOLDER_BASE_URL: a HostCluster fails at GeneratingGitOpsTree, saying so.
func TestHostClusterFailsAtOnceWithoutAScaffolder(t *testing.T) {
	e := sharedEnv(t)
	t.Cleanup(func() {
		e.stopManager()
		e.withoutScaffolder = false
		if err := e.startManager(); err != nil {
			t.Errorf("failed to start the manager again: %v", err)
		}
	})
	target := e.hostTarget(t)
	e.stopManager()
	e.withoutScaffolder = true
	if err := e.startManager(); err != nil {
		t.Fatal(err)
	}
	c, _, _ := e.tenantWorkspace(t, "hc-noscaffolder")
	e.connect(t, c, e.seedHostCluster(t, "lonely", "lonely1", clusterPath, false), target.Kubeconfig)
	hc := waitHostClusterPhase(t, c, "lonely", kov1alpha1.HostClusterPhaseFailed, 4*time.Minute)
	cond := reconcile.GetCondition(hc, kov1alpha1.GitOpsTreeGeneratedCondition)
	if cond == nil || cond.Reason != kov1alpha1.ScaffolderNotConfiguredReason || !strings.Contains(cond.Message, "GITOPS_SCAFFOLDER_BASE_URL is not set") {
		t.Fatalf("GitOpsTreeGenerated = %+v", cond)
	}
	if !reconcile.IsTrue(hc, kov1alpha1.FluxReadyCondition) {
		t.Errorf("Flux was not bootstrapped before: %s", describeHC(hc))
	}
}

// TestDeletedWorkspaceDisconnectsItsHostClusters: deleting a workspace takes its HostClusters
// through the same disconnect (the WorkspaceType's terminator waits for their finalizers): the
// backend keeps nothing of the workspace and the target keeps everything.
func TestDeletedWorkspaceDisconnectsItsHostClusters(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	target := e.hostTarget(t)
	c, lc, name := e.tenantWorkspace(t, "hc-delws")
	e.connect(t, c, e.seedHostCluster(t, "gone", "gone1", clusterPath, false), target.Kubeconfig)
	framework.Eventually(t, 2*time.Minute, "kubeconfig stored", func() (bool, string) {
		err := e.backendC.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(lc), Name: "hostcluster-gone1-kubeconfig"}, &corev1.Secret{})
		return err == nil, fmt.Sprint(err)
	})
	tc := e.targetClient(t)
	waitHostClusterPhase(t, c, "gone", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	if err := tc.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: "flux-system"}, &sourcev1.GitRepository{}); err != nil {
		t.Fatal(err)
	}

	if err := workspaces.DeleteWorkspace(ctx, e.kcp.Config, "root:orgs", name); err != nil {
		t.Fatal(err)
	}
	orgs := e.workspaceClient(t, "root:orgs")
	framework.Eventually(t, 3*time.Minute, "workspace "+name+" gone", func() (bool, string) {
		ws := &tenancyWorkspace{}
		err := orgs.Get(ctx, client.ObjectKey{Name: name}, ws)
		return apierrors.IsNotFound(err), fmt.Sprintf("err=%v phase=%s", err, ws.Status.Phase)
	})
	list := &corev1.NamespaceList{}
	if err := e.backendC.List(ctx, list, client.MatchingLabels{workspaces.FingerprintLabel: workspaces.Fingerprint(lc)}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d backend namespaces of the deleted workspace remain", len(list.Items))
	}
	deploys := &appsv1.DeploymentList{}
	if err := tc.List(ctx, deploys, client.InNamespace(flux.Namespace)); err != nil || len(deploys.Items) == 0 {
		t.Errorf("Flux's Deployments on the target: %d (err %v)", len(deploys.Items), err)
	}
	if err := tc.Get(ctx, client.ObjectKey{Namespace: flux.Namespace, Name: "flux-system"}, &sourcev1.GitRepository{}); err != nil {
		t.Errorf("the GitRepository on the target went with the workspace: %v", err)
	}
}

// TestHostClusterFollowsOnlyItsOwnScaffoldJob: the scaffold-job-id annotation is the tenant's to
// write. A HostCluster whose annotation names another workspace's succeeded job, or another
// HostCluster's of the same workspace, never takes that job for its own: it fails with
// RunNotOwned, its tree is never taken as generated, and the job and its owner are untouched.
func TestHostClusterFollowsOnlyItsOwnScaffoldJob(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	target := e.hostTarget(t)
	owner, ownerLC, _ := e.tenantWorkspace(t, "hc-jobowner")
	thief, _, _ := e.tenantWorkspace(t, "hc-jobthief")

	e.connect(t, owner, e.seedHostCluster(t, "mine", "jobowner1", clusterPath, false), target.Kubeconfig)
	mine := waitHostClusterPhase(t, owner, "mine", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	jobA := mine.Annotations[kov1alpha1.ScaffoldJobIDAnnotation]
	if j := e.scaffold(t, jobA); !j.Succeeded() {
		t.Fatalf("owner's scaffold job %q: %+v", jobA, j)
	}
	// A git server that accepts connections and never answers: a scaffold cloning from it runs
	// until its deadline.
	hung := framework.StartHangingServer(t)

	for _, tc := range []struct {
		what string
		c    client.Client
		name string
	}{
		{"another workspace's job", thief, "thief"},
		{"another HostCluster's job of the same workspace", owner, "sibling"},
	} {
		// Its own job runs long (cloning from the hung server); meanwhile the tenant points the
		// annotation at the owner's succeeded job.
		held := e.seedHostCluster(t, tc.name, tc.name+"1", "fluxcd/clusters/held", false)
		held.Spec.GitOpsRepoURL = hung.URL + "/held.git"
		e.connect(t, tc.c, held, target.Kubeconfig)
		var own string
		framework.Eventually(t, 4*time.Minute, tc.name+" waiting for its own scaffold job", func() (bool, string) {
			hc := getHostCluster(t, tc.c, tc.name)
			own = hc.Annotations[kov1alpha1.ScaffoldJobIDAnnotation]
			return hc.Status.Phase == kov1alpha1.HostClusterPhaseGeneratingGitOpsTree && own != "" && own != jobA, describeHC(hc)
		})
		hc := getHostCluster(t, tc.c, tc.name)
		patch := client.MergeFrom(hc.DeepCopy())
		hc.Annotations[kov1alpha1.ScaffoldJobIDAnnotation] = jobA
		if err := tc.c.Patch(ctx, hc, patch); err != nil {
			t.Fatal(err)
		}
		hc = waitHostClusterPhase(t, tc.c, tc.name, kov1alpha1.HostClusterPhaseFailed, 2*time.Minute)
		cond := reconcile.GetCondition(hc, kov1alpha1.GitOpsTreeGeneratedCondition)
		if cond == nil || cond.Status == metav1.ConditionTrue || cond.Reason != kov1alpha1.RunNotOwnedReason ||
			!strings.Contains(cond.Message, jobA) || !strings.Contains(cond.Message, "was not started for this HostCluster") {
			t.Errorf("%s: GitOpsTreeGenerated = %+v, want False/RunNotOwned naming job %s", tc.what, cond, jobA)
		}
		// Failed is terminal: no pass acts on it until a retry.
		framework.Holds(t, tc.name+" is Failed, its tree never taken as generated", func() (bool, string) {
			hc := getHostCluster(t, tc.c, tc.name)
			return hc.Status.Phase == kov1alpha1.HostClusterPhaseFailed && !reconcile.IsTrue(hc, kov1alpha1.GitOpsTreeGeneratedCondition) &&
				!reconcile.IsTrue(hc, kov1alpha1.KubeOperaInstalledCondition), describeHC(hc)
		})
		if j := e.scaffold(t, own); j.Status != "running" {
			t.Errorf("%s: its own job %s is %q, want still running (cloning from the hung server)", tc.what, own, j.Status)
		}
	}
	// The owner's job and HostCluster are as they were.
	if j := e.scaffold(t, jobA); !j.Succeeded() || j.ClusterID != "jobowner1" || !j.BelongsTo(ownerLC, string(mine.UID)) {
		t.Errorf("the owner's job changed: %+v", j)
	}
	if hc := getHostCluster(t, owner, "mine"); hc.Status.Phase != kov1alpha1.HostClusterPhaseReady || hc.Annotations[kov1alpha1.ScaffoldJobIDAnnotation] != jobA {
		t.Errorf("the owner's HostCluster changed: %s", describeHC(hc))
	}
}
