package localenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	platformv1alpha1 "github.com/kubeopera/kubeopera/apis/platform/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/internal/overview"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/test/framework"
)

// syncBuffer is a bytes.Buffer safe for a process writing and the test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLocalEnvironment runs what `make run` runs (bin/devenv) in a temporary state directory and
// follows the walkthroughs it prints: apply the sample Tenant in root:orgs:demo through the "demo"
// context, play the vCluster, wait for Ready; connect the local target (HostCluster); provision
// a cluster (the provisioned HostCluster sample, with the AWS credential from bin/devenv
// aws-credentials and node 0 played by bin/devenv simulate-control-plane) to Ready; the
// KubernetesCluster demo; then Ctrl-C and check that everything stopped.
func TestLocalEnvironment(t *testing.T) {
	// It starts its own servers, or only reads the shared ones: it runs beside the parallel tests.
	t.Parallel()
	framework.SkipWithoutServers(t)
	bin, state, ports, env := newLocalEnv(t)
	first := startDevenv(t, bin, state, env)
	if !strings.Contains(first.out.String(), "vCluster chart "+framework.VClusterChart()) {
		t.Errorf("devenv did not say it uses the vCluster chart it was given (%s):\n%s", framework.VClusterChart(), first.out.String())
	}

	// The tenant's commands, with the paths it printed.
	kubeconfig := filepath.Join(state, "kcp.kubeconfig")
	demo := demoClient(t, kubeconfig)
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", "tenant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tn := &kov1alpha1.Tenant{}
	if err := yaml.UnmarshalStrict(raw, tn); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	framework.Eventually(t, 2*time.Minute, "the sample Tenant applied in root:orgs:demo", func() (bool, string) {
		err := demo.Create(ctx, tn.DeepCopy())
		return err == nil, fmt.Sprint(err)
	})
	// The real vCluster runs (the suite runs as root) and writes its kubeconfig; the walkthrough
	// ends with the tenant's kubectl on the delivered kubeconfig listing the vCluster's
	// namespaces, through the address the played load balancer gave it.
	if !strings.Contains(first.out.String(), "vCluster runs for real") || !strings.Contains(first.out.String(), "kubectl --kubeconfig alice.kubeconfig get namespaces") {
		t.Errorf("devenv did not say the vClusters run for real and how to use the kubeconfig:\n%s", first.out.String())
	}
	ready := waitPhaseWithin(t, demo, tn.Namespace, tn.Name, kov1alpha1.TenantPhaseReady, 5*time.Minute)
	if ready.Status.KubeconfigSecret == "" || !strings.HasPrefix(ready.Status.Endpoint, "https://127.") {
		t.Errorf("status names kubeconfig Secret %q and endpoint %q, want a Secret and the load balancer's loopback address", ready.Status.KubeconfigSecret, ready.Status.Endpoint)
	}
	delivered := &corev1.Secret{}
	if err := demo.Get(ctx, client.ObjectKey{Namespace: tn.Namespace, Name: ready.Status.KubeconfigSecret}, delivered); err != nil {
		t.Fatal(err)
	}
	if out, err := framework.Kubectl(ctx, t, delivered.Data["kubeconfig"], nil, "get", "namespaces"); err != nil || !strings.Contains(out, "kube-system") {
		t.Errorf("kubectl --kubeconfig <delivered> get namespaces: %q, %v", out, err)
	}

	// The HostCluster walkthrough it printed: the Secrets from bin/devenv hostcluster-secrets,
	// the sample HostCluster (pointed at this run's git port), Ready with the admin password.
	if !strings.Contains(first.out.String(), "Started the local git server") || !strings.Contains(first.out.String(), "the gitops-scaffolder: http://") {
		t.Errorf("devenv did not say it started the git server and the gitops-scaffolder:\n%s", first.out.String())
	}
	secrets := exec.Command(filepath.Join(bin, "devenv"), "hostcluster-secrets")
	secrets.Dir, secrets.Env = framework.RepoRoot(), env
	out, err := secrets.Output()
	if err != nil {
		t.Fatalf("hostcluster-secrets: %v", err)
	}
	for _, doc := range strings.Split(string(out), "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := demo.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	raw, err = os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", "hostcluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &kov1alpha1.HostCluster{}
	if err := yaml.UnmarshalStrict(raw, hc); err != nil {
		t.Fatal(err)
	}
	hc.Spec.GitOpsRepoURL = strings.Replace(hc.Spec.GitOpsRepoURL, "127.0.0.1:8090", "127.0.0.1:"+strconv.Itoa(ports[1]), 1)
	if err := demo.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	readyHC := waitHostClusterPhaseIn(t, demo, hc.Namespace, hc.Name, kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	pw := &corev1.Secret{}
	if err := demo.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: readyHC.Status.AdminPasswordSecretRef}, pw); err != nil || len(pw.Data["password"]) == 0 {
		t.Errorf("admin password not delivered: %v", err)
	}

	walkProvisioning(t, bin, state, env, first, demo, ports[1])

	// The KubernetesCluster demo it printed: the catalog is visible, the seed's demo objects
	// applied, Crossplane played by bin/devenv simulate-crossplane, Ready with the kubeconfig.
	flavors := &platformv1alpha1.ProviderMachineFlavorList{}
	framework.Eventually(t, 2*time.Minute, "the sample catalog in root:orgs:demo", func() (bool, string) {
		err := demo.List(ctx, flavors)
		return err == nil && len(flavors.Items) > 10, fmt.Sprintf("%d flavors, %v", len(flavors.Items), err)
	})
	// And the AWS sample: a ManagedCluster composite, composed by the Composition make run installed.
	for _, sample := range []string{"kubernetescluster-demo.yaml", "kubernetescluster-aws.yaml"} {
		raw, err = os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", sample))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifests.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := demo.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create %s %s from %s: %v", o.GetKind(), o.GetName(), sample, err)
			}
		}
	}
	xp := exec.Command(filepath.Join(bin, "devenv"), "simulate-crossplane")
	xp.Dir, xp.Env = framework.RepoRoot(), env
	xpOut := &syncBuffer{}
	xp.Stdout, xp.Stderr = xpOut, xpOut
	if err := xp.Start(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []client.ObjectKey{{Namespace: "demo", Name: "my-cluster"}, {Namespace: "demo-aws", Name: "eks-cluster"}} {
		framework.Eventually(t, 3*time.Minute, "the demo KubernetesCluster "+key.String()+" Ready", func() (bool, string) {
			kc := &platformv1alpha1.KubernetesCluster{}
			if err := demo.Get(ctx, key, kc); err != nil {
				return false, err.Error()
			}
			return kc.Status.Phase == platformv1alpha1.KubernetesClusterPhaseReady, fmt.Sprintf("%s %v", kc.Status.Phase, kc.Status.Conditions)
		})
		if err := demo.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name + "-kubeconfig"}, &corev1.Secret{}); err != nil {
			t.Errorf("the demo cluster %s's kubeconfig was not delivered: %v", key, err)
		}
	}
	_ = xp.Process.Signal(syscall.SIGINT)
	if err := xp.Wait(); err != nil {
		t.Errorf("simulate-crossplane did not stop cleanly on Ctrl-C: %v\n%s", err, xpOut.String())
	}

	walkFleetOverview(t, bin, state, env, first, ports[4])

	// Ctrl-C stops everything.
	first.stop(t)
	ps, _ := exec.Command("pgrep", "-f", state).Output()
	if len(bytes.TrimSpace(ps)) > 0 {
		t.Errorf("processes of the environment still run after Ctrl-C: %s", ps)
	}

	// A second run reuses what is stored (the workspaces and the Tenant) and, with
	// BACKEND_KUBECONFIG, uses that cluster as the backend: the Tenant's vCluster is provisioned
	// there.
	external := framework.StartBackend(t)
	second := startDevenv(t, bin, state, append(env, "BACKEND_KUBECONFIG="+external.KubeconfigPath))
	if !strings.Contains(second.out.String(), "Using the backend cluster of BACKEND_KUBECONFIG") {
		t.Errorf("devenv did not say it uses BACKEND_KUBECONFIG:\n%s", second.out.String())
	}
	if !strings.Contains(second.out.String(), "no provisioner is started") {
		t.Errorf("devenv did not say it starts no provisioner with BACKEND_KUBECONFIG:\n%s", second.out.String())
	}
	// kcp issues a new admin token at every start; the tenant's kubeconfig file is rewritten.
	demo = demoClient(t, kubeconfig)
	again := &kov1alpha1.Tenant{}
	if err := demo.Get(ctx, client.ObjectKeyFromObject(tn), again); err != nil || again.UID != ready.UID {
		t.Fatalf("the Tenant of the first run was not kept: %v", err)
	}
	ext, err := client.New(external.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the vCluster release on the BACKEND_KUBECONFIG cluster", func() (bool, string) {
		list := &corev1.SecretList{}
		if err := ext.List(ctx, list, client.MatchingLabels{"owner": "helm", "name": "vc-" + tn.Spec.TenantName}); err != nil {
			return false, err.Error()
		}
		return len(list.Items) > 0, fmt.Sprintf("%d release revisions", len(list.Items))
	})
	second.stop(t)
}

