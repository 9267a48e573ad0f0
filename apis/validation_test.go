package apis_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeopera/kubeopera/test/framework"
)

// TestSchemaValidation applies objects to a real kube-apiserver with the generated CRDs installed
// and checks that the schema (patterns, enums, CEL rules) admits or refuses each as the seeds say.
func TestSchemaValidation(t *testing.T) {
	cluster := framework.StartCluster(t, framework.ClusterOptions{
		CRDDirectoryPaths: []string{filepath.Join(framework.RepoRoot(), "config", "crd", "bases")},
	})
	c, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	const tenant = `
apiVersion: kubeopera.io/v1alpha1
kind: Tenant
metadata: {name: alice-default, namespace: default}
spec:
  userID: 3f1a2b4c-0000-0000-0000-000000000000
  tenantName: alice-default
  cloudSpaceID: 7e9d3a1b-0000-0000-0000-000000000000
  quota: {cpu: "2", memory: 4Gi}
`
	const hostCluster = `
apiVersion: kubeopera.io/v1alpha1
kind: HostCluster
metadata: {name: hc, namespace: default}
spec:
  clusterID: 7e9d3a1b
  mode: connect_existing
  provider: aws
  region: eu-north-1
  connectKubeconfigSecretRef: hostcluster-7e9d3a1b-input-kubeconfig
  gitOpsRepoURL: https://github.com/ochestra-tech/gitops-iac.git
  gitOpsPath: fluxcd/clusters/my-cluster
  gitCredentialsSecretRef: gitops-iac-credentials
  domain: my-cluster.acme.com
`
	const provisioning = `
  provisioning:
    topology: vanilla_kubeadm
    controlPlaneCount: 1
    nodeCount: 2
    instanceType: t3.medium
    kubernetesVersion: "1.31.0"
    credentialRef: aws-creds
`
	const kubernetesCluster = `
apiVersion: platform.edgeconnect.eu/v1alpha1
kind: KubernetesCluster
metadata: {name: my-cluster, namespace: default}
spec:
  machineCapabilitiesRef: {name: my-capabilities}
  nodeCount: 3
  nodeDiskSize: 100Gi
  providerRef:
    type: OTC
    configRef: {name: my-provider}
  kubernetes: {version: 1.28.0}
`
	const flavor = `
apiVersion: platform.edgeconnect.eu/v1alpha1
kind: ProviderMachineFlavor
metadata: {name: otc-c3-large}
spec:
  available: true
  providerRef: {type: OTC}
  flavor: c3.large.x86
  capabilities: {vCPUCount: 24, memorySize: 512Gi, gpuModelName: null}
  availableZones: [us-east-1, eu-west-1]
`
	const providerConfig = `
apiVersion: platform.edgeconnect.eu/v1alpha1
kind: ProviderConfig
metadata: {name: my-provider, namespace: default}
spec:
  credentials:
    source: Secret
    secretRef: {namespace: default, name: provider-credentials, key: credentials}
`
	const capabilities = `
apiVersion: platform.edgeconnect.eu/v1alpha1
kind: MachineCapabilities
metadata: {name: my-capabilities, namespace: default}
spec: {vCPUCount: 4, memorySize: 8Gi, gpuModelName: RTX3080}
`

	tests := map[string]struct {
		object  string
		edit    func(u *unstructured.Unstructured)
		wantErr string // empty: must be admitted
	}{
		"seed Tenant": {object: tenant},
		"tenantName with capitals": {object: tenant, edit: set("Bad_Name", "spec", "tenantName"),
			wantErr: "spec.tenantName in body should match"},
		"tenantName too short": {object: tenant, edit: set("ab", "spec", "tenantName"),
			wantErr: "spec.tenantName in body should match"},
		"tenantName ending in dash": {object: tenant, edit: set("alice-", "spec", "tenantName"),
			wantErr: "spec.tenantName in body should match"},
		"quota is not a quantity": {object: tenant, edit: set("lots", "spec", "quota", "cpu"),
			wantErr: "spec.quota.cpu"},
		"quota missing": {object: tenant, edit: del("spec", "quota"), wantErr: "spec.quota: Required value"},
		// A negative quota would offset the workspace's sums against its limits.
		"negative cpu quota": {object: tenant, edit: set("-1000", "spec", "quota", "cpu"),
			wantErr: "spec.quota.cpu must be greater than zero"},
		"zero cpu quota": {object: tenant, edit: set("0", "spec", "quota", "cpu"),
			wantErr: "spec.quota.cpu must be greater than zero"},
		"negative memory quota": {object: tenant, edit: set("-64Gi", "spec", "quota", "memory"),
			wantErr: "spec.quota.memory must be greater than zero"},
		"integer cpu quota":   {object: tenant, edit: setInt(3, "spec", "quota", "cpu")},
		"millicore cpu quota": {object: tenant, edit: set("500m", "spec", "quota", "cpu")},

		"seed HostCluster connect_existing": {object: hostCluster},
		"HostCluster with unknown mode": {object: hostCluster, edit: set("provision_gke", "spec", "mode"),
			wantErr: `spec.mode: Unsupported value: "provision_gke"`},
		"HostCluster provider is a free string": {object: hostCluster, edit: set("hetzner", "spec", "provider")},
		"HostCluster without domain": {object: hostCluster, edit: del("spec", "domain"),
			wantErr: "spec.domain: Required value"},
		"connect_existing with provisioning": {object: hostCluster + provisioning,
			wantErr: "spec.provisioning is required exactly when spec.mode is provision_vanilla or provision_eks"},
		"provision_vanilla with provisioning": {object: hostCluster + provisioning, edit: set("provision_vanilla", "spec", "mode")},
		"provision_vanilla without provisioning": {object: hostCluster, edit: set("provision_vanilla", "spec", "mode"),
			wantErr: "spec.provisioning is required exactly when spec.mode is provision_vanilla or provision_eks"},
		"provision_eks with vanilla topology": {object: hostCluster + provisioning, edit: set("provision_eks", "spec", "mode"),
			wantErr: "spec.provisioning.topology must be vanilla_kubeadm for provision_vanilla and eks for provision_eks"},
		"connect_existing without kubeconfig": {object: hostCluster, edit: del("spec", "connectKubeconfigSecretRef"),
			wantErr: "spec.connectKubeconfigSecretRef is required when spec.mode is connect_existing"},
		"HostCluster without gitOpsRepoURL": {object: hostCluster, edit: del("spec", "gitOpsRepoURL"),
			wantErr: "spec.gitOpsRepoURL: Required value"},
		"HostCluster with a file gitOpsRepoURL": {object: hostCluster, edit: set("file:///etc", "spec", "gitOpsRepoURL"),
			wantErr: "spec.gitOpsRepoURL in body should match"},
		"HostCluster with .. in gitOpsPath": {object: hostCluster, edit: set("fluxcd/../secrets", "spec", "gitOpsPath"),
			wantErr: "spec.gitOpsPath may not contain . or .. elements"},
		"HostCluster with an absolute gitOpsPath": {object: hostCluster, edit: set("/fluxcd/clusters/x", "spec", "gitOpsPath"),
			wantErr: "spec.gitOpsPath in body should match"},
		"adminEmail without adminUsername": {object: hostCluster, edit: set("admin@acme.com", "spec", "adminEmail"),
			wantErr: "spec.adminEmail and spec.adminUsername are set together or not at all"},

		"seed KubernetesCluster": {object: kubernetesCluster},
		"KubernetesCluster without configRef": {object: kubernetesCluster, edit: del("spec", "providerRef", "configRef"),
			wantErr: "spec.providerRef.configRef is required"},
		"KubernetesCluster with zero nodes": {object: kubernetesCluster, edit: setInt(0, "spec", "nodeCount"),
			wantErr: "spec.nodeCount"},
		"KubernetesCluster with a public endpoint": {object: kubernetesCluster, edit: setInt(10, "spec", "publicEndpoint", "bandwidthMbit")},
		"KubernetesCluster with a public endpoint of no bandwidth": {object: kubernetesCluster, edit: setInt(0, "spec", "publicEndpoint", "bandwidthMbit"),
			wantErr: "spec.publicEndpoint.bandwidthMbit: Invalid value: 0"},
		"KubernetesCluster with a public endpoint beyond OTC's bandwidth": {object: kubernetesCluster, edit: setInt(301, "spec", "publicEndpoint", "bandwidthMbit"),
			wantErr: "spec.publicEndpoint.bandwidthMbit: Invalid value: 301"},
		"public endpoint of a lower-case otc cluster": {object: kubernetesCluster, edit: func(u *unstructured.Unstructured) {
			set("otc", "spec", "providerRef", "type")(u)
			setInt(5, "spec", "publicEndpoint", "bandwidthMbit")(u)
		}},
		"public endpoint of another provider's cluster": {object: kubernetesCluster, edit: func(u *unstructured.Unstructured) {
			set("AWS", "spec", "providerRef", "type")(u)
			setInt(5, "spec", "publicEndpoint", "bandwidthMbit")(u)
		}, wantErr: "spec.publicEndpoint is offered for OTC clusters only"},
		"seed ProviderMachineFlavor":    {object: flavor},
		"seed ProviderConfig":           {object: providerConfig},
		"ProviderConfig unknown source": {object: providerConfig, edit: set("Vault", "spec", "credentials", "source"), wantErr: "spec.credentials.source: Unsupported value"},
		"seed MachineCapabilities":      {object: capabilities},
	}

	ctx := context.Background()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tc.object), &u.Object); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(u)
			}
			err := c.Create(ctx, u, client.DryRunAll)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("expected the object to be admitted, got: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("expected the object to be refused with %q, it was admitted", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("expected an error containing %q, got: %v", tc.wantErr, err)
			}
		})
	}

	t.Run("a public endpoint defaults to 5 Mbit/s and is set or omitted for good", func(t *testing.T) {
		newCluster := func(name string, public bool) *unstructured.Unstructured {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(kubernetesCluster), &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetName(name)
			if public {
				_ = unstructured.SetNestedMap(u.Object, map[string]any{}, "spec", "publicEndpoint")
			}
			if err := c.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
			return u
		}
		public := newCluster("public", true)
		if bw, _, _ := unstructured.NestedInt64(public.Object, "spec", "publicEndpoint", "bandwidthMbit"); bw != 5 {
			t.Errorf("publicEndpoint: {} stored with bandwidthMbit %d, want the default 5", bw)
		}
		setInt(20, "spec", "publicEndpoint", "bandwidthMbit")(public)
		if err := c.Update(ctx, public); err != nil {
			t.Errorf("changing the bandwidth: %v", err)
		}
		del("spec", "publicEndpoint")(public)
		if err := c.Update(ctx, public); err == nil || !strings.Contains(err.Error(), "spec.publicEndpoint cannot be added or removed once the cluster exists") {
			t.Errorf("removing the public endpoint: %v, want refused", err)
		}
		private := newCluster("private", false)
		setInt(5, "spec", "publicEndpoint", "bandwidthMbit")(private)
		if err := c.Update(ctx, private); err == nil || !strings.Contains(err.Error(), "spec.publicEndpoint cannot be added or removed once the cluster exists") {
			t.Errorf("adding a public endpoint: %v, want refused", err)
		}
	})

	// A provisioned cluster's spec changes on a built cluster: what a run applies in place is
	// admitted, what cannot change in place is refused with a message saying why.
	t.Run("provisioned HostCluster: day-2 changes", func(t *testing.T) {
		updates := map[string]struct {
			edit    func(u *unstructured.Unstructured)
			wantErr string
		}{
			"nodeCount 2 to 5":                 {edit: setInt(5, "spec", "provisioning", "nodeCount")},
			"instanceType":                     {edit: set("t3.large", "spec", "provisioning", "instanceType")},
			"kubernetesVersion":                {edit: set("1.32.0", "spec", "provisioning", "kubernetesVersion")},
			"controlPlaneCount 3 to 5":         {edit: setInt(5, "spec", "provisioning", "controlPlaneCount")},
			"deletionPolicy":                   {edit: set("Destroy", "spec", "provisioning", "deletionPolicy")},
			"approvePlan manual":               {edit: set("manual", "spec", "provisioning", "approvePlan")},
			"domain (not provisioning at all)": {edit: set("other.acme.com", "spec", "domain")},
			"region": {edit: set("eu-west-1", "spec", "region"),
				wantErr: "spec.region is immutable for provision_vanilla and provision_eks"},
			"region removed": {edit: del("spec", "region"),
				wantErr: "spec.region is immutable for provision_vanilla and provision_eks"},
			"topology": {edit: func(u *unstructured.Unstructured) {
				set("eks", "spec", "provisioning", "topology")(u)
				del("spec", "provisioning", "controlPlaneCount")(u)
			}, wantErr: "spec.provisioning.topology is immutable"},
			"mode": {edit: set("provision_eks", "spec", "mode"), wantErr: "spec.mode is immutable"},
			"terraformEnvironment set": {edit: set("other-env", "spec", "provisioning", "terraformEnvironment"),
				wantErr: "spec.provisioning.terraformEnvironment is immutable"},
			"controlPlaneCount 3 to 1": {edit: setInt(1, "spec", "provisioning", "controlPlaneCount"),
				wantErr: "spec.provisioning.controlPlaneCount cannot change between 1 and more than 1"},
			"controlPlaneCount unset": {edit: del("spec", "provisioning", "controlPlaneCount"),
				wantErr: "spec.provisioning.controlPlaneCount cannot change between 1 and more than 1"},
			"approvePlan unknown": {edit: set("sometimes", "spec", "provisioning", "approvePlan"),
				wantErr: `spec.provisioning.approvePlan: Unsupported value: "sometimes"`},
		}
		i := 0
		for name, tc := range updates {
			t.Run(name, func(t *testing.T) {
				i++
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(hostCluster+provisioning), &u.Object); err != nil {
					t.Fatal(err)
				}
				u.SetName(fmt.Sprintf("day2-%d", i))
				set("provision_vanilla", "spec", "mode")(u)
				del("spec", "connectKubeconfigSecretRef")(u)
				setInt(3, "spec", "provisioning", "controlPlaneCount")(u)
				if err := c.Create(ctx, u); err != nil {
					t.Fatal(err)
				}
				if got, _, _ := unstructured.NestedString(u.Object, "spec", "provisioning", "approvePlan"); got != "auto" {
					t.Errorf("approvePlan stored as %q, want the default auto", got)
				}
				tc.edit(u)
				err := c.Update(ctx, u)
				switch {
				case tc.wantErr == "" && err != nil:
					t.Fatalf("expected the update to be admitted, got: %v", err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Fatalf("expected the update to be refused with %q, got: %v", tc.wantErr, err)
				}
			})
		}
		// A connected cluster's region is informational: it may change.
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(hostCluster), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetName("connected-region")
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		set("eu-west-1", "spec", "region")(u)
		if err := c.Update(ctx, u); err != nil {
			t.Errorf("changing a connected cluster's region: %v", err)
		}
	})

	t.Run("tenantName is immutable", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(tenant), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		set("bob-default", "spec", "tenantName")(u)
		err := c.Update(ctx, u)
		if err == nil || !strings.Contains(err.Error(), "spec.tenantName is immutable") {
			t.Fatalf("expected the update to be refused as immutable, got: %v", err)
		}
	})
}

func set(value string, path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, value, path...) }
}

func setInt(value int64, path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, value, path...) }
}

func del(path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, path...) }
}
