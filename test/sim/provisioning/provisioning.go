// Package provisioning runs the provisioning side of the platform on a backend, for the
// HostCluster suite, the e2e suite and make run: the real provisioner (its store and HTTP API,
// internal/provisioner/jobs and server, as its ServiceAccount with config/provisioner's RBAC), the
// Job's Pod played by sim.RunnerJobs running the real cmd/terraform-runner with the real
// terraform, and AWS's S3, SSM and STS played by sim.AWS.
//
// What no process here can do is AWS building machines: the root module the provisioner renders
// uses the AWS provider, which cannot be downloaded here, so the provisioner is given
// OfflineModule instead of internal/terraform/render: terraform_data resources with the real
// module's S3 backend (state bucket per environment, S3-native locking) and the real outputs'
// names, the real cloud-side names (api.NamesOf: state bucket and key, SSM path, EKS cluster
// name), and the workers' inputs (node_count, instance_type, kubernetes_version) in a resource of
// their own, so a day-2 change of them is a change Terraform plans and applies on the same state.
// The real modules and renderer are checked by internal/terraform/render's tests.
package provisioning

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeopera/kubeopera/controllers/hostcluster"
	"github.com/kubeopera/kubeopera/internal/jobrun/jobruntest"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/provisioner/jobs"
	"github.com/kubeopera/kubeopera/internal/provisioner/server"
	"github.com/kubeopera/kubeopera/internal/terraform/render"
	"github.com/kubeopera/kubeopera/internal/terraform/runner"
	"github.com/kubeopera/kubeopera/test/sim"
)

// QuotaPrefix: a cluster whose ID starts with it fails its apply with the error AWS gives when the
// account has no VPC left (EC2 VpcLimitExceeded), as Terraform prints it.
const QuotaPrefix = "quota-"

// ProtectedPrefix: a cluster whose ID starts with it cannot be destroyed (its cluster resource
// has lifecycle prevent_destroy, as a deletion-protected resource would refuse): a destroy run
// fails with Terraform's error.
const ProtectedPrefix = "protected-"

// QuotaError is that error's text.
const QuotaError = "creating EC2 VPC: operation error EC2: CreateVpc, api error VpcLimitExceeded: The maximum number of VPCs has been reached."

// Options configure Start.
type Options struct {
	// Backend is an admin config of the backend cluster.
	Backend *rest.Config
	// Root is the repository root (config/provisioner, terraform/modules, cmd/terraform-runner).
	Root string
	// RunnerBinary is the terraform-runner the runs' Pods run (cmd/terraform-runner, built).
	RunnerBinary string
	// Addr is where the API listens; 127.0.0.1:0 when empty.
	Addr string
	// APIKey; a random one when empty.
	APIKey string
	// ClusterCA is the CA (PEM) an EKS run's outputs name.
	ClusterCA []byte
	// SSMPollInterval is the runner's SSM poll interval (the runner's default, 20 s, when zero).
	SSMPollInterval time.Duration
	// Log receives the provisioner's and the runs' logs; discarded when nil.
	Log io.Writer
}

// Env is a running provisioning side.
type Env struct {
	// URL of the provisioner's API and its APIKey.
	URL, APIKey string
	// AWS is the local AWS endpoint.
	AWS *sim.AWS
	// Platform is the platform's own AWS identity: an IAM user whose key the runs' Pods have in
	// their environment (as a provisioner's Pod has its cloud identity), the runner's default
	// credentials, with which it assumes a role_arn credential that has no access key.
	Platform sim.AWSCredentials
	// Runner plays the runs' Pods.
	Runner *sim.RunnerJobs

	eks     *eksClusters
	service *sim.JobService
}

// eksClusters are the API servers EKS runs of some cluster IDs "build" (ServeEKS).
type eksClusters struct {
	mu sync.Mutex
	m  map[string]eksCluster
}

type eksCluster struct {
	endpoint string
	ca       []byte
}

