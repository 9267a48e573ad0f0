package hostcluster_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/kubeconfig"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	pclient "github.com/kubeopera/kubeopera/internal/provisioner/client"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/test/sim/provisioning"
	"github.com/kubeopera/kubeopera/workspaces"
)

// This suite provisions HostClusters through the real parts: the HostCluster reconciler (in
// process, with the manager's shipped backend identity) and test/sim/provisioning (the
// real provisioner, the real runner binary with the real terraform in the Job's Pod, S3, SSM and
// STS played by sim.AWS, and a module of terraform_data stand-ins for what AWS would build: see
// its doc). sim.AWS's SSM plays the control-plane node publishing its admin.conf, which points at a
// real kube-apiserver standing in for the new cluster.

const provisionerKey = "provisioner-test-key"

type provisionSuite struct {
	h      *fleettest.Harness
	pe     *provisioning.Env
	aws    *sim.AWS
	runner *sim.RunnerJobs
	admin  kubernetes.Interface
	// adminConf is the admin kubeconfig of the cluster a vanilla run "builds", and target that
	// cluster's admin config.
	adminConf []byte
	target    *rest.Config
	user      sim.AWSCredentials
	// url is the provisioner's API.
	url string
	// eks is the API server the EKS runs "build", eksAuth its AWS IAM authenticator (cluster
	// name eksClusterName).
	eks     *framework.Cluster
	eksAuth *sim.EKSAuthenticator
	// roleOnlyAuth is the authenticator of the EKS cluster eksRoleOnlyName.
	roleOnlyAuth *sim.EKSAuthenticator
}

// eksRoleOnlyName is the EKS cluster of a tenant whose credential is a role only, and
// eksRoleOnlyRole that role, which its cluster maps to system:masters.
const (
	eksRoleOnlyName = "eks-2"
	eksRoleOnlyRole = "arn:aws:iam::" + sim.AWSAccountID + ":role/eks-role-only"
)

// eksClusterName is the EKS cluster whose tokens the EKS stand-in's authenticator accepts.
const eksClusterName = "eks-1"

// eksAdminRole is the IAM role the EKS stand-in maps to system:masters.
const eksAdminRole = "arn:aws:iam::" + sim.AWSAccountID + ":role/eks-admin"

func terraformAvailable(t *testing.T) string {
	t.Helper()
	path, err := provisioning.Terraform(framework.RepoRoot())
	if err != nil {
		t.Skip(err.Error())
	}
	return path
}

// setupProvisioning starts the suite with a tenant workspace per name and the reconciler's cap
// on runs per workspace and hour (0: none).
func setupProvisioning(t *testing.T, maxRunsPerHour int, workspaceNames ...string) *provisionSuite {
	t.Helper()
	terraformAvailable(t)
	h := fleettest.Start(t, workspaceNames...)
	ctx := t.Context()

	// The cluster a run builds: a real API server; its admin.conf is what node 0 publishes to
	// SSM, its CA what an EKS run's outputs name.
	target := framework.StartCluster(t, framework.ClusterOptions{})
	kcPath := filepath.Join(t.TempDir(), "admin.conf")
	if err := devenv.WriteKubeconfig(target.Config, kcPath, "provisioned"); err != nil {
		t.Fatal(err)
	}
	adminConf, err := os.ReadFile(kcPath)
	if err != nil {
		t.Fatal(err)
	}
	pe, err := provisioning.Start(ctx, provisioning.Options{Backend: h.BackendAdmin, Root: framework.RepoRoot(), RunnerBinary: framework.MustCommand(t, "terraform-runner"),
		APIKey: provisionerKey, ClusterCA: target.Config.CAData, SSMPollInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pe.Stop)
	pc, err := pclient.New(pe.URL, provisionerKey)
	if err != nil {
		t.Fatal(err)
	}
	installer, err := flux.NewInstaller(flux.Options{ChartRef: framework.FluxChart(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The cluster an EKS run builds: a real API server whose bearer tokens are checked by the EKS
	// control plane's AWS IAM authenticator (played by sim.EKSAuthenticator against sim.AWS's
	// STS), so the HostCluster reaches it only with a valid EKS token for eksClusterName.
	// The cluster's name in AWS is the workspace's (api.ClusterName): the EKS runs are acme's.
	eksAuth := &sim.EKSAuthenticator{ClusterID: api.ClusterName(workspaces.Fingerprint(h.LC["acme"]), eksClusterName), Endpoint: pe.AWS.URL,
		Users: map[string]sim.EKSUser{eksAdminRole: {Username: "kubeopera-admin", Groups: []string{"system:masters"}}}}
	eksAuth.Start(t)
	eks := framework.StartCluster(t, framework.ClusterOptions{APIServerArgs: eksAuth.APIServerArgs()})
	for _, id := range []string{eksClusterName, provisioning.ProtectedPrefix + "1"} {
		pe.ServeEKS(id, eks.Config.Host, eks.Config.CAData)
	}
	// A second EKS cluster, for a tenant who gives a role only: its own authenticator, which maps
	// that role.
	roleOnlyAuth := &sim.EKSAuthenticator{ClusterID: api.ClusterName(workspaces.Fingerprint(h.LC["acme"]), eksRoleOnlyName), Endpoint: pe.AWS.URL,
		Users: map[string]sim.EKSUser{eksRoleOnlyRole: {Username: "kubeopera-admin", Groups: []string{"system:masters"}}}}
	roleOnlyAuth.Start(t)
	roleOnly := framework.StartCluster(t, framework.ClusterOptions{APIServerArgs: roleOnlyAuth.APIServerArgs()})
	pe.ServeEKS(eksRoleOnlyName, roleOnly.Config.Host, roleOnly.Config.CAData)
	// The manager mints EKS tokens in process against the suite's AWS (--aws-endpoint-url); its
	// own AWS identity (--aws-platform-identity) is the platform's, the one the runs' Pods have.
	if err := (&hostcluster.Reconciler{Workspaces: h.Fleet, Backend: h.BackendStore(), Flux: installer, Provisioner: pc,
		PollInterval: 300 * time.Millisecond, AccessGiveUp: 20 * time.Second, Guard: h.Guard, AWSEndpointURL: pe.AWS.URL,
		PlatformAWS:    credentials.NewStaticCredentialsProvider(pe.Platform.AccessKeyID, pe.Platform.SecretAccessKey, ""),
		MaxRunsPerHour: maxRunsPerHour}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)
	return &provisionSuite{h: h, pe: pe, aws: pe.AWS, runner: pe.Runner, admin: kubernetes.NewForConfigOrDie(h.BackendAdmin), adminConf: adminConf, target: target.Config,
		user: pe.AWS.AddUser("kubeopera-provisioner"), url: pe.URL, eks: eks, eksAuth: eksAuth, roleOnlyAuth: roleOnlyAuth}
}

// credential writes the tenant's cloud credential Secret.
func (s *provisionSuite) credential(t *testing.T, name string, data map[string]string) {
	t.Helper()
	s.credentialIn(t, "acme", name, data)
}

// credentialIn writes a cloud credential Secret in workspace ws.
func (s *provisionSuite) credentialIn(t *testing.T, ws, name string, data map[string]string) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}}, StringData: data}
	if err := s.h.WS[ws].Create(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
}

func (s *provisionSuite) hostCluster(t *testing.T, name string, mode kov1alpha1.HostClusterMode, topology kov1alpha1.ProvisioningTopology, credential string) *kov1alpha1.HostCluster {
	t.Helper()
	return s.hostClusterIn(t, "acme", name, mode, topology, credential)
}

// hostClusterIn creates a HostCluster in workspace ws.
func (s *provisionSuite) hostClusterIn(t *testing.T, ws, name string, mode kov1alpha1.HostClusterMode, topology kov1alpha1.ProvisioningTopology, credential string) *kov1alpha1.HostCluster {
	t.Helper()
	hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: kov1alpha1.HostClusterSpec{
		ClusterID: name, Mode: mode, Provider: "aws", Region: "eu-north-1",
		Provisioning:  &kov1alpha1.HostClusterProvisioning{Topology: topology, NodeCount: 2, InstanceType: "t3.medium", KubernetesVersion: "1.31.0", CredentialRef: credential},
		GitOpsRepoURL: "https://git.example/gitops-iac.git", GitOpsPath: "fluxcd/clusters/" + name, Domain: name + ".example.com"}}
	if topology == kov1alpha1.TopologyVanillaKubeadm {
		hc.Spec.Provisioning.ControlPlaneCount = ptr.To[int32](3)
	}
	if err := s.h.WS[ws].Create(t.Context(), hc); err != nil {
		t.Fatal(err)
	}
	return hc
}

