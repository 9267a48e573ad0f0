package api

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func valid() CreateRequest {
	return CreateRequest{ClusterID: "c-7e9d3a1b", Region: "eu-north-1", Topology: TopologyVanillaKubeadm, ControlPlaneCount: ptr.To[int32](3),
		NodeCount: 2, InstanceType: "t3.medium", KubernetesVersion: "1.31.0", TerraformEnvironment: "cluster-7e9d3a1b",
		CredentialSecretRef: SecretRef{Namespace: "kcp-d37f1981a6be", Name: "hostcluster-c-7e9d3a1b-cloud-credential"},
		Workspace:           "1bg4baqdjkcw9lz4", WorkspaceFingerprint: "d37f1981a6be", OwnerUID: "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f"}
}

func TestValidate(t *testing.T) {
	ok := valid()
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid request: %v", err)
	}
	for field, mutate := range map[string]func(*CreateRequest){
		"clusterID":                     func(r *CreateRequest) { r.ClusterID = `x"; }` },
		"region":                        func(r *CreateRequest) { r.Region = "eu-north-1\n" },
		"topology":                      func(r *CreateRequest) { r.Topology = "k3s" },
		"controlPlaneCount":             func(r *CreateRequest) { r.ControlPlaneCount = ptr.To[int32](9) },
		"nodeCount":                     func(r *CreateRequest) { r.NodeCount = -1 },
		"instanceType":                  func(r *CreateRequest) { r.InstanceType = "t3.medium${file(\"/etc/passwd\")}" },
		"kubernetesVersion":             func(r *CreateRequest) { r.KubernetesVersion = "latest" },
		"terraformEnvironment":          func(r *CreateRequest) { r.TerraformEnvironment = "Prod.Bucket" },
		"credentialSecretRef.namespace": func(r *CreateRequest) { r.CredentialSecretRef.Namespace = "" },
		"credentialSecretRef.name":      func(r *CreateRequest) { r.CredentialSecretRef.Name = "../x" },
		"operation":                     func(r *CreateRequest) { r.Operation = "refresh" },
		"planRun":                       func(r *CreateRequest) { r.PlanRun = "../x" },
		"workspace":                     func(r *CreateRequest) { r.Workspace = "" },
		"workspaceFingerprint":          func(r *CreateRequest) { r.WorkspaceFingerprint = "D37F1981A6BE" },
		"ownerUID":                      func(r *CreateRequest) { r.OwnerUID = "default/hc" },
	} {
		r := valid()
		mutate(&r)
		err := r.Validate()
		fe, isField := err.(*FieldError)
		if !isField || fe.Field != field {
			t.Errorf("%s: got %v, want a FieldError naming it", field, err)
		}
	}
	eks := valid()
	eks.Topology, eks.ControlPlaneCount = TopologyEKS, nil
	if err := eks.Validate(); err != nil {
		t.Errorf("eks without controlPlaneCount: %v", err)
	}
	eks.ControlPlaneCount = ptr.To[int32](1)
	if err := eks.Validate(); err == nil {
		t.Error("eks with controlPlaneCount accepted")
	}
}

func TestTerraformEnvironmentMakesABucketName(t *testing.T) {
	for env, ok := range map[string]bool{
		"a": true, "cluster-7e9d3a1b": true, strings.Repeat("a", 37): true, strings.Repeat("a", 38): false,
		"-a": false, "a-": false, "A": false, "a.b": false, "a_b": false, "x-s3alias": false, "x--ol-s3": false, "": false,
	} {
		err := ValidateTerraformEnvironment(env)
		if (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%t", env, err, ok)
		}
		if b := StateBucketName("d37f1981a6be", env); err == nil && !ValidBucketName(b) {
			t.Errorf("%q makes bucket name %q, which S3 refuses", env, b)
		}
	}
}

// The HostCluster schema admits exactly the terraformEnvironment values the provisioner does.
func TestSchemaSharesTheBucketRule(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "crd", "bases", "kubeopera.io_hostclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	p := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["provisioning"].Properties["terraformEnvironment"]
	if p.Pattern != TerraformEnvironmentPattern {
		t.Errorf("schema pattern %q, provisioner %q", p.Pattern, TerraformEnvironmentPattern)
	}
	if p.MaxLength == nil || *p.MaxLength != 37 {
		t.Errorf("schema maxLength %v, want 37 (63 minus the bucket prefix)", p.MaxLength)
	}
	for _, suffix := range ReservedBucketSuffixes {
		if len(p.XValidations) == 0 || !strings.Contains(p.XValidations[0].Rule, "'"+suffix+"'") {
			t.Errorf("schema rule does not refuse suffix %s", suffix)
		}
	}
}

// InputsHash changes with every input of the rendered module and with nothing else: a run for
// another nodeCount is a run for another spec; another credential, operation or caller is not.
func TestInputsHash(t *testing.T) {
	base := valid()
	want := base.InputsHash()
	if len(want) != 16 {
		t.Fatalf("InputsHash %q, want 16 hex characters", want)
	}
	same := map[string]func(*CreateRequest){
		"credential": func(r *CreateRequest) { r.CredentialSecretRef.Name = "other" },
		"operation":  func(r *CreateRequest) { r.Operation = OperationDestroy },
		"owner":      func(r *CreateRequest) { r.OwnerUID = "0f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f" },
		"workspace":  func(r *CreateRequest) { r.Workspace = "2bg4baqdjkcw9lz4" },
	}
	differ := map[string]func(*CreateRequest){
		"clusterID":            func(r *CreateRequest) { r.ClusterID = "c-other" },
		"region":               func(r *CreateRequest) { r.Region = "eu-west-1" },
		"topology":             func(r *CreateRequest) { r.Topology = TopologyEKS; r.ControlPlaneCount = nil },
		"controlPlaneCount":    func(r *CreateRequest) { r.ControlPlaneCount = ptr.To[int32](5) },
		"nodeCount":            func(r *CreateRequest) { r.NodeCount = 5 },
		"instanceType":         func(r *CreateRequest) { r.InstanceType = "t3.large" },
		"kubernetesVersion":    func(r *CreateRequest) { r.KubernetesVersion = "1.32.0" },
		"terraformEnvironment": func(r *CreateRequest) { r.TerraformEnvironment = "other" },
		"workspaceFingerprint": func(r *CreateRequest) { r.WorkspaceFingerprint = "000000000000" },
	}
	for name, m := range same {
		r := valid()
		m(&r)
		if got := r.InputsHash(); got != want {
			t.Errorf("another %s: InputsHash %s, want %s (the module is the same)", name, got, want)
		}
	}
	for name, m := range differ {
		r := valid()
		m(&r)
		if got := r.InputsHash(); got == want {
			t.Errorf("another %s: InputsHash unchanged (%s)", name, got)
		}
	}
	// vanilla_kubeadm builds one control-plane node when the count is unset.
	a, b := valid(), valid()
	a.ControlPlaneCount, b.ControlPlaneCount = nil, ptr.To[int32](1)
	if a.InputsHash() != b.InputsHash() {
		t.Error("controlPlaneCount unset and 1 hash differently, yet build the same")
	}
}