func (c *eksClusters) get(clusterID string) (eksCluster, bool) {
	if c == nil {
		return eksCluster{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[clusterID]
	return v, ok
}

// ServeEKS makes the EKS run of clusterID "build" the API server at endpoint (an https URL) with
// CA ca: its outputs cluster_endpoint and cluster_ca_certificate name them. Other EKS runs name
// https://<ID>.gr7.<region>.eks.amazonaws.com and Options.ClusterCA.
func (e *Env) ServeEKS(clusterID, endpoint string, ca []byte) {
	e.eks.mu.Lock()
	defer e.eks.mu.Unlock()
	e.eks.m[clusterID] = eksCluster{endpoint: endpoint, ca: ca}
}

// Start starts the provisioning side; Stop stops it.
func Start(ctx context.Context, o Options) (*Env, error) {
	tf, err := Terraform(o.Root)
	if err != nil {
		return nil, err
	}
	if o.APIKey == "" {
		o.APIKey = sim.RandomAPIKey()
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	// What an admin installs for the provisioner: its namespace, identity and roles.
	if err := sim.Install(ctx, o.Backend, o.Root, "config/provisioner/namespace.yaml", "config/provisioner/rbac.yaml"); err != nil {
		return nil, err
	}
	if o.RunnerBinary == "" {
		return nil, errors.New("no terraform-runner binary: set Options.RunnerBinary")
	}
	ns, sa, _ := strings.Cut(hostcluster.DefaultProvisionerIdentity, "/")
	cs, err := jobruntest.ServiceAccountClient(o.Backend, ns, sa)
	if err != nil {
		return nil, err
	}
	eks := &eksClusters{m: map[string]eksCluster{}}
	runs, err := jobs.New(cs, jobs.Config{Namespace: api.DefaultJobsNamespace, Render: offlineModule(o.ClusterCA, eks)})
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.Config{APIKey: o.APIKey, Runs: runs, Retention: 24 * time.Hour, Log: nil})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, err
	}
	aws := sim.NewAWS()
	platform := aws.AddUser("kubeopera-platform")
	env := map[string]string{runner.EnvTerraformBinary: tf, "AWS_ACCESS_KEY_ID": platform.AccessKeyID, "AWS_SECRET_ACCESS_KEY": platform.SecretAccessKey}
	for k, v := range aws.Env() {
		env[k] = v
	}
	if o.SSMPollInterval > 0 {
		env[runner.EnvSSMPollInterval] = o.SSMPollInterval.String()
	}
	ra := &sim.RunnerJobs{Backend: o.Backend, Namespace: api.DefaultJobsNamespace, RunnerBinary: o.RunnerBinary,
		ModulesDir: filepath.Join(o.Root, "terraform", "modules"), Env: env}
	serve := func(ctx context.Context) error { return srv.Serve(ctx, ln) }
	e := &Env{URL: "http://" + ln.Addr().String(), APIKey: o.APIKey, AWS: aws, Platform: platform, Runner: ra, eks: eks,
		service: sim.StartJobService("provisioning", o.Log, serve, ra)}
	return e, nil
}

// Terraform is the pinned terraform: _tools/bin/terraform (hack/build-tools.sh links it), else
// the one on PATH; the runner refuses any other version.
func Terraform(root string) (string, error) {
	if tf := filepath.Join(root, "_tools", "bin", "terraform"); fileExists(tf) {
		return tf, nil
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		return "", fmt.Errorf("no terraform in _tools/bin or on PATH (the runner needs terraform %s; make tools links it)", runner.TerraformVersion)
	}
	return tf, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Stop stops the provisioner, the runs' Pods and the AWS endpoint.
func (e *Env) Stop() {
	e.service.Stop()
	e.AWS.Close()
}

// OfflineModule renders, for a request, what the real root module does that matters to the rest
// of the chain, without the AWS provider (see the package doc). clusterCA is the CA (PEM) an EKS
// run's cluster_ca_certificate output names.
func OfflineModule(clusterCA []byte) jobs.RenderFunc { return offlineModule(clusterCA, nil) }

func offlineModule(clusterCA []byte, eks *eksClusters) jobs.RenderFunc {
	return func(req api.CreateRequest) (map[string]string, error) { return renderOffline(req, clusterCA, eks) }
}

func renderOffline(req api.CreateRequest, clusterCA []byte, eks *eksClusters) (map[string]string, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	names := api.NamesOf(&req)
	main := fmt.Sprintf(`terraform {
  backend "s3" {
    bucket       = %q
    key          = %q
    region       = %q
    use_lockfile = true
    encrypt      = true
  }
}

locals {
  vpcs_left = %t
}

resource "terraform_data" "vpc" {
  input = %q

  lifecycle {
    precondition {
      condition     = local.vpcs_left
      error_message = %q
    }
  }
}

resource "terraform_data" "cluster" {
  input = terraform_data.vpc.output

  lifecycle {
    prevent_destroy = %t
  }
}

resource "terraform_data" "workers" {
  input = {
    node_count         = %d
    instance_type      = %q
    kubernetes_version = %q
  }
}
`, names.StateBucket, names.StateKey, req.Region,
		!strings.HasPrefix(req.ClusterID, QuotaPrefix), req.ClusterID, QuotaError, strings.HasPrefix(req.ClusterID, ProtectedPrefix),
		req.NodeCount, req.InstanceType, req.KubernetesVersion)
	var outputs string
	if req.Topology == api.TopologyEKS {
		endpoint, ca := fmt.Sprintf("https://%s.gr7.%s.eks.amazonaws.com", strings.ToUpper(req.ClusterID), req.Region), clusterCA
		if c, ok := eks.get(req.ClusterID); ok {
			endpoint, ca = c.endpoint, c.ca
		}
		outputs = fmt.Sprintf(`output "cluster_name" {
  value = %q
}

output "cluster_endpoint" {
  value = %q
}

output "cluster_ca_certificate" {
  value = %q
}
`, names.ClusterName, endpoint, base64.StdEncoding.EncodeToString(ca))
	} else {
		outputs = fmt.Sprintf(`output "`+render.OutputAdminKubeconfigParameter+`" {
  value = %q
}
`, AdminKubeconfigParameter(req.WorkspaceFingerprint, req.ClusterID))
	}
	return map[string]string{"main.tf": main, "outputs.tf": outputs}, nil
}

// AdminKubeconfigParameter is the SSM parameter a vanilla cluster's node 0 publishes its
// admin.conf to, for the cluster clusterID of the workspace with fingerprint fp (the real
// module's name: api.SSMPrefix and render.ParameterAdminKubeconfig).
func AdminKubeconfigParameter(fp, clusterID string) string {
	return api.SSMPrefix(fp, clusterID) + "/" + render.ParameterAdminKubeconfig
}