// walkProvisioning follows the provisioning walkthrough make run printed (README, "Provisioning
// a cluster on AWS"): the AWS credential from bin/devenv aws-credentials, the provisioned sample
// (pointed at this run's git port), node 0 played by bin/devenv simulate-control-plane; the
// HostCluster is provisioned by one run of the real provisioner and runner and goes on to Ready
// with the kubeconfig node 0 published.
func walkProvisioning(t *testing.T, bin, state string, env []string, run *runningDevenv, demo client.Client, gitPort int) {
	t.Helper()
	ctx := context.Background()
	out := run.out.String()
	if _, err := exec.LookPath("terraform"); err != nil {
		if !strings.Contains(out, "terraform is not on PATH: provisioning is NOT started") {
			t.Errorf("without terraform, devenv did not say provisioning is not started:\n%s", out)
		}
		t.Log("terraform is not on PATH: the provisioning walkthrough is skipped")
		return
	}
	if !strings.Contains(out, "Started the cluster provisioner") || !strings.Contains(out, "bin/devenv simulate-control-plane") {
		t.Fatalf("devenv did not say it started the provisioner, or print the provisioning walkthrough:\n%s", out)
	}
	for _, f := range []string{"api-key", "provisioning.json"} {
		fi, err := os.Stat(filepath.Join(state, "provisioning", f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi)
		}
	}
	devenvCmd := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "devenv"), args...)
		cmd.Dir, cmd.Env = framework.RepoRoot(), env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("devenv %s: %v\n%s%s", strings.Join(args, " "), err, b, stderr.String())
		}
		return b
	}
	// bin/devenv aws-credentials | kubectl --context demo apply -f -
	creds := devenvCmd("aws-credentials")
	var credential *corev1.Secret
	for _, doc := range strings.Split(string(creds), "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Secret" {
			credential = &corev1.Secret{}
			if err := yaml.Unmarshal([]byte(doc), credential); err != nil {
				t.Fatal(err)
			}
		}
		if err := demo.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if credential == nil || credential.Name != "aws-credentials" || credential.Labels["kubeopera.io/platform-access"] != "true" ||
		!strings.HasPrefix(credential.StringData["access_key"], "AKIA") || credential.StringData["secret_key"] == "" {
		t.Fatalf("aws-credentials printed no usable credential Secret:\n%s", creds)
	}

	// kubectl --context demo apply -f config/samples/hostcluster-provisioned.yaml
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "samples", "hostcluster-provisioned.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &kov1alpha1.HostCluster{}
	if err := yaml.UnmarshalStrict(raw, hc); err != nil {
		t.Fatal(err)
	}
	hc.Spec.GitOpsRepoURL = strings.Replace(hc.Spec.GitOpsRepoURL, "127.0.0.1:8090", "127.0.0.1:"+strconv.Itoa(gitPort), 1)
	if err := demo.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	// The run starts and waits for node 0; then bin/devenv simulate-control-plane plays it.
	waitHostClusterPhaseIn(t, demo, hc.Namespace, hc.Name, kov1alpha1.HostClusterPhaseProvisioning, 2*time.Minute)
	// The parameter is under the demo workspace's fingerprint (api.SSMPrefix).
	if b := devenvCmd("simulate-control-plane", hc.Spec.ClusterID); !regexp.MustCompile(`/kubeopera/[0-9a-f]{12}/` + regexp.QuoteMeta(hc.Spec.ClusterID) + `/admin_kubeconfig`).Match(b) {
		t.Errorf("simulate-control-plane did not name the parameter it wrote:\n%s", b)
	}
	ready := waitHostClusterPhaseIn(t, demo, hc.Namespace, hc.Name, kov1alpha1.HostClusterPhaseReady, 5*time.Minute)
	for _, cond := range []string{kov1alpha1.ProvisionedCondition, kov1alpha1.AccessValidatedCondition, kov1alpha1.FluxReadyCondition, kov1alpha1.KubeOperaInstalledCondition} {
		if c := meta.FindStatusCondition(ready.Status.Conditions, cond); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("condition %s of the provisioned HostCluster: %+v", cond, c)
		}
	}
	if len(ready.Status.ProvisionRuns) != 1 || ready.Status.ProvisionRuns[0].Outcome != string(api.StatusSucceeded) {
		t.Errorf("want one succeeded run, got %+v", ready.Status.ProvisionRuns)
	}
	delivered := &corev1.Secret{}
	if err := demo.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: "hostcluster-" + hc.Spec.ClusterID + "-kubeconfig"}, delivered); err != nil {
		t.Fatal(err)
	}
	adminConf, err := os.ReadFile(filepath.Join(state, "target", "target.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(delivered.Data["kubeconfig"], adminConf) {
		t.Error("the delivered kubeconfig is not the admin.conf simulate-control-plane published")
	}
	// The run is a Job on the backend, and its output is kept in the logs.
	framework.Eventually(t, 30*time.Second, "the run's log copied to logs/runs", func() (bool, string) {
		logs, _ := filepath.Glob(filepath.Join(state, "logs", "runs", "provision-*.log"))
		return len(logs) == 1, fmt.Sprint(logs)
	})
}

