package hostcluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/workspaces"
)

func fp(lc string) string { return workspaces.Fingerprint(lc) }

// This suite runs the HostCluster reconciler in process (test/framework/fleettest) on real kcp, a
// real backend and a real target kube-apiserver on which Flux's real source- and
// kustomize-controller run as processes (sim.FluxPods plays the kubelet that would run their
// Pods). The manager here has no gitops-scaffolder configured, as when GITOPS_SCAFFOLDER_BASE_URL
// is unset; the e2e suite runs the binary with one, through to Ready.

const giveUp = 6 * time.Second

type suite struct {
	h      *fleettest.Harness
	ws     client.Client
	target []byte // the target's admin kubeconfig
	// targetHost is the target API server's URL.
	targetHost string
	// targetC is an admin client of the target.
	targetC client.Client
}

func setup(t *testing.T) *suite {
	t.Helper()
	h := fleettest.Start(t, "acme")
	target := framework.StartBackend(t)
	dir := t.TempDir()
	kcPath := filepath.Join(dir, "target.kubeconfig")
	if err := devenv.WriteKubeconfig(target.Config, kcPath, "target"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(kcPath)
	if err != nil {
		t.Fatal(err)
	}
	fluxLog, err := os.Create(filepath.Join(dir, "flux.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fluxLog.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	pods := &sim.FluxPods{Target: target.Config, KubeconfigPath: kcPath, BinDir: framework.ToolsBin(), WorkDir: filepath.Join(dir, "flux"), Log: fluxLog}
	done := make(chan struct{})
	go func() { defer close(done); _ = pods.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	installer, err := flux.NewInstaller(flux.Options{ChartRef: framework.FluxChart(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&hostcluster.Reconciler{
		Workspaces:    h.Fleet,
		Backend:       h.BackendStore(),
		Flux:          installer,
		AccessGiveUp:  giveUp,
		PollInterval:  500 * time.Millisecond,
		TargetTimeout: 3 * time.Second,
		Guard:         h.Guard,
	}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)
	tc, err := client.New(target.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &suite{h: h, ws: h.WS["acme"], target: raw, targetHost: target.Config.Host, targetC: tc}
}

func (s *suite) secret(t *testing.T, name string, kubeconfig []byte) {
	t.Helper()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	if err := s.ws.Create(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) hostCluster(t *testing.T, name string, annotations map[string]string) {
	t.Helper()
	hc := &kov1alpha1.HostCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
		Spec: kov1alpha1.HostClusterSpec{
			ClusterID:                  name,
			Mode:                       kov1alpha1.HostClusterModeConnectExisting,
			Provider:                   "aws",
			Region:                     "eu-north-1",
			ConnectKubeconfigSecretRef: name + "-input",
			GitOpsRepoURL:              "https://git.example.com/gitops-iac.git",
			GitOpsPath:                 "fluxcd/clusters/" + name,
			Domain:                     name + ".acme.example.com",
		},
	}
	if err := s.ws.Create(t.Context(), hc); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) get(t *testing.T, name string) *kov1alpha1.HostCluster {
	t.Helper()
	hc := &kov1alpha1.HostCluster{}
	if err := s.ws.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, hc); err != nil {
		t.Fatal(err)
	}
	return hc
}

func describe(hc *kov1alpha1.HostCluster) string {
	var conds []string
	for _, c := range hc.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("phase %q message %q conditions %v", hc.Status.Phase, hc.Status.Message, conds)
}

// waitPhase waits for phase and returns the HostCluster.
func (s *suite) waitPhase(t *testing.T, name string, phase kov1alpha1.HostClusterPhase, timeout time.Duration) *kov1alpha1.HostCluster {
	t.Helper()
	var hc *kov1alpha1.HostCluster
	framework.Eventually(t, timeout, "HostCluster "+name+" "+string(phase), func() (bool, string) {
		hc = s.get(t, name)
		return hc.Status.Phase == phase, describe(hc)
	})
	return hc
}

func wantCondition(t *testing.T, hc *kov1alpha1.HostCluster, typ string, status metav1.ConditionStatus, reason, msgPart string) {
	t.Helper()
	c := reconcile.GetCondition(hc, typ)
	if c == nil {
		t.Fatalf("no %s condition: %s", typ, describe(hc))
	}
	if c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msgPart) {
		t.Fatalf("%s = %s/%s %q, want %s/%s containing %q", typ, c.Status, c.Reason, c.Message, status, reason, msgPart)
	}
}

// fileKubeconfig and execKubeconfig are otherwise valid kubeconfigs that would make the manager
// read one of its own files, or run a program.
const fileKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: /etc/kubernetes/pki/ca.crt}
users:
- name: u
  user: {client-certificate: /var/run/secrets/manager.crt, client-key: /var/run/secrets/manager.key}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`

const execKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "touch /tmp/pwned"]
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`

// unreachableKubeconfig points at a port nothing listens on.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`

func TestHostCluster(t *testing.T) {
	s := setup(t)
	t.Cleanup(func() {
		// The reconciler's log lines reach the suite's log (dumped when a test fails).
		if !strings.Contains(s.h.Log.String(), "Reconciling HostCluster") {
			t.Error("the manager's log holds no reconcile lines")
		}
	})

	t.Run("bad kubeconfigs fail at once with a specific message, and nothing is delivered", func(t *testing.T) {
		for name, tc := range map[string]struct{ kubeconfig, want string }{
			"garbage": {kubeconfig: "this is: [not a kubeconfig", want: "not valid"},
			"empty":   {kubeconfig: "  \n", want: "empty"},
			"exec":    {kubeconfig: execKubeconfig, want: "exec"},
			"files":   {kubeconfig: fileKubeconfig, want: "certificate-authority"},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				hcName := "bad-" + name
				s.secret(t, hcName+"-input", []byte(tc.kubeconfig))
				s.hostCluster(t, hcName, nil)
				hc := s.waitPhase(t, hcName, kov1alpha1.HostClusterPhaseFailed, time.Minute)
				wantCondition(t, hc, kov1alpha1.AccessValidatedCondition, metav1.ConditionFalse, kov1alpha1.InvalidKubeconfigReason, tc.want)
				wantCondition(t, hc, kov1alpha1.ReadyCondition, metav1.ConditionFalse, kov1alpha1.InvalidKubeconfigReason, tc.want)
				err := s.ws.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "hostcluster-" + hcName + "-kubeconfig"}, &corev1.Secret{})
				if !apierrors.IsNotFound(err) {
					t.Errorf("a refused kubeconfig was delivered (err %v)", err)
				}
			})
		}
	})
	if _, err := os.Stat("/tmp/pwned"); err == nil {
		t.Error("the exec plugin ran")
	}

	t.Run("provisioning without a provisioner configured fails at once, saying so", func(t *testing.T) {
		// This suite's manager has no CLUSTER_PROVISIONER_BASE_URL.
		hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "no-provisioner"}, Spec: kov1alpha1.HostClusterSpec{
			ClusterID: "no-provisioner", Mode: kov1alpha1.HostClusterModeProvisionEKS, Region: "eu-north-1",
			Provisioning:  &kov1alpha1.HostClusterProvisioning{Topology: kov1alpha1.TopologyEKS, NodeCount: 1, InstanceType: "t3.medium", KubernetesVersion: "1.31", CredentialRef: "aws"},
			GitOpsRepoURL: "https://git.example/gitops-iac.git", GitOpsPath: "fluxcd/clusters/no-provisioner", Domain: "no-provisioner.example.com"}}
		if err := s.ws.Create(t.Context(), hc); err != nil {
			t.Fatal(err)
		}
		hc = s.waitPhase(t, "no-provisioner", kov1alpha1.HostClusterPhaseFailed, time.Minute)
		wantCondition(t, hc, kov1alpha1.ProvisionedCondition, metav1.ConditionFalse, kov1alpha1.ProvisioningUnavailableReason, "CLUSTER_PROVISIONER_BASE_URL")
	})

	t.Run("an unreachable target is retried until the give-up time, then fails with the real error", func(t *testing.T) {
		s.secret(t, "far-input", []byte(unreachableKubeconfig))
		start := time.Now()
		s.hostCluster(t, "far", nil)
		hc := s.waitPhase(t, "far", kov1alpha1.HostClusterPhaseValidatingAccess, 30*time.Second)
		wantCondition(t, hc, kov1alpha1.AccessValidatedCondition, metav1.ConditionFalse, kov1alpha1.UnreachableReason, "retrying until")
		if hc.Annotations[kov1alpha1.ValidationStartedAnnotation] == "" {
			t.Errorf("the give-up start is not kept in annotation %s", kov1alpha1.ValidationStartedAnnotation)
		}
		hc = s.waitPhase(t, "far", kov1alpha1.HostClusterPhaseFailed, time.Minute)
		if took := time.Since(start); took < giveUp {
			t.Errorf("failed after %s, before the give-up time %s", took, giveUp)
		}
		wantCondition(t, hc, kov1alpha1.AccessValidatedCondition, metav1.ConditionFalse, kov1alpha1.UnreachableReason, "connection refused")
	})

	t.Run("the give-up start is read from the annotation, not kept in memory: an old start fails at once", func(t *testing.T) {
		s.secret(t, "restarted-input", []byte(unreachableKubeconfig))
		created := time.Now()
		s.hostCluster(t, "restarted", nil)
		hc := s.waitPhase(t, "restarted", kov1alpha1.HostClusterPhaseValidatingAccess, 30*time.Second)
		// What a restarted manager finds after the previous one tried for ten minutes: the
		// manager keeps nothing in memory, so the annotation alone must decide.
		hc.Annotations[kov1alpha1.ValidationStartedAnnotation] = time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
		if err := s.ws.Update(t.Context(), hc); err != nil {
			t.Fatal(err)
		}
		hc = s.waitPhase(t, "restarted", kov1alpha1.HostClusterPhaseFailed, 30*time.Second)
		wantCondition(t, hc, kov1alpha1.AccessValidatedCondition, metav1.ConditionFalse, kov1alpha1.UnreachableReason, "gave up")
		if took := time.Since(created); took >= giveUp {
			t.Errorf("failed after %s: the give-up time of its own attempt (%s), not the annotation's start", took, giveUp)
		}
	})

	t.Run("a target at a forbidden address fails at once, naming the class, and is never dialed", func(t *testing.T) {
		// The real target's API server behind a forwarder on the loopback alias 127.0.0.2, which
		// the guard denies (only 127.0.0.1/32 is allowed): what a tenant's kubeconfig naming any
		// internal address amounts to. And kcp's and the backend's own API servers.
		targetAddr := s.targetHost
		alias := framework.Forward(t, "127.0.0.2", targetAddr)
		t.Run("each fails", func(t *testing.T) {
			for name, tc := range map[string]struct{ server, class string }{
				"loopback-alias": {server: "https://" + alias.Addr, class: "(loopback)"},
				"kcp":            {server: s.h.KCP.Config.Host, class: "(a kcp shard)"},
				"backend":        {server: s.h.BackendAdmin.Host, class: "(the backend's API server)"},
			} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					hcName := "forbidden-" + name
					s.secret(t, hcName+"-input", framework.KubeconfigWithServer(t, s.target, tc.server, "127.0.0.1"))
					s.hostCluster(t, hcName, nil)
					hc := s.waitPhase(t, hcName, kov1alpha1.HostClusterPhaseFailed, time.Minute)
					wantCondition(t, hc, kov1alpha1.AccessValidatedCondition, metav1.ConditionFalse, kov1alpha1.ForbiddenAddressReason, "is at a forbidden address "+tc.class)
					wantCondition(t, hc, kov1alpha1.ReadyCondition, metav1.ConditionFalse, kov1alpha1.ForbiddenAddressReason, tc.server)
					// Not an unreachable target: failed at once, no retries until the give-up time.
					if v := hc.Annotations[kov1alpha1.ValidationStartedAnnotation]; v != "" {
						t.Errorf("the unreachable-target retry started (%s=%s)", kov1alpha1.ValidationStartedAnnotation, v)
					}
				})
			}
		})
		if n := alias.Seen(t); n != 0 {
			t.Errorf("the server behind 127.0.0.2 accepted %d connections, want none", n)
		}

		// The same HostCluster, its kubeconfig pointed at the same server through the allowed
		// 127.0.0.1 and retried, is reached: the forwarder counts, and the reconciler dials.
		allowed := framework.Forward(t, "127.0.0.1", targetAddr)
		sec := &corev1.Secret{}
		if err := s.ws.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "forbidden-loopback-alias-input"}, sec); err != nil {
			t.Fatal(err)
		}
		sec.Data["kubeconfig"] = framework.KubeconfigWithServer(t, s.target, "https://"+allowed.Addr, "127.0.0.1")
		if err := s.ws.Update(t.Context(), sec); err != nil {
			t.Fatal(err)
		}
		hc := s.get(t, "forbidden-loopback-alias")
		hc.Annotations = map[string]string{kov1alpha1.RetryAnnotation: "1"}
		if err := s.ws.Update(t.Context(), hc); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "forbidden-loopback-alias validated through 127.0.0.1", func() (bool, string) {
			hc := s.get(t, "forbidden-loopback-alias")
			return reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition), describe(hc)
		})
		if n := allowed.Seen(t); n == 0 {
			t.Error("the server behind 127.0.0.1 accepted no connection")
		}
		if n := alias.Seen(t); n != 0 {
			t.Errorf("the server behind 127.0.0.2 accepted %d connections, want none", n)
		}
	})

	t.Run("a give-up start the tenant set in the future is ignored: it still gives up", func(t *testing.T) {
		s.secret(t, "future-input", []byte(unreachableKubeconfig))
		created := time.Now()
		s.hostCluster(t, "future", nil)
		hc := s.waitPhase(t, "future", kov1alpha1.HostClusterPhaseValidatingAccess, 30*time.Second)
		// The annotation is the tenant's to write: a start in 2100 would never give up and retry
		// every two seconds for ever.
		hc.Annotations[kov1alpha1.ValidationStartedAnnotation] = "2100-01-01T00:00:00Z"
		if err := s.ws.Update(t.Context(), hc); err != nil {
			t.Fatal(err)
		}
		hc = s.waitPhase(t, "future", kov1alpha1.HostClusterPhaseFailed, time.Minute)
		wantCondition(t, hc, kov1alpha1.AccessValidatedCondition, metav1.ConditionFalse, kov1alpha1.UnreachableReason, "gave up")
		if took := time.Since(created); took < giveUp {
			t.Errorf("failed after %s, before the give-up time %s", took, giveUp)
		}
	})

	t.Run("a valid kubeconfig: inventory, Flux installed and healthy, then Failed because no scaffolder is configured", func(t *testing.T) {
		s.secret(t, "ok-input", s.target)
		s.hostCluster(t, "ok", nil)
		hc := s.waitPhase(t, "ok", kov1alpha1.HostClusterPhaseFailed, 4*time.Minute)
		wantCondition(t, hc, kov1alpha1.GitOpsTreeGeneratedCondition, metav1.ConditionFalse, kov1alpha1.ScaffolderNotConfiguredReason, "GITOPS_SCAFFOLDER_BASE_URL is not set")
		wantCondition(t, hc, kov1alpha1.AccessValidatedCondition, metav1.ConditionTrue, kov1alpha1.SucceededReason, "v1.36")
		wantCondition(t, hc, kov1alpha1.FluxReadyCondition, metav1.ConditionTrue, kov1alpha1.FluxInstalledReason, "healthy")
		if !hc.Status.FluxHealthy {
			t.Error("status.fluxHealthy is false")
		}
		inv := hc.Status.Inventory
		if inv == nil || !strings.HasPrefix(inv.KubernetesVersion, "v1.36") || inv.Provider != "unknown" || inv.Nodes != "0/0" {
			t.Errorf("inventory = %+v, want version v1.36.x, provider unknown (no nodes, no cloud controller), nodes 0/0", inv)
		}
		sec := &corev1.Secret{}
		if err := s.ws.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "hostcluster-ok-kubeconfig"}, sec); err != nil {
			t.Fatalf("kubeconfig not delivered: %v", err)
		}
		if string(sec.Data["kubeconfig"]) != string(s.target) {
			t.Error("the delivered kubeconfig is not the one supplied (its server must be kept as supplied)")
		}
		stored := &corev1.Secret{}
		if err := s.h.Backend.Get(t.Context(), client.ObjectKey{Namespace: "kcp-" + fp(s.h.LC["acme"]), Name: "hostcluster-ok-kubeconfig"}, stored); err != nil {
			t.Fatalf("kubeconfig not stored on the backend: %v", err)
		}
		if stored.Labels[kov1alpha1.HostClusterIDLabel] != "ok" || stored.Labels[kov1alpha1.ManagedByLabel] != "host-cluster-controller" {
			t.Errorf("stored kubeconfig labels = %v", stored.Labels)
		}
	})

	t.Run("a target that stops answering: Ready False Unreachable, health unknown; back when it answers", func(t *testing.T) {
		// A second target without Flux's controllers, so the HostCluster waits in
		// BootstrappingFlux and is looked at every poll interval, reached through a forwarder
		// the test cuts as an outage would.
		other := framework.StartCluster(t, framework.ClusterOptions{})
		kcPath := filepath.Join(t.TempDir(), "other.kubeconfig")
		if err := devenv.WriteKubeconfig(other.Config, kcPath, "other"); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(kcPath)
		if err != nil {
			t.Fatal(err)
		}
		fwd := framework.Forward(t, "127.0.0.1", other.Config.Host)
		server := "https://" + fwd.Addr
		s.secret(t, "outage-input", framework.KubeconfigWithServer(t, raw, server, "127.0.0.1"))
		s.hostCluster(t, "outage", nil)
		framework.Eventually(t, 2*time.Minute, "outage read", func() (bool, string) {
			hc := s.get(t, "outage")
			inv := hc.Status.Inventory
			return inv != nil && inv.HealthScore != nil && reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition), describe(hc)
		})
		if hc := s.get(t, "outage"); hc.Status.Inventory.HealthBand != "green" || *hc.Status.Inventory.HealthScore != 100 {
			t.Errorf("inventory before the outage: %+v", hc.Status.Inventory)
		}

		cut := time.Now()
		fwd.Cut()
		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 30*time.Second, "outage Unreachable", func() (bool, string) {
			hc = s.get(t, "outage")
			c := reconcile.GetCondition(hc, kov1alpha1.ReadyCondition)
			return c != nil && c.Reason == kov1alpha1.UnreachableReason, describe(hc)
		})
		wantCondition(t, hc, kov1alpha1.ReadyCondition, metav1.ConditionFalse, kov1alpha1.UnreachableReason, "API server "+server+" unreachable since ")
		wantCondition(t, hc, kov1alpha1.AccessValidatedCondition, metav1.ConditionFalse, kov1alpha1.UnreachableReason, "(connection refused)")
		inv := hc.Status.Inventory
		if inv.UnreachableSince == nil || inv.UnreachableSince.Time.Before(cut.Truncate(time.Second)) || inv.HealthScore != nil || inv.HealthBand != "unknown" || len(inv.HealthPenalties) != 0 {
			t.Errorf("inventory while unreachable: since %v score %v band %q penalties %v; want since the cut, no score, band unknown", inv.UnreachableSince, inv.HealthScore, inv.HealthBand, inv.HealthPenalties)
		}
		if msg := reconcile.GetCondition(hc, kov1alpha1.ReadyCondition).Message; strings.Contains(msg, "dial tcp") || strings.Contains(msg, other.Config.Host) {
			t.Errorf("the message quotes the error or the address behind the server: %q", msg)
		}
		if hc.Status.Phase != kov1alpha1.HostClusterPhaseBootstrappingFlux {
			t.Errorf("phase %s, want it kept (BootstrappingFlux) while it is retried", hc.Status.Phase)
		}

		// Back within the give-up time: Ready's reason is no longer Unreachable, and the health
		// is read again at once.
		fwd.Restore(t)
		framework.Eventually(t, 30*time.Second, "outage reached again", func() (bool, string) {
			hc = s.get(t, "outage")
			inv := hc.Status.Inventory
			return reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition) && inv.UnreachableSince == nil && inv.HealthScore != nil, describe(hc)
		})
		if c := reconcile.GetCondition(hc, kov1alpha1.ReadyCondition); c.Reason == kov1alpha1.UnreachableReason {
			t.Errorf("Ready still says Unreachable: %+v", c)
		}
		if hc.Status.Inventory.HealthBand != "green" {
			t.Errorf("health band %q after the outage, want green", hc.Status.Inventory.HealthBand)
		}
	})

	t.Run("a refused kubeconfig, fixed and retried, goes on", func(t *testing.T) {
		hc := s.get(t, "bad-garbage")
		sec := &corev1.Secret{}
		if err := s.ws.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "bad-garbage-input"}, sec); err != nil {
			t.Fatal(err)
		}
		sec.Data["kubeconfig"] = s.target
		if err := s.ws.Update(t.Context(), sec); err != nil {
			t.Fatal(err)
		}
		// Nothing happens until the tenant asks: Failed is terminal.
		framework.Consistently(t, 2*time.Second, "bad-garbage stays Failed", func() (bool, string) {
			hc := s.get(t, "bad-garbage")
			return hc.Status.Phase == kov1alpha1.HostClusterPhaseFailed, describe(hc)
		})
		hc.Annotations = map[string]string{kov1alpha1.RetryAnnotation: "1"}
		if err := s.ws.Update(t.Context(), hc); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "bad-garbage validated after the retry", func() (bool, string) {
			hc := s.get(t, "bad-garbage")
			return reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition), describe(hc)
		})
	})

	t.Run("deletion is a disconnect: the platform's Secrets go, the target keeps everything", func(t *testing.T) {
		before := &corev1.NamespaceList{}
		if err := s.targetC.List(t.Context(), before); err != nil {
			t.Fatal(err)
		}
		deploys := &appsv1.DeploymentList{}
		if err := s.targetC.List(t.Context(), deploys, client.InNamespace(flux.Namespace)); err != nil || len(deploys.Items) == 0 {
			t.Fatalf("Flux's Deployments on the target: %d (err %v)", len(deploys.Items), err)
		}
		if err := s.ws.Delete(t.Context(), s.get(t, "ok")); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, "HostCluster ok gone", func() (bool, string) {
			err := s.ws.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "ok"}, &kov1alpha1.HostCluster{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		err := s.h.Backend.Get(t.Context(), client.ObjectKey{Namespace: "kcp-" + fp(s.h.LC["acme"]), Name: "hostcluster-ok-kubeconfig"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("stored kubeconfig still on the backend (err %v)", err)
		}
		after := &appsv1.DeploymentList{}
		if err := s.targetC.List(t.Context(), after, client.InNamespace(flux.Namespace)); err != nil {
			t.Fatal(err)
		}
		if len(after.Items) != len(deploys.Items) {
			t.Errorf("Flux Deployments on the target: %d before, %d after the disconnect", len(deploys.Items), len(after.Items))
		}
		nss := &corev1.NamespaceList{}
		if err := s.targetC.List(t.Context(), nss); err != nil {
			t.Fatal(err)
		}
		for _, ns := range nss.Items {
			if ns.DeletionTimestamp != nil {
				t.Errorf("namespace %s on the target is being deleted", ns.Name)
			}
		}
		if len(nss.Items) != len(before.Items) {
			t.Errorf("target namespaces: %d before, %d after", len(before.Items), len(nss.Items))
		}
	})
}
