package framework

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Cluster is a real kube-apiserver + etcd started for a test.
type Cluster struct {
	Env    *envtest.Environment
	Config *rest.Config
}

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// CRDs to install, e.g. the project's config/crd/bases.
	CRDDirectoryPaths []string
	// CRDs to install from objects.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// APIServerArgs are more kube-apiserver flags, by name without the dashes (e.g. a token
	// authentication webhook: sim.EKSAuthenticator.APIServerArgs).
	APIServerArgs map[string]string
}

// StartCluster starts a kube-apiserver with etcd from _tools/bin and stops it when the test ends.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	SkipWithoutServers(t)
	bin := ToolsBin()
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s is missing from %s: run `make tools` (hack/build-tools.sh) first", name, bin)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		CRDs:                  opts.CRDs,
		ErrorIfCRDPathMissing: true,
	}
	for k, v := range opts.APIServerArgs {
		env.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("failed to start kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("failed to stop kube-apiserver: %v", err)
		}
	})
	return &Cluster{Env: env, Config: cfg}
}