// waitHostClusterPhaseIn waits for a HostCluster in namespace to reach phase.
func waitHostClusterPhaseIn(t *testing.T, c client.Client, namespace, name string, phase kov1alpha1.HostClusterPhase, timeout time.Duration) *kov1alpha1.HostCluster {
	t.Helper()
	hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return framework.EventuallyObject(t, c, hc, timeout, "HostCluster "+name+" "+string(phase), func(hc *kov1alpha1.HostCluster) (bool, string) {
		return hc.Status.Phase == phase, describe(string(hc.Status.Phase), hc.Status.Message, hc.Status.Conditions)
	})
}

// waitPhase waits for a Tenant to reach phase.
func waitPhase(t *testing.T, c client.Client, namespace, name string, phase kov1alpha1.TenantPhase) *kov1alpha1.Tenant {
	t.Helper()
	return waitPhaseWithin(t, c, namespace, name, phase, 2*time.Minute)
}

// waitPhaseWithin is waitPhase with a timeout of its own.
func waitPhaseWithin(t *testing.T, c client.Client, namespace, name string, phase kov1alpha1.TenantPhase, timeout time.Duration) *kov1alpha1.Tenant {
	t.Helper()
	tn := &kov1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return framework.EventuallyObject(t, c, tn, timeout, "Tenant "+name+" "+string(phase), func(tn *kov1alpha1.Tenant) (bool, string) {
		return tn.Status.Phase == phase, describe(string(tn.Status.Phase), tn.Status.Message, tn.Status.Conditions)
	})
}

