package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/manager"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/reconcile"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/framework"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/test/sim/provisioning"
	"github.com/kubeopera/kubeopera/workspaces"
)

// The HostCluster modes that build a cluster (README "Provisioning a cluster on AWS"), driven as a
// tenant through the manager binary. The provisioning side is test/sim/provisioning on the
// suite's backend: the real provisioner (API and run store, as its ServiceAccount), the real
// terraform-runner binary with the real terraform in the Job's Pod (sim.RunnerJobs plays the
// Job controller and the kubelet), and sim.AWS playing S3, SSM and STS, with the offline stand-in
// module (no AWS provider here). The cluster a vanilla_kubeadm run "builds" is the suite's target
// (hostTarget): its admin kubeconfig is what sim.AWS's SSM publishes as the control-plane node's
// admin.conf, so a provisioned HostCluster goes on to Flux, the GitOps tree and Ready on a real
// API server.

// provisionerAPIKey is the API key shared by the manager (CLUSTER_PROVISIONER_API_KEY) and the
// provisioner.
const provisionerAPIKey = "e2e-provisioner-key"

// runnerWaitingForKubeconfig is how the runner's progress reads while a vanilla_kubeadm run waits
// for node 0's admin.conf (internal/terraform/runner).
const runnerWaitingForKubeconfig = "Waiting for the control plane to publish its admin kubeconfig"

var sharedProvisioning lazy[*provisioning.Env]

// provisioning returns the suite's provisioning side, started at the first call on the address
// the manager was given (e.provisionerAddr). Its log is provisioner.log in the suite's directory.
func (e *env) provisioning(t *testing.T) *provisioning.Env {
	t.Helper()
	target := e.hostTarget(t)
	return sharedProvisioning.get(t, e, "the provisioner", func() (*provisioning.Env, func(), error) {
		return e.startProvisioning(target)
	})
}

func (e *env) startProvisioning(target *sim.Target) (*provisioning.Env, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runner, err := framework.Command("terraform-runner")
	if err != nil {
		return nil, nil, err
	}
	logf, err := os.Create(filepath.Join(e.dir, "provisioner.log"))
	if err != nil {
		return nil, nil, err
	}
	pe, err := provisioning.Start(ctx, provisioning.Options{
		Backend: e.backend.Config, Root: framework.RepoRoot(), RunnerBinary: runner,
		Addr: e.provisionerAddr, APIKey: provisionerAPIKey,
		ClusterCA: target.Cluster.Config.CAData, SSMPollInterval: 500 * time.Millisecond, Log: logf,
	})
	if err != nil {
		_ = logf.Close()
		return nil, nil, err
	}
	return pe, func() { pe.Stop(); _ = logf.Close() }, nil
}

// requestCluster does what a tenant does to have a vanilla_kubeadm cluster built: an AWS
// credential Secret (a user's access key, labelled so the platform may read it), the Git
// credentials, and the HostCluster (controlPlaneCount 3). The cluster goes on to the suite's Flux
// tree (clusterPath) like every HostCluster on the shared target. It returns the AWS user's keys.
func (e *env) requestCluster(t *testing.T, c client.Client, pe *provisioning.Env, name, clusterID string) sim.AWSCredentials {
	t.Helper()
	return e.requestClusterWith(t, c, pe, name, clusterID, "")
}

// requestClusterWith is requestCluster with more spec.provisioning lines (YAML, four spaces
// indented), e.g. "    approvePlan: manual\n".
func (e *env) requestClusterWith(t *testing.T, c client.Client, pe *provisioning.Env, name, clusterID, provisioningExtra string) sim.AWSCredentials {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hcNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	user := pe.AWS.AddUser("tenant-" + clusterID)
	access := map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: hcNamespace, Name: "aws-credentials", Labels: access},
			StringData: map[string]string{api.CredentialAccessKey: user.AccessKeyID, api.CredentialSecretKey: user.SecretAccessKey}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: hcNamespace, Name: "gitops-iac-credentials", Labels: access},
			Data: map[string][]byte{"username": []byte(sim.GitUsername), "password": []byte(sim.GitPassword)}},
	} {
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	y := fmt.Sprintf(`
apiVersion: kubeopera.io/v1alpha1
kind: HostCluster
metadata:
  name: %s
  namespace: %s
spec:
  clusterID: %q
  mode: provision_vanilla
  provider: aws
  region: eu-north-1
  provisioning:
    topology: vanilla_kubeadm
    controlPlaneCount: 3
    nodeCount: 2
    instanceType: t3.medium
    kubernetesVersion: "1.31.0"
    credentialRef: aws-credentials
%s  gitOpsRepoURL: %s
  gitOpsPath: %s
  gitCredentialsSecretRef: gitops-iac-credentials
  domain: my-cluster.acme.com
`, name, hcNamespace, clusterID, provisioningExtra, e.gitops.RepoURL, clusterPath)
	hc := &kov1alpha1.HostCluster{}
	if err := yaml.UnmarshalStrict([]byte(y), hc); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	return user
}