// edit changes HostCluster name of workspace acme as a tenant does, again on a conflict (the
// controller writes the object meanwhile), and returns it as written.
func (s *provisionSuite) edit(t *testing.T, name string, change func(*kov1alpha1.HostCluster)) *kov1alpha1.HostCluster {
	t.Helper()
	var hc *kov1alpha1.HostCluster
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		hc = s.get(t, name)
		change(hc)
		return s.h.WS["acme"].Update(t.Context(), hc)
	}); err != nil {
		t.Fatal(err)
	}
	return hc
}

func (s *provisionSuite) get(t *testing.T, name string) *kov1alpha1.HostCluster {
	t.Helper()
	return s.getIn(t, "acme", name)
}

// getIn reads HostCluster name of workspace ws.
func (s *provisionSuite) getIn(t *testing.T, ws, name string) *kov1alpha1.HostCluster {
	t.Helper()
	hc := &kov1alpha1.HostCluster{}
	if err := s.h.WS[ws].Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, hc); err != nil {
		t.Fatal(err)
	}
	return hc
}

// externalIDOf waits for HostCluster name of workspace ws to show its workspace's AWS external
// ID, as a tenant reads it for their role's trust policy, and returns it.
func (s *provisionSuite) externalIDOf(t *testing.T, ws, name string) string {
	t.Helper()
	var id string
	framework.Eventually(t, time.Minute, name+" shows status.awsExternalID", func() (bool, string) {
		hc := s.getIn(t, ws, name)
		id = hc.Status.AWSExternalID
		return id != "", describeHC(hc)
	})
	return id
}

