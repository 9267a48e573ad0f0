package runner

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	tfrunner "github.com/kubeopera/kubeopera/internal/terraform/runner"
	"github.com/kubeopera/kubeopera/test/framework"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A provisioned EKS cluster's stored kubeconfig is read as the manager reads it: its helper is
// never run, the tokens are minted in process with the access key of its exec env.
func TestTargetConfigOfAnEKSCluster(t *testing.T) {
	ca := base64.StdEncoding.EncodeToString(framework.SelfSignedCA(t))
	raw, err := tfrunner.EKSKubeconfig(tfrunner.EKSCluster{Name: "c-1", Endpoint: "https://ABC.gr7.eu-north-1.eks.amazonaws.com", CACertificate: ca, Region: "eu-north-1",
		Credential: tfrunner.Credential{AccessKey: "AKIAEXAMPLE", SecretKey: "s3cr3t"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := targetConfig(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://ABC.gr7.eu-north-1.eks.amazonaws.com" || cfg.ExecProvider != nil || cfg.WrapTransport == nil {
		t.Fatalf("config = host %s exec %v wrap %v", cfg.Host, cfg.ExecProvider, cfg.WrapTransport != nil)
	}
	var auth string
	rt := cfg.WrapTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		auth = r.Header.Get("Authorization")
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	}))
	req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/version", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(auth, "Bearer k8s-aws-v1.") {
		t.Errorf("Authorization = %q, want an EKS token", auth)
	}

	roleOnly, err := tfrunner.EKSKubeconfig(tfrunner.EKSCluster{Name: "c-1", Endpoint: "https://ABC.gr7.eu-north-1.eks.amazonaws.com", CACertificate: ca, Region: "eu-north-1",
		Credential: tfrunner.Credential{RoleARN: "arn:aws:iam::123456789012:role/eks"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := targetConfig(roleOnly, ""); err == nil || !strings.Contains(err.Error(), "carries no access key") {
		t.Errorf("a role alone: err = %v", err)
	}
	exec := strings.Replace(string(raw), "/eks-token-helper", "/bin/sh", 1)
	if _, err := targetConfig([]byte(exec), ""); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("an exec kubeconfig that is not the runner's: err = %v", err)
	}
}
