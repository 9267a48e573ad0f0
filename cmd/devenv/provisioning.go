package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/terraform/runner"
	"github.com/kubeopera/kubeopera/syncer"
	"github.com/kubeopera/kubeopera/test/sim"
	"github.com/kubeopera/kubeopera/test/sim/provisioning"
	"github.com/kubeopera/kubeopera/workspaces"
)

// What make run keeps for provisioning, under <state>/provisioning: the provisioner's API key
// (kept across runs), the built runner, and provisioning.json, which the other bin/devenv
// commands read (written at every start, removed when provisioning is not started).
const (
	provisioningDir       = "provisioning"
	provisioningAPIKey    = "api-key"
	provisioningStateFile = "provisioning.json"
	// devRegion is the region the sample asks for (config/samples/hostcluster-provisioned.yaml),
	// and what simulate-control-plane signs with by default.
	devRegion = "eu-north-1"
	// devSSMPollInterval is how often the runs' runner reads the admin kubeconfig parameter
	// (the product's default is 20 s).
	devSSMPollInterval = 2 * time.Second
	// awsCredentialsSecret is the Secret aws-credentials prints, the sample's credentialRef.
	awsCredentialsSecret = "aws-credentials"
)

// awsKey is an access key of an sim.AWS user.
type awsKey struct {
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
}

// provisioningState is what the make-run process saves for the other bin/devenv commands: the
// local AWS endpoint lives in that process, and they reach it over HTTP with signed requests.
type provisioningState struct {
	// ProvisionerURL is the provisioner's API (its key is in provisioningAPIKey).
	ProvisionerURL string `json:"provisionerURL"`
	// AWSEndpoint is the local AWS endpoint (S3, SSM, STS).
	AWSEndpoint string `json:"awsEndpoint"`
	// Admin is user devenv-admin's key: simulate-control-plane signs with it, as node 0's
	// instance role would.
	Admin awsKey `json:"admin"`
	// Tenant is user aws-credentials' key: what `devenv aws-credentials` prints for the tenant.
	Tenant awsKey `json:"tenant"`
}