// hasBucket reports whether the S3 bucket exists.
func hasBucket(aws *sim.AWS, name string) bool {
	_, ok := aws.S3.Bucket(name)
	return ok
}

// provisionRuns lists the provisioner's Jobs for a cluster, as an admin does with
// `kubectl -n kubeopera-provisioning get jobs -l provisioner.kubeopera.io/cluster-id=<id>`.
func (e *env) provisionRuns(t *testing.T, clusterID string) []batchv1.Job {
	t.Helper()
	list := &batchv1.JobList{}
	if err := e.backendC.List(context.Background(), list, client.InNamespace(api.DefaultJobsNamespace),
		client.MatchingLabels{api.LabelCluster: clusterID}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitRunWaitingForKubeconfig waits until the HostCluster shows its run waiting for the
// control-plane node's admin.conf (Provisioned False, reason Applying, the runner's message) with
// the run's ID in the annotation, and returns the ID.
func waitRunWaitingForKubeconfig(t *testing.T, c client.Client, name string) string {
	t.Helper()
	var id string
	framework.Eventually(t, 3*time.Minute, "HostCluster "+name+"'s run waiting for the kubeconfig", func() (bool, string) {
		hc := getHostCluster(t, c, name)
		id = hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation]
		cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
		return id != "" && hc.Status.Phase == kov1alpha1.HostClusterPhaseProvisioning && cond != nil &&
				cond.Status == metav1.ConditionFalse && cond.Reason == "Applying" && strings.Contains(cond.Message, runnerWaitingForKubeconfig),
			describeHC(hc) + " annotation " + id
	})
	return id
}

// checkOneSucceededRun checks what a HostCluster whose cluster was built shows: Provisioned True,
// one succeeded run in the history (the one in the annotation, wantID when given), exactly one Job
// for the cluster (one POST), and the delivered kubeconfig is the node's admin.conf.
func (e *env) checkOneSucceededRun(t *testing.T, c client.Client, hc *kov1alpha1.HostCluster, wantID string, adminConf []byte) {
	t.Helper()
	id := hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation]
	if wantID != "" && id != wantID {
		t.Errorf("annotation %s = %q, want the run %q started before", kov1alpha1.ProvisionJobIDAnnotation, id, wantID)
	}
	if cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition); cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != kov1alpha1.SucceededReason || !strings.Contains(cond.Message, id) {
		t.Errorf("Provisioned = %+v, want True/Succeeded naming run %s", cond, id)
	}
	runs := hc.Status.ProvisionRuns
	if len(runs) != 1 || runs[0].ID != id || runs[0].Outcome != string(api.StatusSucceeded) || runs[0].Operation != string(api.OperationApply) ||
		runs[0].StartedAt == nil || runs[0].FinishedAt == nil {
		t.Errorf("run history %+v, want one succeeded apply run %s", runs, id)
	}
	jobs := e.provisionRuns(t, hc.Spec.ClusterID)
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name+"(run "+j.Labels[api.LabelRun]+")")
	}
	if len(jobs) != 1 || jobs[0].Labels[api.LabelRun] != id || jobs[0].Labels[api.LabelOperation] != string(api.OperationApply) {
		t.Errorf("Jobs for cluster %s in %s: %v, want exactly one, of run %s", hc.Spec.ClusterID, api.DefaultJobsNamespace, names, id)
	}
	sec := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-" + hc.Spec.ClusterID + "-kubeconfig"}, sec); err != nil {
		t.Fatalf("the provisioned cluster's kubeconfig was not delivered: %v", err)
	}
	if string(sec.Data["kubeconfig"]) != string(adminConf) {
		t.Errorf("the delivered kubeconfig is not the admin.conf the node published:\n%s", sec.Data["kubeconfig"])
	}
	if hc.Status.KubeconfigSecret != "hostcluster-"+hc.Spec.ClusterID+"-kubeconfig" {
		t.Errorf("status.kubeconfigSecret = %q", hc.Status.KubeconfigSecret)
	}
}

