package hostcluster_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/test/sim/provisioning"
	"github.com/kubeopera/kubeopera/workspaces"
)

// Tenants who copied the same sample, in one AWS account; a tenant who writes another object's
// run ID into the job-ID annotation; a bucket name taken by another account; a tenant who
// deletes and re-creates HostClusters to start more runs. All on the real provisioner, runner
// and terraform (test/sim/provisioning), S3, SSM and STS played by sim.AWS.

// suiteRunCap is the suite's cap on runs per workspace and hour: more than any workspace but
// hooli starts here.
const suiteRunCap = 3

// sampleClusterID is the seed's sample clusterID, the one every tenant who copies it uses.
const sampleClusterID = "c-7e9d3a1b"

// accessKeyIn writes an access-key credential Secret for user into workspace ws.
func (s *provisionSuite) accessKeyIn(t *testing.T, ws, name string, user sim.AWSCredentials) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}},
		StringData: map[string]string{api.CredentialAccessKey: user.AccessKeyID, api.CredentialSecretKey: user.SecretAccessKey}}
	if err := s.h.WS[ws].Create(t.Context(), sec); err != nil {
		t.Fatal(err)
	}
}

// vanillaIn creates a provision_vanilla HostCluster (three control-plane nodes, the state in
// terraformEnvironment env) in workspace ws.
func (s *provisionSuite) vanillaIn(t *testing.T, ws, name, clusterID, env, credential string) *kov1alpha1.HostCluster {
	t.Helper()
	hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: kov1alpha1.HostClusterSpec{
		ClusterID: clusterID, Mode: kov1alpha1.HostClusterModeProvisionVanilla, Provider: "aws", Region: "eu-north-1",
		Provisioning: &kov1alpha1.HostClusterProvisioning{Topology: kov1alpha1.TopologyVanillaKubeadm, ControlPlaneCount: ptr.To[int32](3), NodeCount: 2,
			InstanceType: "t3.medium", KubernetesVersion: "1.31.0", CredentialRef: credential, TerraformEnvironment: env},
		GitOpsRepoURL: "https://git.example/gitops-iac.git", GitOpsPath: "fluxcd/clusters/" + name, Domain: name + ".example.com"}}
	if err := s.h.WS[ws].Create(t.Context(), hc); err != nil {
		t.Fatal(err)
	}
	return hc
}

// waitIn waits until the HostCluster satisfies ok and returns it.
func (s *provisionSuite) waitIn(t *testing.T, ws, name, what string, ok func(*kov1alpha1.HostCluster) bool) *kov1alpha1.HostCluster {
	t.Helper()
	var hc *kov1alpha1.HostCluster
	framework.Eventually(t, 3*time.Minute, ws+"/"+name+" "+what, func() (bool, string) {
		hc = s.getIn(t, ws, name)
		return ok(hc), describeHC(hc)
	})
	return hc
}

// adminConfNamed is an admin kubeconfig of the suite's target under context name: the same
// cluster, told apart by its bytes, so a delivered kubeconfig says which run published it.
func (s *provisionSuite) adminConfNamed(t *testing.T, name string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".conf")
	if err := devenv.WriteKubeconfig(s.target, path, name); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// waitingForKubeconfig: the HostCluster's own run started and waits for node 0's admin.conf.
func waitingForKubeconfig(hc *kov1alpha1.HostCluster) bool {
	c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
	return hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation] != "" && c != nil && c.Reason == "Applying" && strings.Contains(c.Message, "Waiting for the control plane")
}

func failedWith(reason string) func(*kov1alpha1.HostCluster) bool {
	return func(hc *kov1alpha1.HostCluster) bool {
		c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		return hc.Status.Phase == kov1alpha1.HostClusterPhaseFailed && c != nil && c.Reason == reason
	}
}

