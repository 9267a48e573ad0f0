package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func baseEnv() map[string]string {
	return map[string]string{
		api.EnvRunID:                "r1",
		api.EnvTopology:             api.TopologyEKS,
		api.EnvRegion:               "eu-north-1",
		api.EnvStateBucket:          "kubeopera-terraform-state-dev-d37f1981a6be",
		api.EnvWorkspaceFingerprint: "d37f1981a6be",
		api.EnvModuleDir:            "/module",
		api.EnvModulesDir:           "/modules",
		api.EnvCredentialsDir:       "/credentials",
		api.EnvOutputsSecret:        "provision-r1-outputs",
		api.EnvNamespace:            "kubeopera-provisioning",
		EnvTerraformBinary:          "/usr/local/bin/terraform",
	}
}

func TestConfigFromEnv(t *testing.T) {
	c, err := ConfigFromEnv(lookup(baseEnv()))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		RunID: "r1", Operation: api.OperationApply, Topology: api.TopologyEKS, Region: "eu-north-1",
		StateBucket: "kubeopera-terraform-state-dev-d37f1981a6be", WorkspaceFingerprint: "d37f1981a6be", ModuleDir: "/module", ModulesDir: "/modules",
		CredentialsDir: "/credentials", Namespace: "kubeopera-provisioning", OutputsSecret: "provision-r1-outputs",
		TerraformBinary: "/usr/local/bin/terraform",
		SSMPollInterval: 20 * time.Second, SSMPollTimeout: 20 * time.Minute,
	}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}

	for name, tc := range map[string]struct {
		set    map[string]string
		unset  []string
		errs   []string
		verify func(*Config) string
	}{
		"every required variable is named": {
			unset: []string{api.EnvRunID, api.EnvRegion, api.EnvStateBucket, api.EnvWorkspaceFingerprint, api.EnvModuleDir, api.EnvCredentialsDir, api.EnvOutputsSecret, api.EnvNamespace},
			errs:  []string{"PROVISION_ID is required", "AWS_REGION is required", "PROVISION_STATE_BUCKET is required", "PROVISION_WORKSPACE_FINGERPRINT is required", "PROVISION_MODULE_DIR is required", "PROVISION_CREDENTIALS_DIR is required", "PROVISION_OUTPUTS_SECRET is required", "POD_NAMESPACE is required"},
		},
		"a state bucket of another workspace": {
			set:  map[string]string{api.EnvStateBucket: "kubeopera-terraform-state-dev-0c5e2a9f4b17"},
			errs: []string{`PROVISION_STATE_BUCKET "kubeopera-terraform-state-dev-0c5e2a9f4b17" is not a state bucket of workspace d37f1981a6be`},
		},
		"a bucket without the workspace": {
			set:  map[string]string{api.EnvStateBucket: "kubeopera-terraform-state-dev"},
			errs: []string{`PROVISION_STATE_BUCKET "kubeopera-terraform-state-dev" is not a state bucket of workspace d37f1981a6be`},
		},
		"unknown operation": {set: map[string]string{api.EnvOperation: "upgrade"}, errs: []string{`PROVISION_OPERATION must be apply, destroy or plan, not "upgrade"`}},
		"a plan run saves its plan in its workspace's state": {
			set: map[string]string{api.EnvOperation: "plan", api.EnvPlanKey: "d37f1981a6be/c1/plans/r1.tfplan"},
			verify: func(c *Config) string {
				if c.Operation != api.OperationPlan || c.PlanKey != "d37f1981a6be/c1/plans/r1.tfplan" {
					return "operation " + string(c.Operation) + " plan key " + c.PlanKey
				}
				return ""
			},
		},
		"a plan run without a plan key": {set: map[string]string{api.EnvOperation: "plan"}, errs: []string{"PROVISION_PLAN_KEY is required for a plan run"}},
		"a plan key of another workspace": {
			set:  map[string]string{api.EnvPlanKey: "0c5e2a9f4b17/c1/plans/r0.tfplan"},
			errs: []string{`PROVISION_PLAN_KEY "0c5e2a9f4b17/c1/plans/r0.tfplan" is not an object of workspace d37f1981a6be`},
		},
		"a destroy of a plan": {
			set:  map[string]string{api.EnvOperation: "destroy", api.EnvPlanKey: "d37f1981a6be/c1/plans/r0.tfplan"},
			errs: []string{"PROVISION_PLAN_KEY is for plan and apply runs only"},
		},
		"unknown topology": {set: map[string]string{api.EnvTopology: "gke"}, errs: []string{`PROVISION_TOPOLOGY must be vanilla_kubeadm or eks, not "gke"`}},
		"destroy needs no topology": {
			set: map[string]string{api.EnvOperation: "destroy", api.EnvTopology: ""},
			verify: func(c *Config) string {
				if c.Operation != api.OperationDestroy {
					return "operation " + string(c.Operation)
				}
				return ""
			},
		},
		"bad durations": {
			set:  map[string]string{EnvSSMPollInterval: "soon", EnvSSMPollTimeout: "-1s"},
			errs: []string{`PROVISION_SSM_POLL_INTERVAL must be a positive duration such as 20s, not "soon"`, "PROVISION_SSM_POLL_TIMEOUT must be a positive duration"},
		},
		"test waits": {
			set: map[string]string{EnvSSMPollInterval: "250ms", EnvSSMPollTimeout: "30s"},
			verify: func(c *Config) string {
				if c.SSMPollInterval != 250*time.Millisecond || c.SSMPollTimeout != 30*time.Second {
					return "waits " + c.SSMPollInterval.String() + " " + c.SSMPollTimeout.String()
				}
				return ""
			},
		},
		"backend config extra": {
			set: map[string]string{EnvBackendConfigExtra: " use_path_style=true , skip_s3_checksum=true,"},
			verify: func(c *Config) string {
				return cmp.Diff([]string{"use_path_style=true", "skip_s3_checksum=true"}, c.BackendConfigExtra)
			},
		},
		"backend config extra without a value": {
			set:  map[string]string{EnvBackendConfigExtra: "use_path_style"},
			errs: []string{`PROVISION_BACKEND_CONFIG_EXTRA must be comma-separated key=value pairs, not "use_path_style"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			env := baseEnv()
			for k, v := range tc.set {
				env[k] = v
			}
			for _, k := range tc.unset {
				delete(env, k)
			}
			c, err := ConfigFromEnv(lookup(env))
			for _, e := range tc.errs {
				if err == nil || !strings.Contains(err.Error(), e) {
					t.Errorf("error %v does not say %q", err, e)
				}
			}
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if msg := tc.verify(c); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}