// watchHostCluster records, as `kubectl get hostclusters -w` shows them, every phase of the
// HostCluster (from the first non-empty one) and every reason of its Provisioned condition.
func (e *env) watchHostCluster(t *testing.T, path, name string) func() (phases, reasons []string) {
	t.Helper()
	wc, err := client.NewWithWatch(e.kcpConfig(path), client.Options{Scheme: manager.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &kov1alpha1.HostClusterList{}, client.InNamespace(hcNamespace))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var phases, reasons []string
	appendNew := func(list []string, v string) []string {
		if len(list) == 0 || list[len(list)-1] != v {
			return append(list, v)
		}
		return list
	}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			hc, ok := ev.Object.(*kov1alpha1.HostCluster)
			if !ok || hc.Name != name {
				continue
			}
			mu.Lock()
			phases = appendNew(phases, string(hc.Status.Phase))
			if c := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition); c != nil {
				reasons = appendNew(reasons, c.Reason)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() ([]string, []string) {
		mu.Lock()
		defer mu.Unlock()
		p := slices.Clone(phases)
		for len(p) > 0 && p[0] == "" {
			p = p[1:]
		}
		return p, slices.Clone(reasons)
	}
}

func TestProvisionVanillaClusterThenOnLikeAConnectedOne(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	target := e.hostTarget(t)
	pe := e.provisioning(t)
	c, lc, name := e.tenantWorkspace(t, "prov-vanilla")
	seen := e.watchHostCluster(t, "root:orgs:"+name, "built")

	// Terraform creates the parameter seeded PENDING; node 0 overwrites it after kubeadm init.
	param := provisioning.AdminKubeconfigParameter(workspaces.Fingerprint(lc), "prov-vanilla")
	pe.AWS.SSM.Put(param, "SecureString", "PENDING")
	pe.AWS.SSM.PublishAdminKubeconfig(param, target.Kubeconfig, 5*time.Second)
	user := e.requestCluster(t, c, pe, "built", "prov-vanilla")

	framework.Eventually(t, 3*time.Minute, "built past Provisioning", func() (bool, string) {
		phases, _ := seen()
		return slices.Contains(phases, string(kov1alpha1.HostClusterPhaseBootstrappingFlux)), fmt.Sprint(phases)
	})
	hc := waitHostClusterPhase(t, c, "built", kov1alpha1.HostClusterPhaseReady, 5*time.Minute)

	want := []string{"Pending", "Provisioning", "BootstrappingFlux", "GeneratingGitOpsTree", "InstallingKubeOpera", "Ready"}
	framework.Eventually(t, 10*time.Second, "phases seen", func() (bool, string) {
		phases, _ := seen()
		return slices.Equal(phases, want), fmt.Sprintf("%v, want %v", phases, want)
	})
	_, reasons := seen()
	if len(reasons) < 2 || reasons[len(reasons)-1] != kov1alpha1.SucceededReason ||
		!slices.ContainsFunc(reasons, func(r string) bool { return r == "Queued" || r == "Planning" || r == "Applying" }) {
		t.Errorf("Provisioned's reasons %v: want the run's progress (Queued, Planning, Applying), then Succeeded", reasons)
	}
	e.checkOneSucceededRun(t, c, hc, "", target.Kubeconfig)
	if !reconcile.IsTrue(hc, kov1alpha1.AccessValidatedCondition) || !reconcile.IsTrue(hc, kov1alpha1.FluxReadyCondition) || !reconcile.IsTrue(hc, kov1alpha1.ReadyCondition) {
		t.Errorf("not on like a connected cluster: %s", describeHC(hc))
	}

	// The credential went to the backend as the platform's copy, and Terraform's state calls were
	// signed with the tenant's key, read from it by the provisioner's run.
	copyName := "hostcluster-prov-vanilla-cloud-credential"
	cp := &corev1.Secret{}
	if err := e.backendC.Get(ctx, client.ObjectKey{Namespace: workspaces.Namespace(lc), Name: copyName}, cp); err != nil {
		t.Errorf("no credential copy %s/%s: %v", workspaces.Namespace(lc), copyName, err)
	}
	if string(cp.Data[api.CredentialAccessKey]) != user.AccessKeyID || string(cp.Data[api.CredentialSecretKey]) != user.SecretAccessKey {
		t.Error("the credential copy does not hold the tenant's access key")
	}
	signed := false
	for _, r := range pe.AWS.Requests("s3") {
		signed = signed || r.AccessKeyID == user.AccessKeyID
	}
	if !signed {
		t.Error("no S3 call was signed with the tenant's access key")
	}
	// The secret key never shows where the tenant or an operator reads.
	if strings.Contains(e.managerLogs(), user.SecretAccessKey) || strings.Contains(fmt.Sprintf("%+v", hc.Status), user.SecretAccessKey) {
		t.Error("the tenant's AWS secret key shows in the manager's log or the HostCluster's status")
	}
	if bucket := api.StateBucketName(workspaces.Fingerprint(lc), "prov-vanilla"); !hasBucket(pe.AWS, bucket) {
		t.Errorf("the state bucket %s was not created", bucket)
	}
}

// TestProvisionResumesTheSameRunAfterAManagerRestart stops and starts the manager (not parallel:
// see restart_test.go) while the run waits for the control-plane node's kubeconfig.
func TestProvisionResumesTheSameRunAfterAManagerRestart(t *testing.T) {
	e := sharedEnv(t)
	t.Cleanup(func() { e.ensureManagerRunning(t) })
	target := e.hostTarget(t)
	pe := e.provisioning(t)
	c, lc, _ := e.tenantWorkspace(t, "prov-restart")

	param := provisioning.AdminKubeconfigParameter(workspaces.Fingerprint(lc), "prov-restart")
	pe.AWS.SSM.Put(param, "SecureString", "PENDING")
	e.requestCluster(t, c, pe, "restarted", "prov-restart")
	id := waitRunWaitingForKubeconfig(t, c, "restarted")
	if jobs := e.provisionRuns(t, "prov-restart"); len(jobs) != 1 {
		t.Fatalf("%d Jobs before the restart, want one", len(jobs))
	}

	e.stopManager()
	if err := e.startManager(); err != nil {
		t.Fatal(err)
	}
	// The node publishes a while after the new manager is up: it polls the waiting run meanwhile.
	pe.AWS.SSM.PublishAdminKubeconfig(param, target.Kubeconfig, 10*time.Second)
	var hc *kov1alpha1.HostCluster
	framework.Eventually(t, 3*time.Minute, "restarted provisioned", func() (bool, string) {
		hc = getHostCluster(t, c, "restarted")
		return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition), describeHC(hc)
	})
	e.checkOneSucceededRun(t, c, hc, id, target.Kubeconfig)
}