// describe is what a wait shows of an object's status when it times out.
func describe(phase, message string, conditions []metav1.Condition) string {
	var conds []string
	for _, c := range conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s(%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %q message %q conditions %v", phase, message, conds)
}

// buildCommands puts the named commands of cmd/, built once for the run (framework.Commands),
// into dir and returns dir.
func buildCommands(t *testing.T, dir string, cmds ...string) string {
	t.Helper()
	if _, err := framework.Commands(dir, cmds...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runningDevenv is a started bin/devenv.
type runningDevenv struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// startDevenv starts bin/devenv with env and waits until it says the environment is running.
func startDevenv(t *testing.T, bin, state string, env []string) *runningDevenv {
	t.Helper()
	r := &runningDevenv{cmd: exec.Command(filepath.Join(bin, "devenv")), out: &syncBuffer{}, done: make(chan error, 1)}
	r.cmd.Dir, r.cmd.Env, r.cmd.Stdout, r.cmd.Stderr = framework.RepoRoot(), env, r.out, r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("devenv output:\n%s", r.out.String())
			if raw, err := os.ReadFile(filepath.Join(state, "logs", "manager.log")); err == nil {
				if len(raw) > 10000 {
					raw = raw[len(raw)-10000:]
				}
				t.Logf("manager log tail:\n%s", raw)
			}
		}
	})
	framework.Eventually(t, 5*time.Minute, "the environment to be up", func() (bool, string) {
		select {
		case err := <-r.done:
			t.Fatalf("devenv exited early: %v", err)
		default:
		}
		return strings.Contains(r.out.String(), "KubeOpera is running"), ""
	})
	return r
}

