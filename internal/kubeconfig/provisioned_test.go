package kubeconfig

import (
	"strings"
	"testing"
)

func eksKubeconfig(command, apiVersion string) []byte {
	return []byte(`apiVersion: v1
kind: Config
clusters:
- name: eks
  cluster:
    server: https://ABCDEF.gr7.eu-north-1.eks.amazonaws.com
    certificate-authority-data: ""
contexts:
- name: eks
  context: {cluster: eks, user: eks}
current-context: eks
users:
- name: eks
  user:
    exec:
      apiVersion: ` + apiVersion + `
      command: ` + command + `
      args: [--cluster-name, c-1, --region, eu-north-1]
      interactiveMode: Never
`)
}

func TestParseProvisioned(t *testing.T) {
	cfg, err := ParseProvisioned(eksKubeconfig(EKSTokenHelper, "client.authentication.k8s.io/v1beta1"), EKSTokenHelper)
	if err != nil {
		t.Fatalf("the provisioner's EKS kubeconfig: %v", err)
	}
	if cfg.ExecProvider == nil || cfg.ExecProvider.Command != EKSTokenHelper {
		t.Errorf("exec provider %+v", cfg.ExecProvider)
	}
	for name, raw := range map[string][]byte{
		"another program":            eksKubeconfig("/bin/sh", "client.authentication.k8s.io/v1beta1"),
		"a relative helper":          eksKubeconfig("eks-token-helper", "client.authentication.k8s.io/v1beta1"),
		"another exec API":           eksKubeconfig(EKSTokenHelper, "client.authentication.k8s.io/v1"),
		"a look-alike path":          eksKubeconfig("/tmp/eks-token-helper", "client.authentication.k8s.io/v1beta1"),
		"the helper in a tenant one": nil,
	} {
		if raw == nil {
			// A tenant's kubeconfig is parsed untrusted: even the helper is refused there.
			if _, err := ParseUntrusted(eksKubeconfig(EKSTokenHelper, "client.authentication.k8s.io/v1beta1")); err == nil || !strings.Contains(err.Error(), "exec plugins are not allowed") {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if _, err := ParseProvisioned(raw, EKSTokenHelper); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