// TestProvisionerAPIAsAnAdminSeesIt: the provisioner's API (README: header X-Api-Key) about a
// tenant's run, while it waits for the node's kubeconfig and once it succeeded.
func TestProvisionerAPIAsAnAdminSeesIt(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	target := e.hostTarget(t)
	pe := e.provisioning(t)
	c, lc, _ := e.tenantWorkspace(t, "prov-api")
	param := provisioning.AdminKubeconfigParameter(workspaces.Fingerprint(lc), "prov-api")
	pe.AWS.SSM.Put(param, "SecureString", "PENDING")
	e.requestCluster(t, c, pe, "api", "prov-api")
	id := waitRunWaitingForKubeconfig(t, c, "api")

	call := func(path, key string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, pe.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}

	if code, body := call("/health", ""); code != http.StatusOK {
		t.Errorf("GET /health without a key: %d %s, want 200", code, body)
	}
	for _, path := range []string{"/api/v1/provisions/" + id, "/api/v1/provisions/" + id + "/kubeconfig", "/api/v1/provisions/" + id + "/logs", "/api/v1/provisions/no-such-run"} {
		for what, key := range map[string]string{"without X-Api-Key": "", "with a wrong key": provisionerAPIKey + "x"} {
			code, body := call(path, key)
			var er api.ErrorResponse
			if code != http.StatusUnauthorized || json.Unmarshal([]byte(body), &er) != nil || er.Error != "unauthorized" || er.Field != "" ||
				strings.Contains(body, id) || strings.Contains(body, "prov-api") || strings.Contains(body, "applying") {
				t.Errorf("GET %s %s: %d %s, want 401 saying nothing more than unauthorized", path, what, code, body)
			}
		}
	}

	code, body := call("/api/v1/provisions/"+id, provisionerAPIKey)
	var p api.Provision
	if code != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil || p.ID != id || p.ClusterID != "prov-api" ||
		p.Operation != api.OperationApply || p.Status != api.StatusApplying || !strings.Contains(p.Message, runnerWaitingForKubeconfig) {
		t.Errorf("GET the waiting run: %d %s, want 200, applying, waiting for the kubeconfig", code, body)
	}
	if code, body := call("/api/v1/provisions/"+id+"/kubeconfig", provisionerAPIKey); code != http.StatusConflict {
		t.Errorf("GET the kubeconfig of a running run: %d %s, want 409", code, body)
	}
	if code, body := call("/api/v1/provisions/no-such-run", provisionerAPIKey); code != http.StatusNotFound {
		t.Errorf("GET an unknown run: %d %s, want 404", code, body)
	}

	pe.AWS.SSM.PublishAdminKubeconfig(param, target.Kubeconfig, 0)
	framework.Eventually(t, 2*time.Minute, "run "+id+" succeeded", func() (bool, string) {
		code, body := call("/api/v1/provisions/"+id, provisionerAPIKey)
		var p api.Provision
		return code == http.StatusOK && json.Unmarshal([]byte(body), &p) == nil && p.Status == api.StatusSucceeded && p.FinishedAt != nil, fmt.Sprintf("%d %s", code, body)
	})
	code, body = call("/api/v1/provisions/"+id+"/kubeconfig", provisionerAPIKey)
	var kc api.KubeconfigResponse
	if code != http.StatusOK || json.Unmarshal([]byte(body), &kc) != nil || kc.Kubeconfig != string(target.Kubeconfig) {
		t.Errorf("GET the kubeconfig of the succeeded run: %d, want 200 with the node's admin.conf", code)
	}
	if code, _ := call("/api/v1/provisions/"+id+"/kubeconfig", ""); code != http.StatusUnauthorized {
		t.Errorf("GET the kubeconfig of the succeeded run without a key: %d, want 401", code)
	}
	// The tenant's HostCluster is built from that same run.
	framework.Eventually(t, 2*time.Minute, "api provisioned", func() (bool, string) {
		hc := getHostCluster(t, c, "api")
		return reconcile.IsTrue(hc, kov1alpha1.ProvisionedCondition), describeHC(hc)
	})
	e.checkOneSucceededRun(t, c, getHostCluster(t, c, "api"), id, target.Kubeconfig)
}