func describeHC(hc *kov1alpha1.HostCluster) string {
	var conds []string
	for _, c := range hc.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s(%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %q message %q conditions %v runs %+v", hc.Status.Phase, hc.Status.Message, conds, hc.Status.ProvisionRuns)
}

// hasBucket reports whether the S3 bucket exists.
func hasBucket(aws *sim.AWS, name string) bool {
	_, ok := aws.S3.Bucket(name)
	return ok
}

// waitProvisionedAt waits until HostCluster name is Provisioned at generation gen (0: any).
func (s *provisionSuite) waitProvisionedAt(t *testing.T, name string, gen int64) *kov1alpha1.HostCluster {
	t.Helper()
	var hc *kov1alpha1.HostCluster
	framework.Eventually(t, 3*time.Minute, fmt.Sprintf("%s provisioned at generation %d", name, gen), func() (bool, string) {
		hc = s.get(t, name)
		c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		return c != nil && c.Status == metav1.ConditionTrue && (gen == 0 || c.ObservedGeneration == gen), describeHC(hc)
	})
	return hc
}

// runJobs lists the runs of a cluster, by the provisioner's labels.
func (s *provisionSuite) runJobs(t *testing.T, clusterID string) []batchv1.Job {
	t.Helper()
	list, err := s.admin.BatchV1().Jobs(api.DefaultJobsNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: api.LabelCluster + "=" + clusterID})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestProvisioning(t *testing.T) {
	s := setupProvisioning(t, 0, "acme", "bravo")
	ctx := t.Context()

	t.Run("vanilla_kubeadm: one run, its progress, the node's kubeconfig, then on like a connected cluster", func(t *testing.T) {
		s.credential(t, "aws", map[string]string{api.CredentialAccessKey: s.user.AccessKeyID, api.CredentialSecretKey: s.user.SecretAccessKey})
		// Terraform creates the parameter seeded PENDING; node 0 overwrites it after kubeadm init.
		param := provisioning.AdminKubeconfigParameter(fp(s.h.LC["acme"]), "vanilla-1")
		s.aws.SSM.Put(param, "SecureString", "PENDING")
		s.aws.SSM.PublishAdminKubeconfig(param, s.adminConf, 2*time.Second)
		s.hostCluster(t, "vanilla-1", kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws")

		seen := map[string]bool{}
		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 3*time.Minute, "vanilla-1 provisioned and past Provisioning", func() (bool, string) {
			hc = s.get(t, "vanilla-1")
			if c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition); c != nil {
				seen[c.Reason] = true
			}
			return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition) && reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition) &&
				hc.Status.Phase == kov1alpha1.HostClusterPhaseBootstrappingFlux, describeHC(hc)
		})
		if !seen["Queued"] && !seen["Planning"] && !seen["Applying"] {
			t.Errorf("the run's progress was never shown on Provisioned: saw %v", seen)
		}
		if len(hc.Status.ProvisionRuns) != 1 || hc.Status.ProvisionRuns[0].Outcome != string(api.StatusSucceeded) || hc.Status.ProvisionRuns[0].FinishedAt == nil ||
			hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation] != hc.Status.ProvisionRuns[0].ID {
			t.Errorf("run history %+v, annotation %q", hc.Status.ProvisionRuns, hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation])
		}
		if jobs := s.runJobs(t, "vanilla-1"); len(jobs) != 1 {
			t.Errorf("%d runs for one HostCluster, want exactly one POST", len(jobs))
		}
		// An admin reads the run's log through the provisioner's API: the Pod's log, from the
		// kubelet through the API server.
		id := hc.Status.ProvisionRuns[0].ID
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/provisions/"+id+"/logs", nil)
		req.Header.Set("X-Api-Key", provisionerKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		logs, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		want, _ := s.runner.Output(api.JobName(id))
		if resp.StatusCode != http.StatusOK || len(want) == 0 || string(logs) != want || !strings.Contains(want, "Apply complete") {
			t.Errorf("GET logs: %d %q, want the runner's output (%d bytes, with Terraform's \"Apply complete\")", resp.StatusCode, logs, len(want))
		}
		delivered := &corev1.Secret{}
		if err := s.h.WS["acme"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "hostcluster-vanilla-1-kubeconfig"}, delivered); err != nil {
			t.Fatal(err)
		}
		if string(delivered.Data["kubeconfig"]) != string(s.adminConf) {
			t.Error("the delivered kubeconfig is not the admin.conf the node published")
		}
		// The provisioner read the credential copy through the one-Secret grant; the runner's
		// calls were signed with the tenant's key.
		var signed bool
		for _, r := range s.aws.Requests("s3") {
			signed = signed || r.AccessKeyID == s.user.AccessKeyID
		}
		if !signed {
			t.Error("no S3 call was signed with the tenant's access key")
		}
		if bucket := api.StateBucketName(fp(s.h.LC["acme"]), "vanilla-1"); !hasBucket(s.aws, bucket) {
			t.Errorf("the state bucket %s was not created", bucket)
		}
	})

	t.Run("a failed apply fails the HostCluster with Terraform's error", func(t *testing.T) {
		s.hostCluster(t, provisioning.QuotaPrefix+"1", kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws")
		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 3*time.Minute, "quota-1 Failed", func() (bool, string) {
			hc = s.get(t, provisioning.QuotaPrefix+"1")
			return hc.Status.Phase == kov1alpha1.HostClusterPhaseFailed, describeHC(hc)
		})
		c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		if c == nil || c.Reason != kov1alpha1.ProvisioningFailedReason || !strings.Contains(c.Message, "VpcLimitExceeded") || !strings.Contains(c.Message, "The maximum number of VPCs has been reached.") {
			t.Errorf("Provisioned: %+v, want ProvisioningFailed with Terraform's error", c)
		}
		if len(hc.Status.ProvisionRuns) != 1 || hc.Status.ProvisionRuns[0].Outcome != string(api.StatusFailed) {
			t.Errorf("run history %+v", hc.Status.ProvisionRuns)
		}
	})

	t.Run("an admin.conf in SSM with an exec plugin fails the run, saying so, and nothing is run", func(t *testing.T) {
		// The plugin a hostile admin.conf names: a script that would leave a marker if anything ran it.
		dir := t.TempDir()
		marker := filepath.Join(dir, "ran")
		plugin := filepath.Join(dir, "plugin")
		script := "#!/bin/sh\n: > " + marker + "\n" +
			`echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"x"}}'` + "\n"
		if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		// The env that would send the platform's identity elsewhere: a web identity token file of
		// the manager's and an STS endpoint of the attacker's (never dialed: nothing runs).
		hostileEnv := []clientcmdapi.ExecEnvVar{{Name: "AWS_WEB_IDENTITY_TOKEN_FILE", Value: "/etc/kcp/kubeconfig"}, {Name: "AWS_ENDPOINT_URL_STS", Value: "https://sts.attacker.example"}}
		cases := map[string]*clientcmdapi.ExecConfig{
			"hostile-plugin": {APIVersion: "client.authentication.k8s.io/v1beta1", Command: plugin, Env: hostileEnv, InteractiveMode: clientcmdapi.NeverExecInteractiveMode},
			"hostile-helper": {APIVersion: "client.authentication.k8s.io/v1beta1", Command: "/eks-token-helper", Args: []string{"--cluster-name", "x", "--region", "eu-north-1"},
				Env: hostileEnv, InteractiveMode: clientcmdapi.NeverExecInteractiveMode},
		}
		for name, ex := range cases {
			// The real target's admin.conf, its user authenticating with the exec plugin instead.
			cfg, err := clientcmd.Load(s.adminConf)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range cfg.AuthInfos {
				*u = clientcmdapi.AuthInfo{Exec: ex}
			}
			raw, err := clientcmd.Write(*cfg)
			if err != nil {
				t.Fatal(err)
			}
			param := provisioning.AdminKubeconfigParameter(fp(s.h.LC["acme"]), name)
			s.aws.SSM.Put(param, "SecureString", "PENDING")
			s.aws.SSM.PublishAdminKubeconfig(param, raw, time.Second)
			s.hostCluster(t, name, kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws")
		}
		for name := range cases {
			var hc *kov1alpha1.HostCluster
			framework.Eventually(t, 3*time.Minute, name+" Failed", func() (bool, string) {
				hc = s.get(t, name)
				return hc.Status.Phase == kov1alpha1.HostClusterPhaseFailed, describeHC(hc)
			})
			c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != kov1alpha1.ProvisioningFailedReason ||
				!strings.Contains(c.Message, "holds a kubeconfig the platform refuses") || !strings.Contains(c.Message, "exec plugins are not allowed") {
				t.Errorf("%s: Provisioned %+v, want ProvisioningFailed saying the admin.conf's exec plugin is refused", name, c)
			}
			// What is wrong is named, never the content.
			for _, v := range []string{"attacker", "/etc/kcp", plugin} {
				if strings.Contains(hc.Status.Message, v) || (c != nil && strings.Contains(c.Message, v)) {
					t.Errorf("%s: the message quotes the kubeconfig (%q): %q", name, v, hc.Status.Message)
				}
			}
			if runs := hc.Status.ProvisionRuns; len(runs) != 1 || runs[0].Outcome != string(api.StatusFailed) {
				t.Errorf("%s: runs %+v, want one failed run", name, runs)
			}
			for _, c := range []client.Client{s.h.WS["acme"], s.h.Backend} {
				ns := "default"
				if c == s.h.Backend {
					ns = workspaces.Namespace(s.h.LC["acme"])
				}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hostcluster-" + name + "-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
					t.Errorf("%s: a kubeconfig was stored or delivered in %s (err %v)", name, ns, err)
				}
			}
		}
		if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the admin.conf's exec plugin was run (marker %s: %v)", marker, err)
		}
	})

	t.Run("eks: tokens minted in process with the tenant's key, its role assumed with the workspace's external ID; no helper anywhere", func(t *testing.T) {
		// Nothing here could run the exec plugin the kubeconfig names: there is no helper.
		if _, err := os.Stat(kubeconfig.EKSTokenHelper); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s exists (%v): the test must run where no helper is", kubeconfig.EKSTokenHelper, err)
		}
		if p, err := exec.LookPath("eks-token-helper"); err == nil {
			t.Fatalf("eks-token-helper is on PATH (%s): the test must run where no helper is", p)
		}
		tenant := s.aws.AddUser("tenant-eks")
		tenantARN := "arn:aws:iam::" + sim.AWSAccountID + ":user/tenant-eks"
		// The tenant applies the HostCluster first and reads the external ID it must trust.
		s.hostCluster(t, eksClusterName, kov1alpha1.HostClusterModeProvisionEKS, kov1alpha1.TopologyEKS, "aws-role")
		externalID := s.externalIDOf(t, "acme", eksClusterName)
		if !strings.HasPrefix(externalID, "kubeopera-") || !kubeconfig.ValidExternalID(externalID) {
			t.Fatalf("status.awsExternalID %q is not a kubeopera- external ID", externalID)
		}
		// Their role trusts their own user with that external ID; their Secret's own external_id
		// is ignored.
		if role := s.aws.STS.AddRoleTrusting("eks-admin", sim.Trust{Principals: []string{tenantARN}, ExternalID: externalID}); role != eksAdminRole {
			t.Fatalf("role %s", role)
		}
		s.credential(t, "aws-role", map[string]string{api.CredentialAccessKey: tenant.AccessKeyID, api.CredentialSecretKey: tenant.SecretAccessKey,
			api.CredentialRoleARN: eksAdminRole, api.CredentialExternalID: "chosen-by-the-tenant"})

		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 3*time.Minute, "eks-1 provisioned and reached with an EKS token", func() (bool, string) {
			hc = s.get(t, eksClusterName)
			return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition) && reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition) && hc.Status.Inventory != nil,
				describeHC(hc)
		})
		// The stand-in's authenticator accepted tokens for eks-1 signed by the role's session the
		// manager assumed (its session name), mapped to kubeopera-admin: listing the nodes for the
		// inventory needed that (anonymous requests may read /version only).
		managerKeys := map[string]bool{}
		for _, c := range s.aws.STS.AssumeRoleCalls() {
			if c.RoleARN != eksAdminRole {
				continue
			}
			if c.ExternalID != externalID || c.CallerAccessKeyID != tenant.AccessKeyID {
				t.Errorf("sts:AssumeRole of %s with external ID %q signed by %s: want the workspace's external ID, signed by the tenant's key", c.RoleARN, c.ExternalID, c.CallerAccessKeyID)
			}
			if c.RoleSessionName == "kubeopera-manager" && c.Issued.AccessKeyID != "" {
				managerKeys[c.Issued.AccessKeyID] = true
			}
		}
		var accepted bool
		for _, r := range s.eksAuth.Reviews() {
			accepted = accepted || (r.Authenticated && r.CanonicalARN == eksAdminRole && r.Username == "kubeopera-admin" && managerKeys[r.AccessKeyID])
		}
		if !accepted {
			t.Errorf("the EKS stand-in accepted no token of the manager's role session: reviews %+v, manager keys %v", s.eksAuth.Reviews(), managerKeys)
		}
		// The tenant is told that their external_id was ignored, and what is sent instead.
		framework.Eventually(t, 30*time.Second, "an ExternalIDIgnored event about eks-1", func() (bool, string) {
			evs := &corev1.EventList{}
			if err := s.h.WS["acme"].List(ctx, evs, client.InNamespace("default")); err != nil {
				return false, err.Error()
			}
			for _, ev := range evs.Items {
				if ev.Reason == kov1alpha1.ExternalIDIgnoredReason && ev.InvolvedObject.Name == eksClusterName &&
					strings.Contains(ev.Message, externalID) && !strings.Contains(ev.Message, "chosen-by-the-tenant") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d events, none ExternalIDIgnored naming the workspace's external ID", len(evs.Items))
		})
		// The platform keeps the runner's kubeconfig (the helper with the role and the
		// workspace's external ID, which only the manager's image has and never runs).
		stored := &corev1.Secret{}
		if err := s.h.Backend.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(s.h.LC["acme"]), Name: "hostcluster-eks-1-kubeconfig"}, stored); err != nil {
			t.Fatal(err)
		}
		eks, err := kubeconfig.ParseEKS(stored.Data["kubeconfig"])
		clusterName := api.ClusterName(fp(s.h.LC["acme"]), eksClusterName)
		if err != nil || eks.RoleARN != eksAdminRole || eks.ExternalID != externalID || eks.ClusterName != clusterName {
			t.Errorf("stored EKS kubeconfig: %+v %v, want the role and the workspace's external ID", eks, err)
		}
		// The tenant gets the one `aws eks update-kubeconfig` writes: the AWS CLI with their own
		// identity, and nothing of the platform's.
		delivered := &corev1.Secret{}
		if err := s.h.WS["acme"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "hostcluster-eks-1-kubeconfig"}, delivered); err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.Load(delivered.Data["kubeconfig"])
		if err != nil {
			t.Fatal(err)
		}
		user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
		wantArgs := []string{"--region", "eu-north-1", "eks", "get-token", "--cluster-name", clusterName, "--output", "json"}
		if user == nil || user.Exec == nil || user.Exec.Command != "aws" || user.Exec.APIVersion != "client.authentication.k8s.io/v1beta1" ||
			!slices.Equal(user.Exec.Args, wantArgs) || len(user.Exec.Env) != 0 {
			t.Errorf("delivered EKS kubeconfig user = %+v, want exec aws %v and no env", user, wantArgs)
		}
		if c := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]; c == nil || c.Server != eks.Config.Host || string(c.CertificateAuthorityData) != string(eks.Config.CAData) {
			t.Errorf("delivered EKS kubeconfig cluster = %+v, want the cluster's server and CA", c)
		}
		for _, secret := range []string{kubeconfig.EKSTokenHelper, externalID, eksAdminRole, tenant.AccessKeyID} {
			if strings.Contains(string(delivered.Data["kubeconfig"]), secret) {
				t.Errorf("the delivered EKS kubeconfig holds %q", secret)
			}
		}
	})

	t.Run("eks, role only: the platform's identity assumes the tenant's role with the workspace's external ID; the role's session signs the tokens", func(t *testing.T) {
		platformARN := "arn:aws:iam::" + sim.AWSAccountID + ":user/kubeopera-platform"
		s.hostCluster(t, eksRoleOnlyName, kov1alpha1.HostClusterModeProvisionEKS, kov1alpha1.TopologyEKS, "aws-role-only")
		externalID := s.externalIDOf(t, "acme", eksRoleOnlyName)
		// The README's trust policy: the platform's identity, with the workspace's external ID.
		if role := s.aws.STS.AddRoleTrusting("eks-role-only", sim.Trust{Principals: []string{platformARN}, ExternalID: externalID}); role != eksRoleOnlyRole {
			t.Fatalf("role %s", role)
		}
		s.credential(t, "aws-role-only", map[string]string{api.CredentialRoleARN: eksRoleOnlyRole})
		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 3*time.Minute, eksRoleOnlyName+" provisioned and reached with an EKS token", func() (bool, string) {
			hc = s.get(t, eksRoleOnlyName)
			return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition) && reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition) && hc.Status.Inventory != nil,
				describeHC(hc)
		})
		sessionKeys := map[string]bool{}
		for _, c := range s.aws.STS.AssumeRoleCalls() {
			if c.RoleARN != eksRoleOnlyRole {
				continue
			}
			if c.ExternalID != externalID || c.CallerAccessKeyID != s.pe.Platform.AccessKeyID {
				t.Errorf("sts:AssumeRole of %s with external ID %q signed by %s: want the workspace's external ID, signed by the platform's key", c.RoleARN, c.ExternalID, c.CallerAccessKeyID)
			}
			if c.RoleSessionName == "kubeopera-manager" && c.Issued.AccessKeyID != "" {
				sessionKeys[c.Issued.AccessKeyID] = true
			}
		}
		var accepted bool
		for _, r := range s.roleOnlyAuth.Reviews() {
			if r.AccessKeyID == s.pe.Platform.AccessKeyID {
				t.Errorf("the EKS cluster was sent a token signed by the platform's own key: %+v", r)
			}
			accepted = accepted || (r.Authenticated && r.CanonicalARN == eksRoleOnlyRole && sessionKeys[r.AccessKeyID])
		}
		if !accepted {
			t.Errorf("the EKS stand-in accepted no token of the manager's session of the tenant's role: reviews %+v, session keys %v", s.roleOnlyAuth.Reviews(), sessionKeys)
		}
	})

	t.Run("role_arn: another workspace's role is AccessDenied, even with its external ID copied; that workspace's own run succeeds", func(t *testing.T) {
		platformARN := "arn:aws:iam::" + sim.AWSAccountID + ":user/kubeopera-platform"
		// Tenant B applies its HostCluster, reads its external ID and lets only the platform's
		// identity assume its role, with that ID (the README's trust policy).
		s.hostClusterIn(t, "bravo", "b-own", kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws-role-b")
		extB := s.externalIDOf(t, "bravo", "b-own")
		roleB := s.aws.STS.AddRoleTrusting("tenant-b", sim.Trust{Principals: []string{platformARN}, ExternalID: extB})
		paramB := provisioning.AdminKubeconfigParameter(fp(s.h.LC["bravo"]), "b-own")
		s.aws.SSM.Put(paramB, "SecureString", "PENDING")
		s.aws.SSM.PublishAdminKubeconfig(paramB, s.adminConf, 2*time.Second)
		s.credentialIn(t, "bravo", "aws-role-b", map[string]string{api.CredentialRoleARN: roleB})

		// Tenant A names B's role and copies B's external ID into its own Secret.
		s.credentialIn(t, "acme", "aws-steal", map[string]string{api.CredentialRoleARN: roleB, api.CredentialExternalID: extB})
		s.hostCluster(t, "a-steal", kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws-steal")
		extA := s.externalIDOf(t, "acme", "a-steal")
		if extA == extB {
			t.Fatalf("two workspaces have the same external ID %q", extA)
		}

		var a *kov1alpha1.HostCluster
		framework.Eventually(t, 3*time.Minute, "a-steal Failed", func() (bool, string) {
			a = s.get(t, "a-steal")
			return a.Status.Phase == kov1alpha1.HostClusterPhaseFailed, describeHC(a)
		})
		if c := reconcile.GetCondition(a, kov1alpha1.ProvisionedCondition); c == nil || c.Reason != kov1alpha1.ProvisioningFailedReason || !strings.Contains(c.Message, "AccessDenied") {
			t.Errorf("a-steal's Provisioned %+v, want ProvisioningFailed with STS's AccessDenied", c)
		}
		framework.Eventually(t, 3*time.Minute, "b-own provisioned", func() (bool, string) {
			b := s.getIn(t, "bravo", "b-own")
			return reconcile.IsTrue(b, kov1alpha1.ProvisionedCondition), describeHC(b)
		})

		// Every AssumeRole of B's role was the platform's, with A's or B's own external ID (never
		// the one A copied on A's behalf); only B's got credentials.
		bKeys := map[string]bool{}
		var aCalls int
		for _, c := range s.aws.STS.AssumeRoleCalls() {
			if c.RoleARN != roleB {
				continue
			}
			if c.CallerAccessKeyID != s.pe.Platform.AccessKeyID {
				t.Errorf("AssumeRole of B's role signed by %s, want the platform's identity", c.CallerAccessKeyID)
			}
			switch c.ExternalID {
			case extA:
				aCalls++
				if c.Error != "AccessDenied" || c.Issued.AccessKeyID != "" {
					t.Errorf("A's AssumeRole of B's role: error %q, issued %q; want AccessDenied and nothing issued", c.Error, c.Issued.AccessKeyID)
				}
			case extB:
				if c.Issued.AccessKeyID != "" {
					bKeys[c.Issued.AccessKeyID] = true
				}
			default:
				t.Errorf("AssumeRole of B's role with external ID %q, want only the workspaces' own", c.ExternalID)
			}
		}
		if aCalls == 0 || len(bKeys) == 0 {
			t.Errorf("%d AssumeRole calls for A, %d sessions for B: want A refused and B's run served", aCalls, len(bKeys))
		}
		// Nothing was done for A anywhere: no S3 or SSM request about a-steal succeeded, and
		// every request signed by a session of B's role was B's.
		for _, r := range s.aws.Requests("") {
			if (r.Service == "s3" || r.Service == "ssm") && strings.Contains(r.Resource, "a-steal") && r.Status < 300 {
				t.Errorf("%s %s %s answered %d for A", r.Service, r.Operation, r.Resource, r.Status)
			}
			if bKeys[r.AccessKeyID] && strings.Contains(r.Resource, "a-steal") {
				t.Errorf("B's role session made %s %s on %s", r.Service, r.Operation, r.Resource)
			}
		}
	})

	t.Run("day-2: nodeCount 2 to 5 runs again on the same state; a change outside the module does not", func(t *testing.T) {
		const name = "day2-grow"
		param := provisioning.AdminKubeconfigParameter(fp(s.h.LC["acme"]), name)
		s.aws.SSM.Put(param, "SecureString", "PENDING")
		s.aws.SSM.PublishAdminKubeconfig(param, s.adminConf, time.Second)
		s.hostCluster(t, name, kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws")
		hc := s.waitProvisionedAt(t, name, 0)
		first := hc.Status.Provisioning
		if first == nil || first.AppliedRun == "" || first.AppliedRun != hc.Status.ProvisionRuns[0].ID || first.AppliedInputsHash == "" {
			t.Fatalf("status.provisioning %+v after the first run, want its run and inputs hash", first)
		}

		// The domain is not an input of the module: the new generation is provisioned already.
		hc = s.edit(t, name, func(hc *kov1alpha1.HostCluster) { hc.Spec.Domain = "elsewhere.example.com" })
		hc = s.waitProvisionedAt(t, name, hc.Generation)
		if jobs := s.runJobs(t, name); len(jobs) != 1 || hc.Status.Provisioning.AppliedRun != first.AppliedRun {
			t.Fatalf("after a domain change: %d runs, applied run %s; want still only %s", len(jobs), hc.Status.Provisioning.AppliedRun, first.AppliedRun)
		}

		hc = s.edit(t, name, func(hc *kov1alpha1.HostCluster) { hc.Spec.Provisioning.NodeCount = 5 })
		hc = s.waitProvisionedAt(t, name, hc.Generation)
		st := hc.Status.Provisioning
		if st.AppliedRun == first.AppliedRun || st.AppliedInputsHash == first.AppliedInputsHash {
			t.Fatalf("status.provisioning %+v after nodeCount 5, want a new run and inputs hash (first %+v)", st, first)
		}
		cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		if !strings.Contains(cond.Message, "applied the changed spec") || !strings.Contains(cond.Message, st.AppliedRun) || !strings.Contains(cond.Message, "5 nodes") {
			t.Errorf("Provisioned message %q, want the second run applying the changed spec", cond.Message)
		}
		if len(hc.Status.ProvisionRuns) != 2 || hc.Status.ProvisionRuns[1].ID != st.AppliedRun || hc.Status.ProvisionRuns[1].Outcome != string(api.StatusSucceeded) {
			t.Errorf("run history %+v, want the first and the second apply", hc.Status.ProvisionRuns)
		}
		jobs := s.runJobs(t, name)
		if len(jobs) != 2 {
			t.Fatalf("%d runs, want two applies", len(jobs))
		}
		byRun := map[string]batchv1.Job{}
		for _, j := range jobs {
			byRun[j.Labels[api.LabelRun]] = j
		}
		one, two := byRun[first.AppliedRun], byRun[st.AppliedRun]
		if one.Labels[api.LabelOperation] != "apply" || two.Labels[api.LabelOperation] != "apply" {
			t.Errorf("operations %q and %q, want two applies", one.Labels[api.LabelOperation], two.Labels[api.LabelOperation])
		}
		// One run at a time: the second started after the first had ended.
		if one.Status.CompletionTime == nil || two.Status.StartTime == nil || two.Status.StartTime.Before(one.Status.CompletionTime) {
			t.Errorf("first run ended %v, second started %v: want the second after the first", one.Status.CompletionTime, two.Status.StartTime)
		}
		// The same state (bucket and key), the new count in the module.
		module := func(id string) string {
			cm, err := s.admin.CoreV1().ConfigMaps(api.DefaultJobsNamespace).Get(ctx, api.ModuleConfigMapName(id), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return cm.Data["main.tf"]
		}
		m1, m2 := module(first.AppliedRun), module(st.AppliedRun)
		backend := func(m string) string { return m[:strings.Index(m, "locals")] }
		if backend(m1) != backend(m2) || !strings.Contains(m2, api.StateKey(fp(s.h.LC["acme"]), name)) {
			t.Errorf("the runs' backends differ: %q vs %q", backend(m1), backend(m2))
		}
		nodeCount := regexp.MustCompile(`node_count\s*=\s*(\d+)`)
		if got1, got2 := nodeCount.FindStringSubmatch(m1), nodeCount.FindStringSubmatch(m2); len(got1) != 2 || got1[1] != "2" || len(got2) != 2 || got2[1] != "5" {
			t.Errorf("node_count in the modules: %v then %v, want 2 then 5", got1, got2)
		}
		// Terraform changed the workers on the state the first run left.
		out, _ := s.runner.Output(api.JobName(st.AppliedRun))
		if !strings.Contains(out, "0 to add, 1 to change, 0 to destroy") || !strings.Contains(out, "0 added, 1 changed, 0 destroyed") {
			t.Errorf("the second run's log does not show the workers changed in place:\n%s", out)
		}
	})

	t.Run("approvePlan manual: the run stops after the plan, its summary in status; only the annotation naming that plan applies it", func(t *testing.T) {
		c := s.h.WS["acme"]
		const name = "day2-manual"
		param := provisioning.AdminKubeconfigParameter(fp(s.h.LC["acme"]), name)
		s.aws.SSM.Put(param, "SecureString", "PENDING")
		s.aws.SSM.PublishAdminKubeconfig(param, s.adminConf, time.Second)
		hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: kov1alpha1.HostClusterSpec{
			ClusterID: name, Mode: kov1alpha1.HostClusterModeProvisionVanilla, Provider: "aws", Region: "eu-north-1",
			Provisioning: &kov1alpha1.HostClusterProvisioning{Topology: kov1alpha1.TopologyVanillaKubeadm, NodeCount: 2, InstanceType: "t3.medium",
				KubernetesVersion: "1.31.0", CredentialRef: "aws", ApprovePlan: kov1alpha1.PlanApprovalManual},
			GitOpsRepoURL: "https://git.example/gitops-iac.git", GitOpsPath: "fluxcd/clusters/" + name, Domain: name + ".example.com"}}
		if err := c.Create(ctx, hc); err != nil {
			t.Fatal(err)
		}
		awaiting := func(what string, check func(*kov1alpha1.HostCluster, *metav1.Condition) bool) *kov1alpha1.HostCluster {
			t.Helper()
			var hc *kov1alpha1.HostCluster
			framework.Eventually(t, 3*time.Minute, name+": "+what, func() (bool, string) {
				hc = s.get(t, name)
				cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
				return cond != nil && cond.Reason == kov1alpha1.PlanAwaitingApprovalReason && hc.Status.Provisioning != nil &&
					hc.Status.Provisioning.Plan != nil && check(hc, cond), describeHC(hc)
			})
			return hc
		}
		hc = awaiting("the first plan awaiting approval", func(*kov1alpha1.HostCluster, *metav1.Condition) bool { return true })
		plan := *hc.Status.Provisioning.Plan
		if plan.Add != 3 || plan.Change != 0 || plan.Destroy != 0 || plan.Approved || plan.PlannedAt == nil {
			t.Errorf("the first plan %+v, want 3 to add (vpc, cluster, workers), not approved", plan)
		}
		cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		if !strings.Contains(cond.Message, "3 to add, 0 to change, 0 to destroy") || !strings.Contains(cond.Message, kov1alpha1.ApprovePlanAnnotation+"="+plan.ID) {
			t.Errorf("Provisioned message %q, want the summary and how to approve %s", cond.Message, plan.ID)
		}
		if hc.Status.Phase != kov1alpha1.HostClusterPhaseProvisioning {
			t.Errorf("phase %s while the plan awaits approval, want Provisioning", hc.Status.Phase)
		}
		jobs := s.runJobs(t, name)
		if len(jobs) != 1 || jobs[0].Labels[api.LabelOperation] != string(api.OperationPlan) || jobs[0].Labels[api.LabelRun] != plan.ID {
			t.Fatalf("%d runs, want the plan run %s only: nothing applied before approval", len(jobs), plan.ID)
		}
		bucket := api.StateBucketName(fp(s.h.LC["acme"]), name)
		if saved, err := s.aws.S3.Object(bucket, api.PlanKey(fp(s.h.LC["acme"]), name, plan.ID)); err != nil || len(saved) == 0 {
			t.Errorf("the saved plan is not next to the state in %s: %v", bucket, err)
		}

		approve := func(value string) {
			t.Helper()
			if err := reconcile.PatchAnnotations(ctx, c, s.get(t, name), map[string]*string{kov1alpha1.ApprovePlanAnnotation: ptr.To(value)}); err != nil {
				t.Fatal(err)
			}
		}
		// A value that is not this plan's (a guess, another HostCluster's plan) approves nothing.
		approve("zzzzzzzzzz")
		awaiting("the wrong approval refused", func(_ *kov1alpha1.HostCluster, cond *metav1.Condition) bool {
			return strings.Contains(cond.Message, "approves nothing") && !strings.Contains(cond.Message, "zzzzzzzzzz")
		})
		if jobs := s.runJobs(t, name); len(jobs) != 1 {
			t.Fatalf("%d runs after a wrong approval, want the plan run only", len(jobs))
		}

		approve(plan.ID)
		hc = s.waitProvisionedAt(t, name, 0)
		st := hc.Status.Provisioning
		if st.Plan == nil || st.Plan.ID != plan.ID || !st.Plan.Approved || st.AppliedRun == "" {
			t.Fatalf("status.provisioning %+v after approval, want plan %s approved and applied", st, plan.ID)
		}
		var applyJob *batchv1.Job
		for _, j := range s.runJobs(t, name) {
			if j.Labels[api.LabelRun] == st.AppliedRun {
				applyJob = &j
			}
		}
		if applyJob == nil || applyJob.Labels[api.LabelOperation] != string(api.OperationApply) || applyJob.Annotations[api.AnnotationPlanRun] != plan.ID {
			t.Fatalf("the applied run %s is not an apply of plan %s: %+v", st.AppliedRun, plan.ID, applyJob)
		}
		out, _ := s.runner.Output(applyJob.Name)
		if !strings.Contains(out, "Loading the approved plan") || !strings.Contains(out, "Apply complete! Resources: 3 added, 0 changed, 0 destroyed") ||
			strings.Contains(out, "Terraform will perform the following actions") {
			t.Errorf("the apply run did not apply the saved plan as it was:\n%s", out)
		}

		// Day 2 under manual approval: a new plan for nodeCount 5; the annotation still names the
		// first plan, which approves nothing now.
		hc = s.edit(t, name, func(hc *kov1alpha1.HostCluster) { hc.Spec.Provisioning.NodeCount = 5 })
		hc = awaiting("the day-2 plan awaiting approval", func(hc *kov1alpha1.HostCluster, cond *metav1.Condition) bool {
			return hc.Status.Provisioning.Plan.ID != plan.ID && strings.Contains(cond.Message, "approves nothing")
		})
		second := *hc.Status.Provisioning.Plan
		if second.Add != 0 || second.Change != 1 || second.Destroy != 0 {
			t.Errorf("the day-2 plan %+v, want 1 to change (the workers)", second)
		}
		approve(second.ID)
		hc = s.waitProvisionedAt(t, name, hc.Generation)
		if st := hc.Status.Provisioning; st.AppliedRun == applyJob.Labels[api.LabelRun] || st.Plan == nil || st.Plan.ID != second.ID || !st.Plan.Approved {
			t.Errorf("status.provisioning %+v after the day-2 approval", st)
		}
		if got := len(s.runJobs(t, name)); got != 4 {
			t.Errorf("%d runs, want two plans and two applies", got)
		}

		// A saved plan is applied exactly as it was, or not at all: the day-2 plan asked for
		// again, directly at the provisioner (same cluster, caller and inputs, so the provisioner
		// lets it through), is refused by Terraform, since its own apply changed the state.
		pc, err := pclient.New(s.url, provisionerKey)
		if err != nil {
			t.Fatal(err)
		}
		replay, err := pc.Create(ctx, api.CreateRequest{ClusterID: name, Region: "eu-north-1", Topology: api.TopologyVanillaKubeadm, NodeCount: 5,
			InstanceType: "t3.medium", KubernetesVersion: "1.31.0", TerraformEnvironment: name,
			CredentialSecretRef: api.SecretRef{Namespace: workspaces.Namespace(s.h.LC["acme"]), Name: "hostcluster-" + name + "-cloud-credential"},
			Operation:           api.OperationApply, PlanRun: second.ID,
			Workspace: s.h.LC["acme"], WorkspaceFingerprint: fp(s.h.LC["acme"]), OwnerUID: string(hc.UID)})
		if err != nil {
			t.Fatalf("the apply of the applied plan again: %v", err)
		}
		framework.Eventually(t, 2*time.Minute, "the replayed plan's run to end", func() (bool, string) {
			p, err := pc.Get(ctx, replay.ID)
			if err != nil {
				return false, err.Error()
			}
			if p.Status == api.StatusSucceeded {
				t.Fatalf("a stale plan was applied: %+v", p)
			}
			return p.Status == api.StatusFailed && strings.Contains(p.Message, "Saved plan is stale"), fmt.Sprintf("%+v", p)
		})
	})

	t.Run("a destroy requested while an apply runs starts only after the apply ended", func(t *testing.T) {
		c := s.h.WS["acme"]
		const name = "day2-destroy"
		param := provisioning.AdminKubeconfigParameter(fp(s.h.LC["acme"]), name)
		s.aws.SSM.Put(param, "SecureString", "PENDING")
		s.hostCluster(t, name, kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws")
		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 3*time.Minute, name+"'s apply waiting for the node's kubeconfig", func() (bool, string) {
			hc = s.get(t, name)
			cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
			return hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation] != "" && cond != nil && cond.Reason == "Applying" &&
				strings.Contains(cond.Message, "Waiting for the control plane"), describeHC(hc)
		})
		apply := hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation]
		hc = s.edit(t, name, func(hc *kov1alpha1.HostCluster) {
			hc.Spec.Provisioning.DeletionPolicy = kov1alpha1.DeletionPolicyDestroy
		})
		if err := c.Delete(ctx, s.get(t, name)); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, name+"'s deletion waiting for the apply", func() (bool, string) {
			hc = s.get(t, name)
			cond := reconcile.GetCondition(hc, kov1alpha1.InfrastructureDestroyedCondition)
			return cond != nil && cond.Reason == kov1alpha1.RunInProgressReason && strings.Contains(cond.Message, apply), describeHC(hc)
		})
		if jobs := s.runJobs(t, name); len(jobs) != 1 {
			t.Fatalf("%d runs while the deletion waits, want the apply only", len(jobs))
		}
		// The node publishes its admin.conf: the apply ends, then the destroy runs.
		s.aws.SSM.PublishAdminKubeconfig(param, s.adminConf, 0)
		framework.Eventually(t, 3*time.Minute, name+" gone", func() (bool, string) {
			err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &kov1alpha1.HostCluster{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		var applyJob, destroyJob *batchv1.Job
		for _, j := range s.runJobs(t, name) {
			switch j.Labels[api.LabelOperation] {
			case "apply":
				applyJob = &j
			case "destroy":
				destroyJob = &j
			}
		}
		if applyJob == nil || destroyJob == nil || applyJob.Labels[api.LabelRun] != apply {
			t.Fatalf("runs: apply %v destroy %v, want the apply %s and a destroy", applyJob != nil, destroyJob != nil, apply)
		}
		if applyJob.Status.CompletionTime == nil || destroyJob.Status.StartTime == nil || destroyJob.Status.CompletionTime == nil ||
			destroyJob.CreationTimestamp.Before(applyJob.Status.CompletionTime) || destroyJob.Status.StartTime.Before(applyJob.Status.CompletionTime) {
			t.Errorf("apply ended %v; destroy created %v, started %v, ended %v: want the destroy wholly after the apply",
				applyJob.Status.CompletionTime, destroyJob.CreationTimestamp, destroyJob.Status.StartTime, destroyJob.Status.CompletionTime)
		}
		out, _ := s.runner.Output(destroyJob.Name)
		if !strings.Contains(out, "Resources: 0 added, 0 changed, 3 destroyed") {
			t.Errorf("the destroy run did not destroy what the apply built:\n%s", out)
		}
	})

	t.Run("the provisioner refuses a second run: a retry during an apply follows it again, a destroy that lost track of it still waits", func(t *testing.T) {
		c := s.h.WS["acme"]
		const name = "day2-lost"
		param := provisioning.AdminKubeconfigParameter(fp(s.h.LC["acme"]), name)
		s.aws.SSM.Put(param, "SecureString", "PENDING")
		s.hostCluster(t, name, kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws")
		var hc *kov1alpha1.HostCluster
		applying := func(what string) {
			t.Helper()
			framework.Eventually(t, 3*time.Minute, name+": "+what, func() (bool, string) {
				hc = s.get(t, name)
				cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
				return hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation] != "" && hc.Status.LastHandledRetry == hc.Annotations[kov1alpha1.RetryAnnotation] &&
					cond != nil && cond.Reason == "Applying" && strings.Contains(cond.Message, "Waiting for the control plane"), describeHC(hc)
			})
		}
		applying("the apply waiting for the node")
		apply := hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation]

		// A retry starts a new attempt, which drops the run's ID: the provisioner refuses a second
		// run (409 naming the active one), and the HostCluster follows its own run again.
		if err := reconcile.PatchAnnotations(ctx, c, hc, map[string]*string{kov1alpha1.RetryAnnotation: ptr.To("during-the-apply")}); err != nil {
			t.Fatal(err)
		}
		applying("the retry handled, the same run followed")
		if got := hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation]; got != apply {
			t.Errorf("after the retry the HostCluster follows run %s, want the active %s", got, apply)
		}
		if jobs := s.runJobs(t, name); len(jobs) != 1 {
			t.Fatalf("%d runs after a retry during the apply, want the one", len(jobs))
		}

		// Deleted with Destroy, then the tenant drops the annotation that named the apply: the
		// destroy's POST is refused while the apply runs, and the deletion says it waits.
		hc = s.edit(t, name, func(hc *kov1alpha1.HostCluster) {
			hc.Spec.Provisioning.DeletionPolicy = kov1alpha1.DeletionPolicyDestroy
		})
		if err := c.Delete(ctx, s.get(t, name)); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, name+"'s deletion waiting for the apply", func() (bool, string) {
			hc = s.get(t, name)
			cond := reconcile.GetCondition(hc, kov1alpha1.InfrastructureDestroyedCondition)
			return cond != nil && cond.Reason == kov1alpha1.RunInProgressReason, describeHC(hc)
		})
		if err := reconcile.PatchAnnotations(ctx, c, hc, map[string]*string{kov1alpha1.ProvisionJobIDAnnotation: nil}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, name+"'s destroy refused by the provisioner while the apply runs", func() (bool, string) {
			hc = s.get(t, name)
			cond := reconcile.GetCondition(hc, kov1alpha1.InfrastructureDestroyedCondition)
			return cond != nil && cond.Reason == kov1alpha1.RunInProgressReason && strings.Contains(cond.Message, "Run "+apply+" (apply) of this cluster is still"), describeHC(hc)
		})
		if jobs := s.runJobs(t, name); len(jobs) != 1 {
			t.Fatalf("%d runs while the destroy is refused, want the apply only", len(jobs))
		}
		s.aws.SSM.PublishAdminKubeconfig(param, s.adminConf, 0)
		framework.Eventually(t, 3*time.Minute, name+" gone", func() (bool, string) {
			err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &kov1alpha1.HostCluster{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		var applyJob, destroyJob batchv1.Job
		for _, j := range s.runJobs(t, name) {
			if j.Labels[api.LabelOperation] == "destroy" {
				destroyJob = j
			} else {
				applyJob = j
			}
		}
		if applyJob.Labels[api.LabelRun] != apply || destroyJob.Status.StartTime == nil || applyJob.Status.CompletionTime == nil ||
			destroyJob.Status.StartTime.Before(applyJob.Status.CompletionTime) {
			t.Errorf("apply %s ended %v, destroy %s started %v: want the destroy after the apply", applyJob.Name, applyJob.Status.CompletionTime, destroyJob.Name, destroyJob.Status.StartTime)
		}
	})

	t.Run("a failed destroy keeps the HostCluster, with Terraform's error", func(t *testing.T) {
		c := s.h.WS["acme"]
		name := provisioning.ProtectedPrefix + "1"
		hc := s.hostCluster(t, name, kov1alpha1.HostClusterModeProvisionEKS, kov1alpha1.TopologyEKS, "aws")
		framework.Eventually(t, 3*time.Minute, name+" provisioned", func() (bool, string) {
			hc = s.get(t, name)
			return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition), describeHC(hc)
		})
		hc = s.edit(t, name, func(hc *kov1alpha1.HostCluster) {
			hc.Spec.Provisioning.DeletionPolicy = kov1alpha1.DeletionPolicyDestroy
		})
		if err := c.Delete(ctx, s.get(t, name)); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 3*time.Minute, name+"'s destroy failed", func() (bool, string) {
			hc = s.get(t, name)
			cond := reconcile.GetCondition(hc, kov1alpha1.InfrastructureDestroyedCondition)
			return cond != nil && cond.Reason == kov1alpha1.DestroyFailedReason && strings.Contains(cond.Message, "cannot be destroyed"), describeHC(hc)
		})
		if !slices.Contains(hc.Finalizers, kov1alpha1.HostClusterFinalizer) {
			t.Errorf("the finalizer went although the destroy failed: %v", hc.Finalizers)
		}
		if got := len(s.runJobs(t, name)); got != 2 {
			t.Errorf("%d runs, want the apply and one failed destroy (no retry without the tenant asking)", got)
		}
	})

	t.Run("deletionPolicy Destroy runs terraform destroy before the HostCluster goes; Retain leaves it", func(t *testing.T) {
		c := s.h.WS["acme"]
		s.edit(t, "vanilla-1", func(hc *kov1alpha1.HostCluster) {
			hc.Spec.Provisioning.DeletionPolicy = kov1alpha1.DeletionPolicyDestroy
		})
		for _, name := range []string{"vanilla-1", "eks-1"} {
			if err := c.Delete(ctx, s.get(t, name)); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"vanilla-1", "eks-1"} {
			framework.Eventually(t, 3*time.Minute, name+" gone", func() (bool, string) {
				hc := &kov1alpha1.HostCluster{}
				err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, hc)
				if err == nil {
					return false, describeHC(hc)
				}
				return apierrors.IsNotFound(err), err.Error()
			})
		}
		ops := func(clusterID string) (out []string) {
			for _, j := range s.runJobs(t, clusterID) {
				status := "running"
				for _, c := range j.Status.Conditions {
					if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
						status = string(c.Type)
					}
				}
				out = append(out, j.Labels[api.LabelOperation]+":"+status)
			}
			slices.Sort(out)
			return out
		}
		if got := ops("vanilla-1"); !slices.Equal(got, []string{"apply:Complete", "destroy:Complete"}) {
			t.Errorf("vanilla-1's runs %v, want its apply and a completed destroy", got)
		}
		if got := ops("eks-1"); !slices.Equal(got, []string{"apply:Complete"}) {
			t.Errorf("eks-1's runs %v, want no destroy (deletionPolicy Retain)", got)
		}
		// The credential copies and their grants went with the HostClusters.
		if err := s.h.Backend.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(s.h.LC["acme"]), Name: "hostcluster-vanilla-1-cloud-credential"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("credential copy still there: %v", err)
		}
	})
}