// startProvisioning starts the provisioning side on the embedded backend (test/sim/provisioning:
// the real provisioner as its ServiceAccount, the runs' Pods played with the
// real bin/terraform-runner and terraform, AWS's S3/SSM/STS played by sim.AWS, the offline
// stand-in module), with two AWS users whose keys it saves. It returns nil when terraform is not on PATH, after
// saying so: make run works without provisioning then.
func startProvisioning(ctx context.Context, root, dev, state string, backend *rest.Config, clusterCA []byte, log io.Writer) (*provisioning.Env, error) {
	dir := filepath.Join(dev, provisioningDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// What the other commands read belongs to this run only.
	if err := os.Remove(filepath.Join(dir, provisioningStateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if _, err := provisioning.Terraform(root); err != nil {
		say("terraform is not on PATH: provisioning is NOT started (HostClusters of mode provision_vanilla and provision_eks fail with ProvisioningUnavailable); put terraform %s on PATH and restart to play it", runner.TerraformVersion)
		return nil, nil
	}
	runnerBin := filepath.Join(binDir(root), "terraform-runner")
	if _, err := os.Stat(runnerBin); err != nil {
		return nil, fmt.Errorf("the provisioning runs need %s, which is missing: run `make build` (make run builds it)", runnerBin)
	}
	key, err := provisionerKey(filepath.Join(dir, provisioningAPIKey))
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + envOr("KUBEOPERA_PROVISIONER_PORT", "8092")
	say("Starting the cluster provisioner on http://%s (API key in %s/%s/%s), its runs' Pods played with the real terraform-runner and terraform, AWS played locally; log in %s/logs/provisioner.log", addr, state, provisioningDir, provisioningAPIKey, state)
	env, err := provisioning.Start(ctx, provisioning.Options{
		Backend: backend, Root: root, RunnerBinary: runnerBin, Addr: addr, APIKey: key,
		ClusterCA: clusterCA, SSMPollInterval: devSSMPollInterval, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to start the provisioner: %w", err)
	}
	admin, tenant := env.AWS.AddUser("devenv-admin"), env.AWS.AddUser(awsCredentialsSecret)
	st := provisioningState{
		ProvisionerURL: env.URL, AWSEndpoint: env.AWS.URL,
		Admin:  awsKey{AccessKeyID: admin.AccessKeyID, SecretAccessKey: admin.SecretAccessKey},
		Tenant: awsKey{AccessKeyID: tenant.AccessKeyID, SecretAccessKey: tenant.SecretAccessKey},
	}
	raw, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		env.Stop()
		return nil, err
	}
	if err := writePrivate(filepath.Join(dir, provisioningStateFile), raw); err != nil {
		env.Stop()
		return nil, err
	}
	go copyRunLogs(ctx, backend, env.Runner, filepath.Join(dev, "logs", "runs"))
	say("Started the cluster provisioner %s and the local AWS endpoint %s (S3, SSM, STS; users devenv-admin and %s, keys in %s/%s/%s)",
		env.URL, env.AWS.URL, awsCredentialsSecret, state, provisioningDir, provisioningStateFile)
	return env, nil
}

// provisionerKey returns the API key stored in path, generating and storing one when there is none.
func provisionerKey(path string) (string, error) {
	if raw, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(raw))) > 0 {
		return strings.TrimSpace(string(raw)), nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	key := hex.EncodeToString(b)
	return key, writePrivate(path, []byte(key+"\n"))
}

// writePrivate writes a file only its owner may read.
func writePrivate(path string, raw []byte) error {
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// loadProvisioningState reads what the running make run saved.
func loadProvisioningState() (provisioningState, error) {
	var st provisioningState
	raw, err := os.ReadFile(filepath.Join(stateDir(), provisioningDir, provisioningStateFile))
	if err != nil {
		return st, fmt.Errorf("provisioning is not running (is `make run` running, with terraform on PATH and the embedded backend?): %w", err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("%s: %w", provisioningStateFile, err)
	}
	return st, nil
}

// awsCredentials prints the Secret a tenant puts next to a provisioned HostCluster (its
// spec.provisioning.credentialRef): the key of sim.AWS user aws-credentials, which the running
// make run created, under access_key and secret_key, labelled so the platform may read it; and
// its namespace.
func awsCredentials(args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Printf(`usage: devenv aws-credentials [namespace, default kubeopera-system]

Prints Secret %s (keys %s and %s of the local AWS endpoint's user %s, which the running
make run created; labelled %s=%s) and its Namespace, for
  bin/devenv aws-credentials | kubectl --context demo apply -f -
The key is new at every make run: apply it again after a restart.
`, awsCredentialsSecret, api.CredentialAccessKey, api.CredentialSecretKey, awsCredentialsSecret, syncer.AccessLabel, syncer.AccessLabelValue)
		return nil
	}
	ns := "kubeopera-system"
	if len(args) > 0 {
		ns = args[0]
	}
	st, err := loadProvisioningState()
	if err != nil {
		return err
	}
	list := []any{
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: awsCredentialsSecret, Labels: map[string]string{syncer.AccessLabel: syncer.AccessLabelValue}},
			StringData: map[string]string{api.CredentialAccessKey: st.Tenant.AccessKeyID, api.CredentialSecretKey: st.Tenant.SecretAccessKey}},
	}
	return printYAML(list...)
}

// simulateControlPlane plays node 0 of a vanilla_kubeadm cluster once kubeadm init is done: it
// publishes its admin.conf to SSM parameter /kubeopera/<fp>/<clusterID>/admin_kubeconfig (fp: the
// fingerprint of the HostCluster's workspace, root:orgs:demo unless named), base64,
// as a SecureString (docs/provisioner.md#kubeconfig-retrieval; sim.SSM.PublishAdminKubeconfig), with a PutParameter signed
// by user devenv-admin through the local AWS endpoint. The admin.conf is the local target
// cluster's kubeconfig: make run has no machines, so the "provisioned" cluster is that target.
func simulateControlPlane(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("usage: devenv simulate-control-plane <clusterID> [region, default %s] [workspace path, default %s] (--help says more)", devRegion, demoWorkspace)
	}
	if args[0] == "-h" || args[0] == "--help" {
		fmt.Printf(`usage: devenv simulate-control-plane <clusterID> [region, default %s] [workspace path, default %s]

Plays node 0 of a vanilla_kubeadm cluster after kubeadm init: writes the local target cluster's
admin kubeconfig (%s/target/target.kubeconfig), base64, as SecureString SSM parameter
/kubeopera/<workspace fingerprint>/<clusterID>/admin_kubeconfig of the local AWS endpoint of the
running make run, with a signed PutParameter (Overwrite); the fingerprint is the HostCluster's
workspace's. The run's terraform-runner, which polls that parameter every %s, then fetches it and
the HostCluster goes on like a connected cluster.

On AWS, Terraform creates the parameter seeded PENDING before the node boots and the node
overwrites it. make run's stand-in module creates no AWS resources, so this command creates the
parameter if it does not exist yet, and overwrites it if it does: run it before or after applying
the HostCluster (the runner keeps polling a parameter that does not exist yet).
`, devRegion, demoWorkspace, stateDir(), devSSMPollInterval)
		return nil
	}
	clusterID, region, ws := args[0], devRegion, demoWorkspace
	if len(args) > 1 {
		region = args[1]
	}
	if len(args) > 2 {
		ws = args[2]
	}
	kcpCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir(), "kcp.kubeconfig"))
	if err != nil {
		return err
	}
	lookup, cancelLookup := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelLookup()
	lc, err := workspaces.LogicalClusterOf(lookup, kcpCfg, ws)
	if err != nil {
		return fmt.Errorf("failed to look up workspace %s (is `make run` running?): %w", ws, err)
	}
	st, err := loadProvisioningState()
	if err != nil {
		return err
	}
	path := filepath.Join(stateDir(), "target", "target.kubeconfig")
	adminConf, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("no target kubeconfig (is `make run` running?): %w", err)
	}
	if _, err := clientcmd.Load(adminConf); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c := ssm.New(ssm.Options{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(st.Admin.AccessKeyID, st.Admin.SecretAccessKey, ""),
		BaseEndpoint: aws.String(st.AWSEndpoint),
	})
	name := provisioning.AdminKubeconfigParameter(workspaces.Fingerprint(lc), clusterID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.PutParameter(ctx, &ssm.PutParameterInput{
		Name:      aws.String(name),
		Value:     aws.String(base64.StdEncoding.EncodeToString(adminConf)),
		Type:      ssmtypes.ParameterTypeSecureString,
		Overwrite: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("failed to put SSM parameter %s at %s: %w", name, st.AWSEndpoint, err)
	}
	say("Published the local target's admin kubeconfig to SSM parameter %s (version %d) as node 0 of %s would; the run's terraform-runner reads it within %s", name, out.Version, clusterID, devSSMPollInterval)
	return nil
}

// copyRunLogs writes each run's output (what `kubectl logs job/<name>` would show; no kubelet
// keeps it here) to dir/<job>.log, every 2 s until ctx ends.
func copyRunLogs(ctx context.Context, backend *rest.Config, runs *sim.RunnerJobs, dir string) {
	cs, err := kubernetes.NewForConfig(backend)
	if err != nil {
		return
	}
	written := map[string]int{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		list, err := cs.BatchV1().Jobs(api.DefaultJobsNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, j := range list.Items {
			out, ok := runs.Output(j.Name)
			if !ok || len(out) == written[j.Name] {
				continue
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return
			}
			if err := os.WriteFile(filepath.Join(dir, j.Name+".log"), []byte(out), 0o600); err == nil {
				written[j.Name] = len(out)
			}
		}
	}
}
