package hostcluster_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/flux"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	pclient "github.com/kubeopera/kubeopera/internal/provisioner/client"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/framework/actors"
	"github.com/kubeopera/kubeopera/test/framework/awsfake"
	"github.com/kubeopera/kubeopera/test/framework/fleettest"
	"github.com/kubeopera/kubeopera/test/framework/provisionenv"
	"github.com/kubeopera/kubeopera/workspaces"
)

// This suite provisions HostClusters through the real parts: the HostCluster reconciler (in
// process, with the manager's shipped backend identity) and test/framework/provisionenv (the
// real provisioner, the real runner binary with the real terraform in the Job's Pod, S3, SSM and
// STS played by awsfake, and a module of terraform_data stand-ins for what AWS would build: see
// its doc). awsfake's SSM plays the control-plane node publishing its admin.conf, which points at a
// real kube-apiserver standing in for the new cluster.

const provisionerKey = "provisioner-test-key"

type provisionSuite struct {
	h      *fleettest.Harness
	aws    *awsfake.Endpoint
	runner *actors.TerraformJob
	admin  kubernetes.Interface
	// adminConf is the admin kubeconfig of the cluster a vanilla run "builds", and target that
	// cluster's admin config.
	adminConf []byte
	target    *rest.Config
	user      awsfake.Credentials
	// url is the provisioner's API.
	url string
}

func terraformAvailable(t *testing.T) string {
	t.Helper()
	path, err := provisionenv.Terraform(framework.RepoRoot())
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
	pe, err := provisionenv.Start(ctx, provisionenv.Options{Backend: h.BackendAdmin, Root: framework.RepoRoot(), Dir: t.TempDir(),
		APIKey: provisionerKey, ClusterCA: target.Config.CAData, SSMPollInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pe.Stop)
	pc, err := pclient.New(pe.URL, provisionerKey)
	if err != nil {
		t.Fatal(err)
	}
	installer, err := flux.NewInstaller(flux.Options{ChartRef: filepath.Join(framework.RepoRoot(), "_tools", "charts", "flux2"), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&hostcluster.Reconciler{Workspaces: h.Fleet, Backend: h.BackendStore(), Flux: installer, Provisioner: pc,
		PollInterval: 300 * time.Millisecond, AccessGiveUp: 20 * time.Second, MaxRunsPerHour: maxRunsPerHour}).SetupWithManager(h.Manager); err != nil {
		t.Fatal(err)
	}
	h.Run(t)
	return &provisionSuite{h: h, aws: pe.AWS, runner: pe.Runner, admin: kubernetes.NewForConfigOrDie(h.BackendAdmin), adminConf: adminConf, target: target.Config,
		user: pe.AWS.AddUser("kubeopera-provisioner"), url: pe.URL}
}

// credential writes the tenant's cloud credential Secret.
func (s *provisionSuite) credential(t *testing.T, name string, data map[string]string) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}}, StringData: data}
	if err := s.h.WS["acme"].Create(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
}

func (s *provisionSuite) hostCluster(t *testing.T, name string, mode kov1alpha1.HostClusterMode, topology kov1alpha1.ProvisioningTopology, credential string) *kov1alpha1.HostCluster {
	t.Helper()
	hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: kov1alpha1.HostClusterSpec{
		ClusterID: name, Mode: mode, Provider: "aws", Region: "eu-north-1",
		Provisioning:  &kov1alpha1.HostClusterProvisioning{Topology: topology, NodeCount: 2, InstanceType: "t3.medium", KubernetesVersion: "1.31.0", CredentialRef: credential},
		GitOpsRepoURL: "https://git.example/gitops-iac.git", GitOpsPath: "fluxcd/clusters/" + name, Domain: name + ".example.com"}}
	if topology == kov1alpha1.TopologyVanillaKubeadm {
		hc.Spec.Provisioning.ControlPlaneCount = ptr.To[int32](3)
	}
	if err := s.h.WS["acme"].Create(t.Context(), hc); err != nil {
		t.Fatal(err)
	}
	return hc
}

func (s *provisionSuite) get(t *testing.T, name string) *kov1alpha1.HostCluster {
	t.Helper()
	hc := &kov1alpha1.HostCluster{}
	if err := s.h.WS["acme"].Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, hc); err != nil {
		t.Fatal(err)
	}
	return hc
}

