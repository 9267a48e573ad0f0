package kubeconfig

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestRewriteServer(t *testing.T) {
	in := []byte(`apiVersion: v1
kind: Config
clusters:
- name: my-vcluster
  cluster: {server: "https://localhost:8443", certificate-authority-data: "Y2E="}
contexts:
- name: my-vcluster
  context: {cluster: my-vcluster, user: my-vcluster}
current-context: my-vcluster
users:
- name: my-vcluster
  user: {client-certificate-data: "Y2VydA==", client-key-data: "a2V5"}
`)
	tests := map[string]struct {
		in      []byte
		wantErr string
	}{
		"rewrites every cluster": {in: in},
		"not a kubeconfig":       {in: []byte("password: hunter2\n\t{{"), wantErr: "kubeconfig is not valid"},
		"no clusters":            {in: []byte("apiVersion: v1\nkind: Config\n"), wantErr: "kubeconfig has no clusters"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := RewriteServer(tc.in, "https://vc-alice.kcp-x-vc-alice:443")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("want error %q, got %v", tc.wantErr, err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatal("error message leaks the input")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Clusters["my-vcluster"].Server; got != "https://vc-alice.kcp-x-vc-alice:443" {
				t.Errorf("server = %q", got)
			}
			if string(cfg.AuthInfos["my-vcluster"].ClientKeyData) != "key" {
				t.Error("credentials were not kept")
			}
		})
	}
}