func TestProvisionFailedApplyFailsTheHostClusterWithTerraformsError(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	pe := e.provisioning(t)
	c, _, _ := e.tenantWorkspace(t, "prov-quota")
	clusterID := provisioning.QuotaPrefix + "e2e"
	e.requestCluster(t, c, pe, "no-vpc-left", clusterID)

	hc := waitHostClusterPhase(t, c, "no-vpc-left", kov1alpha1.HostClusterPhaseFailed, 3*time.Minute)
	for _, text := range []string{"VpcLimitExceeded", "The maximum number of VPCs has been reached."} {
		if !strings.Contains(hc.Status.Message, text) {
			t.Errorf("status.message %q lacks Terraform's error %q", hc.Status.Message, text)
		}
	}
	cond := reconcile.GetCondition(hc, kov1alpha1.ProvisionedCondition)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != kov1alpha1.ProvisioningFailedReason || !strings.Contains(cond.Message, "VpcLimitExceeded") {
		t.Errorf("Provisioned = %+v, want False/ProvisioningFailed with Terraform's error", cond)
	}
	id := hc.Annotations[kov1alpha1.ProvisionJobIDAnnotation]
	if runs := hc.Status.ProvisionRuns; len(runs) != 1 || runs[0].ID != id || runs[0].Outcome != string(api.StatusFailed) || runs[0].FinishedAt == nil {
		t.Errorf("run history %+v, want one failed run %s", runs, id)
	}
	// A failed run is not retried by itself, and nothing was delivered.
	framework.Consistently(t, 3*time.Second, "one run, still Failed", func() (bool, string) {
		jobs := e.provisionRuns(t, clusterID)
		hc := getHostCluster(t, c, "no-vpc-left")
		return len(jobs) == 1 && hc.Status.Phase == kov1alpha1.HostClusterPhaseFailed, fmt.Sprintf("%d Jobs, %s", len(jobs), describeHC(hc))
	})
	err := c.Get(context.Background(), client.ObjectKey{Namespace: hcNamespace, Name: "hostcluster-" + clusterID + "-kubeconfig"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a kubeconfig was delivered for a cluster that was not built (err %v)", err)
	}
}