// stateLineage is the lineage of the Terraform state at bucket/key: every state Terraform starts
// gets a lineage of its own.
func stateLineage(t *testing.T, aws *sim.AWS, bucket, key string) string {
	t.Helper()
	raw, err := aws.S3.Object(bucket, key)
	if err != nil {
		t.Fatalf("no Terraform state at %s/%s: %v", bucket, key, err)
	}
	var st struct {
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.Lineage == "" {
		t.Fatalf("%s/%s is not a Terraform state: %v", bucket, key, err)
	}
	return st.Lineage
}

func TestProvisioningBindsNamesAndRunsToTheirWorkspace(t *testing.T) {
	s := setupProvisioning(t, suiteRunCap, "acme", "globex", "initech", "hooli")
	ctx := t.Context()
	conf := map[string][]byte{}
	runOf := map[string]string{} // workspace -> the sample cluster's run

	t.Run("two workspaces with the same clusterID and terraformEnvironment in one account share nothing", func(t *testing.T) {
		for _, ws := range []string{"acme", "globex"} {
			// Two users of one AWS account (sim.AWSAccountID).
			s.accessKeyIn(t, ws, "aws", s.aws.AddUser("tenant-"+ws))
			conf[ws] = s.adminConfNamed(t, ws+"-cluster")
			param := provisioning.AdminKubeconfigParameter(fp(s.h.LC[ws]), sampleClusterID)
			s.aws.SSM.Put(param, "SecureString", "PENDING")
			s.aws.SSM.PublishAdminKubeconfig(param, conf[ws], 2*time.Second)
			s.vanillaIn(t, ws, sampleClusterID, sampleClusterID, sampleClusterID, "aws")
		}
		buckets := map[string]string{}
		for _, ws := range []string{"acme", "globex"} {
			hc := s.waitIn(t, ws, sampleClusterID, "provisioned", func(hc *kov1alpha1.HostCluster) bool {
				return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition)
			})
			runOf[ws] = hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation]
			// Each run read its own workspace's SSM parameter: the delivered kubeconfig is the
			// one published under that workspace's prefix.
			delivered := &corev1.Secret{}
			if err := s.h.WS[ws].Get(ctx, client.ObjectKey{Namespace: "default", Name: "hostcluster-" + sampleClusterID + "-kubeconfig"}, delivered); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(delivered.Data["kubeconfig"], conf[ws]) {
				t.Errorf("%s: the delivered kubeconfig is not the one its own run's SSM parameter held", ws)
			}
			buckets[ws] = api.StateBucketName(fp(s.h.LC[ws]), sampleClusterID)
			if !hasBucket(s.aws, buckets[ws]) {
				t.Errorf("%s: no state bucket %s", ws, buckets[ws])
			}
		}
		if runOf["acme"] == runOf["globex"] || buckets["acme"] == buckets["globex"] {
			t.Fatalf("the workspaces share run %s / bucket %s", runOf["acme"], buckets["acme"])
		}
		if legacy := api.StateBucketPrefix + sampleClusterID; hasBucket(s.aws, legacy) {
			t.Errorf("bucket %s, named from the tenant's strings alone, exists", legacy)
		}
		// Two states, each in its own workspace's bucket only, each started by its own run.
		lineage := map[string]string{}
		for ws, other := range map[string]string{"acme": "globex", "globex": "acme"} {
			key := api.StateKey(fp(s.h.LC[ws]), sampleClusterID)
			lineage[ws] = stateLineage(t, s.aws, buckets[ws], key)
			keys, err := s.aws.S3.Keys(buckets[ws])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(keys, key) || slices.Contains(keys, api.StateKey(fp(s.h.LC[other]), sampleClusterID)) {
				t.Errorf("bucket %s holds %v: want %s's state and not %s's", buckets[ws], keys, ws, other)
			}
		}
		if lineage["acme"] == lineage["globex"] {
			t.Errorf("both workspaces' runs used one Terraform state (lineage %s)", lineage["acme"])
		}
		// The SSM parameters were read under two prefixes, one per workspace.
		var read []string
		for _, r := range s.aws.Requests("ssm") {
			if r.Operation == "GetParameter" && strings.HasSuffix(r.Resource, "/"+sampleClusterID+"/admin_kubeconfig") && !slices.Contains(read, r.Resource) {
				read = append(read, r.Resource)
			}
		}
		slices.Sort(read)
		want := []string{provisioning.AdminKubeconfigParameter(fp(s.h.LC["acme"]), sampleClusterID), provisioning.AdminKubeconfigParameter(fp(s.h.LC["globex"]), sampleClusterID)}
		slices.Sort(want)
		if !slices.Equal(read, want) {
			t.Errorf("the runs read SSM parameters %v, want one per workspace %v", read, want)
		}
	})

	// runUntouched returns a check that the run's Job and outputs Secret are as they are now.
	runUntouched := func(t *testing.T, id string) func() {
		t.Helper()
		job, err := s.admin.BatchV1().Jobs(api.DefaultJobsNamespace).Get(ctx, api.JobName(id), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.admin.CoreV1().Secrets(api.DefaultJobsNamespace).Get(ctx, api.OutputsSecretName(id), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return func() {
			t.Helper()
			j, err := s.admin.BatchV1().Jobs(api.DefaultJobsNamespace).Get(ctx, api.JobName(id), metav1.GetOptions{})
			if err != nil || j.ResourceVersion != job.ResourceVersion {
				t.Errorf("run %s's Job changed (%v)", id, err)
			}
			o, err := s.admin.CoreV1().Secrets(api.DefaultJobsNamespace).Get(ctx, api.OutputsSecretName(id), metav1.GetOptions{})
			if err != nil || o.ResourceVersion != out.ResourceVersion {
				t.Errorf("run %s's outputs Secret changed (%v)", id, err)
			}
		}
	}
	// stealRun is a tenant of ws pointing HostCluster name's annotation at run id while its own
	// run waits for the kubeconfig: the HostCluster fails, and nothing of the run reaches ws.
	stealRun := func(t *testing.T, ws, name, id string, victimConf []byte) {
		t.Helper()
		s.accessKeyIn(t, ws, name+"-aws", s.aws.AddUser(ws+"-"+name))
		// Its own run waits for a node that never publishes.
		s.aws.SSM.Put(provisioning.AdminKubeconfigParameter(fp(s.h.LC[ws]), name), "SecureString", "PENDING")
		s.vanillaIn(t, ws, name, name, "", name+"-aws")
		own := s.waitIn(t, ws, name, "waiting for its kubeconfig", waitingForKubeconfig).Annotations[kov1alpha1.ProvisionJobIDAnnotation]
		untouched := runUntouched(t, id)
		hc := s.getIn(t, ws, name)
		patch := client.MergeFrom(hc.DeepCopy())
		hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation] = id
		if err := s.h.WS[ws].Patch(ctx, hc, patch); err != nil {
			t.Fatal(err)
		}
		hc = s.waitIn(t, ws, name, "failed with "+kov1alpha1.RunNotOwnedReason, failedWith(kov1alpha1.RunNotOwnedReason))
		c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		for _, part := range []string{id, "was not started for this HostCluster", kov1alpha1.RetryAnnotation} {
			if !strings.Contains(c.Message, part) {
				t.Errorf("Provisioned message %q lacks %q", c.Message, part)
			}
		}
		for other, lc := range s.h.LC {
			if other != ws && strings.Contains(c.Message+hc.Status.Message, lc) {
				t.Errorf("the message names workspace %s (%s): %q", other, lc, c.Message)
			}
		}
		// Never followed: no kubeconfig stored or delivered, the run not in the history. Failed is
		// terminal, and the run is refused before anything of it is fetched.
		framework.Holds(t, "nothing of run "+id+" in "+ws, func() (bool, string) {
			hc := s.getIn(t, ws, name)
			secrets := &corev1.SecretList{}
			if err := s.h.WS[ws].List(ctx, secrets, client.InNamespace("default")); err != nil {
				return false, err.Error()
			}
			for _, sec := range secrets.Items {
				if deliveredToAnother(&sec, hc) {
					continue // the run's own HostCluster's delivery, in the same workspace
				}
				for _, v := range sec.Data {
					if bytes.Equal(v, victimConf) {
						return false, "Secret " + sec.Name + " holds the other run's kubeconfig"
					}
				}
				if sec.Name == "hostcluster-"+name+"-kubeconfig" {
					return false, "Secret " + sec.Name + " was delivered"
				}
			}
			stored := &corev1.Secret{}
			err := s.h.Backend.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(s.h.LC[ws]), Name: "hostcluster-" + name + "-kubeconfig"}, stored)
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("a kubeconfig was stored on the backend (%v)", err)
			}
			for _, r := range hc.Status.ProvisionRuns {
				if r.ID == id {
					return false, "run " + id + " is in the run history"
				}
			}
			return hc.Status.KubeconfigSecret == "" && hc.Status.Phase == kov1alpha1.HostClusterPhaseFailed, describeHC(hc)
		})
		untouched()
		if len(hc.Status.ProvisionRuns) != 1 || hc.Status.ProvisionRuns[0].ID != own {
			t.Errorf("run history %+v, want its own run %s only", hc.Status.ProvisionRuns, own)
		}
	}

	t.Run("a run of another workspace named in the annotation is never followed", func(t *testing.T) {
		if runOf["acme"] == "" {
			t.Skip("needs the first subtest's runs")
		}
		stealRun(t, "globex", "thief", runOf["acme"], conf["acme"])
		// The run's own HostCluster is unaffected.
		if hc := s.getIn(t, "acme", sampleClusterID); !reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition) || hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation] != runOf["acme"] {
			t.Errorf("acme's HostCluster changed: %s", describeHC(hc))
		}
	})

	t.Run("a run of another HostCluster of the same workspace is never followed", func(t *testing.T) {
		if runOf["acme"] == "" {
			t.Skip("needs the first subtest's runs")
		}
		stealRun(t, "acme", "sibling", runOf["acme"], conf["acme"])
	})

	t.Run("a state bucket another account took is refused and nothing is written to it", func(t *testing.T) {
		bucket := api.StateBucketName(fp(s.h.LC["initech"]), "c-squat")
		// The squatter creates the bucket the workspace will use and lets every account write.
		squatter := s3As(s.aws, s.aws.AddUserInAccount("999999999999", "squatter"))
		if _, err := squatter.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket),
			CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: "eu-north-1"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.aws.S3.GrantAccount(bucket, sim.AWSAccountID); err != nil {
			t.Fatal(err)
		}
		s.accessKeyIn(t, "initech", "aws", s.aws.AddUser("tenant-initech"))
		s.vanillaIn(t, "initech", "c-squat", "c-squat", "", "aws")
		hc := s.waitIn(t, "initech", "c-squat", "failed", failedWith(kov1alpha1.ProvisioningFailedReason))
		c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		if want := "state bucket " + bucket + " is not owned by AWS account " + sim.AWSAccountID; !strings.Contains(c.Message, want) {
			t.Errorf("Provisioned message %q does not say %q", c.Message, want)
		}
		if keys, err := s.aws.S3.Keys(bucket); err != nil || len(keys) != 0 {
			t.Errorf("the squatted bucket holds %v (%v): the run wrote to it", keys, err)
		}
		for _, r := range s.aws.Requests("s3") {
			if strings.HasPrefix(r.Resource, bucket) && r.Status < 300 && r.AccessKeyID != "" && r.Operation != "CreateBucket" {
				t.Errorf("%s on the squatted bucket was answered %d", r.Operation, r.Status)
			}
		}
	})

	t.Run("runs per hour are counted per workspace, across deleted and re-created HostClusters", func(t *testing.T) {
		c := s.h.WS["hooli"]
		s.accessKeyIn(t, "hooli", "aws", s.aws.AddUser("tenant-hooli"))
		quotaA := provisioning.QuotaPrefix + "a"
		// Run 1, then the HostCluster is deleted and made again: run 2.
		for range 2 {
			s.vanillaIn(t, "hooli", quotaA, quotaA, "", "aws")
			s.waitIn(t, "hooli", quotaA, "failed", failedWith(kov1alpha1.ProvisioningFailedReason))
			if err := c.Delete(ctx, s.getIn(t, "hooli", quotaA)); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, 2*time.Minute, quotaA+" gone", func() (bool, string) {
				err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: quotaA}, &kov1alpha1.HostCluster{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
		}
		if n := len(s.runJobs(t, quotaA)); n != 2 {
			t.Fatalf("%d runs for %s, want 2 (one per HostCluster made)", n, quotaA)
		}
		// Run 3 of the hour.
		quotaB := provisioning.QuotaPrefix + "b"
		s.vanillaIn(t, "hooli", quotaB, quotaB, "", "aws")
		s.waitIn(t, "hooli", quotaB, "failed", failedWith(kov1alpha1.ProvisioningFailedReason))
		// A fourth is over the cap: refused, and nothing made for it.
		quotaC := provisioning.QuotaPrefix + "c"
		s.vanillaIn(t, "hooli", quotaC, quotaC, "", "aws")
		hc := s.waitIn(t, "hooli", quotaC, "failed with "+kov1alpha1.QuotaExceededReason, failedWith(kov1alpha1.QuotaExceededReason))
		cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		for _, part := range []string{"started 3 provisioning runs in the last hour", fmt.Sprintf("--max-provisioning-runs-per-workspace-per-hour=%d", suiteRunCap), kov1alpha1.RetryAnnotation} {
			if !strings.Contains(cond.Message, part) {
				t.Errorf("Provisioned message %q lacks %q", cond.Message, part)
			}
		}
		// Failed is terminal (no pass acts on it until a retry), and the cap is checked before the
		// credential is copied and the run is asked for: what exists now is all there will be.
		if n := len(s.runJobs(t, quotaC)); n != 0 {
			t.Errorf("%d runs for %s over the cap", n, quotaC)
		}
		err := s.h.Backend.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(s.h.LC["hooli"]), Name: "hostcluster-" + quotaC + "-cloud-credential"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("credential copy of %s over the cap: %v", quotaC, err)
		}
		if hc := s.getIn(t, "hooli", quotaC); len(hc.Status.ProvisionRuns) != 0 || hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation] != "" {
			t.Errorf("a run recorded for %s over the cap: %s", quotaC, describeHC(hc))
		}
	})
}

// deliveredToAnother reports whether sec was delivered for another HostCluster than hc (it is
// owned by it, as every delivered Secret is owned by its HostCluster).
func deliveredToAnother(sec *corev1.Secret, hc *kov1alpha1.HostCluster) bool {
	for _, o := range sec.OwnerReferences {
		if o.Kind == "HostCluster" && o.UID != hc.UID {
			return true
		}
	}
	return false
}

// s3As is an S3 client of the endpoint signed with user's key.
func s3As(e *sim.AWS, user sim.AWSCredentials) *s3.Client {
	return s3.NewFromConfig(aws.Config{Region: "eu-north-1", BaseEndpoint: aws.String(e.URL),
		Credentials: credentials.NewStaticCredentialsProvider(user.AccessKeyID, user.SecretAccessKey, "")})
}