// stop sends Ctrl-C and waits for devenv to exit cleanly.
func (r *runningDevenv) stop(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("devenv exited with %v after Ctrl-C", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("devenv did not stop within 90s of Ctrl-C")
	}
}

// demoClient is the tenant's client of root:orgs:demo, from the "demo" context of kubeconfig.
func demoClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: "demo"}).ClientConfig()
	if err != nil {
		t.Fatalf("%s has no usable demo context: %v", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// walkFleetOverview follows what make run printed about the fleet overview: the admin registers
// the backend as the host with the printed command, then the page and its JSON (loopback, plain
// HTTP, as in make run) show the host and the HostClusters the walk made Ready.
func walkFleetOverview(t *testing.T, bin, state string, env []string, run *runningDevenv, port int) {
	t.Helper()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if !strings.Contains(run.out.String(), "Fleet overview for platform admins") || !strings.Contains(run.out.String(), base+"/") {
		t.Errorf("make run did not print the fleet overview's URL %s:\n%s", base, run.out.String())
	}
	reg := exec.Command(filepath.Join(bin, "manager"), "register-host",
		"--kcp-kubeconfig", filepath.Join(state, "kcp.kubeconfig"), "--kcp-context", "user",
		"--backend-kubeconfig", filepath.Join(state, "manager-backend.kubeconfig"))
	reg.Dir, reg.Env = framework.RepoRoot(), env
	if out, err := reg.CombinedOutput(); err != nil || !strings.Contains(string(out), "as the host") {
		t.Fatalf("manager register-host: %v\n%s", err, out)
	}
	var fleet struct {
		Clusters []overview.Cluster `json:"clusters"`
	}
	framework.Eventually(t, time.Minute, "the fleet JSON lists the host and the Ready HostCluster with its health", func() (bool, string) {
		resp, err := http.Get(base + "/v1/fleet")
		if err != nil {
			return false, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("%d %s", resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &fleet); err != nil {
			return false, err.Error()
		}
		host, ready := false, false
		for _, c := range fleet.Clusters {
			host = host || (c.IsHost && c.Phase == overview.PhaseRegistered && c.Health != nil)
			ready = ready || (c.Name == "my-cluster" && c.Phase == "Ready" && c.Health != nil)
		}
		return host && ready, string(body)
	})
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	page, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Fleet overview") || !strings.Contains(string(page), "my-cluster") {
		t.Errorf("GET %s/: %d\n%s", base, resp.StatusCode, page)
	}
}

// newLocalEnv prepares a run of bin/devenv as make run does it, in a temporary directory: the
// commands it runs (built once for the test run), its state directory, five free ports (kcp,
// git, scaffolder, provisioner, fleet overview) and the environment naming them.
func newLocalEnv(t *testing.T) (bin, state string, ports []int, env []string) {
	t.Helper()
	dir := t.TempDir()
	bin = buildCommands(t, filepath.Join(dir, "bin"), "manager", "devenv", "terraform-runner", "scaffold-runner")
	ports, err := devenv.ReservedPorts(5)
	if err != nil {
		t.Fatal(err)
	}
	state = filepath.Join(dir, "state")
	env = append(os.Environ(), "KUBEOPERA_DEV_DIR="+state, "KUBEOPERA_BIN_DIR="+bin, "KCP_PORT="+strconv.Itoa(ports[0]), "BACKEND_KUBECONFIG=",
		"KUBEOPERA_GIT_PORT="+strconv.Itoa(ports[1]), "KUBEOPERA_SCAFFOLDER_PORT="+strconv.Itoa(ports[2]),
		"KUBEOPERA_PROVISIONER_PORT="+strconv.Itoa(ports[3]), "KUBEOPERA_FLEET_OVERVIEW_PORT="+strconv.Itoa(ports[4]),
		// The repo's chart: no registry off this machine is asked whether the default one is
		// reachable (a test sends nothing off the machine, not even a DNS query).
		"VCLUSTER_CHART="+framework.VClusterChart(), "VCLUSTER_CHART_VERSION=")
	return bin, state, ports, env
}