func describeHC(hc *kov1alpha1.HostCluster) string {
	var conds []string
	for _, c := range hc.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s(%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %q message %q conditions %v runs %+v", hc.Status.Phase, hc.Status.Message, conds, hc.Status.ProvisionRuns)
}

// hasBucket reports whether the S3 bucket exists.
func hasBucket(aws *awsfake.Endpoint, name string) bool {
	_, ok := aws.S3.Bucket(name)
	return ok
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
	s := setupProvisioning(t, 0, "acme")
	ctx := t.Context()

	t.Run("vanilla_kubeadm: one run, its progress, the node's kubeconfig, then on like a connected cluster", func(t *testing.T) {
		s.credential(t, "aws", map[string]string{api.CredentialAccessKey: s.user.AccessKeyID, api.CredentialSecretKey: s.user.SecretAccessKey})
		// Terraform creates the parameter seeded PENDING; node 0 overwrites it after kubeadm init.
		param := provisionenv.AdminKubeconfigParameter(fp(s.h.LC["acme"]), "vanilla-1")
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
		s.hostCluster(t, provisionenv.QuotaPrefix+"1", kov1alpha1.HostClusterModeProvisionVanilla, kov1alpha1.TopologyVanillaKubeadm, "aws")
		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 3*time.Minute, "quota-1 Failed", func() (bool, string) {
			hc = s.get(t, provisionenv.QuotaPrefix+"1")
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

	t.Run("eks with assume_role: the role is assumed for Terraform and in the kubeconfig's exec credential", func(t *testing.T) {
		role := s.aws.STS.AddRole("kubeopera-provisioning", "ext-1234")
		s.credential(t, "aws-role", map[string]string{api.CredentialAccessKey: s.user.AccessKeyID, api.CredentialSecretKey: s.user.SecretAccessKey,
			api.CredentialRoleARN: role, api.CredentialExternalID: "ext-1234"})
		s.hostCluster(t, "eks-1", kov1alpha1.HostClusterModeProvisionEKS, kov1alpha1.TopologyEKS, "aws-role")
		var hc *kov1alpha1.HostCluster
		framework.Eventually(t, 3*time.Minute, "eks-1 provisioned", func() (bool, string) {
			hc = s.get(t, "eks-1")
			return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition), describeHC(hc)
		})
		var assumed bool
		for _, c := range s.aws.STS.AssumeRoleCalls() {
			assumed = assumed || (c.RoleARN == role && c.ExternalID == "ext-1234")
		}
		if !assumed {
			t.Errorf("no sts:AssumeRole of %s with the external id: %+v", role, s.aws.STS.AssumeRoleCalls())
		}
		stored := &corev1.Secret{}
		if err := s.h.WS["acme"].Get(ctx, client.ObjectKey{Namespace: "default", Name: "hostcluster-eks-1-kubeconfig"}, stored); err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.Load(stored.Data["kubeconfig"])
		if err != nil {
			t.Fatal(err)
		}
		var exec bool
		for _, u := range kc.AuthInfos {
			exec = exec || (u.Exec != nil && u.Exec.Command == "/eks-token-helper" && slices.Contains(u.Exec.Args, role))
		}
		if !exec {
			t.Errorf("the EKS kubeconfig does not mint tokens with /eks-token-helper for the role: %+v", kc.AuthInfos)
		}
	})

	t.Run("a failed destroy keeps the HostCluster, with Terraform's error", func(t *testing.T) {
		c := s.h.WS["acme"]
		name := provisionenv.ProtectedPrefix + "1"
		hc := s.hostCluster(t, name, kov1alpha1.HostClusterModeProvisionEKS, kov1alpha1.TopologyEKS, "aws")
		framework.Eventually(t, 3*time.Minute, name+" provisioned", func() (bool, string) {
			hc = s.get(t, name)
			return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition), describeHC(hc)
		})
		hc.Spec.Provisioning.DeletionPolicy = kov1alpha1.DeletionPolicyDestroy
		if err := c.Update(ctx, hc); err != nil {
			t.Fatal(err)
		}
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
		hc := s.get(t, "vanilla-1")
		hc.Spec.Provisioning.DeletionPolicy = kov1alpha1.DeletionPolicyDestroy
		if err := c.Update(ctx, hc); err != nil {
			t.Fatal(err)
		}
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
