package provisioning

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kov1alpha1 "github.com/kubeopera/kubeopera/apis/kubeopera/v1alpha1"
	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/internal/reconcile"
)

func TestCheckCredential(t *testing.T) {
	key := map[string][]byte{api.CredentialAccessKey: []byte("AKIA"), api.CredentialSecretKey: []byte("s")}
	role := map[string][]byte{api.CredentialRoleARN: []byte("arn:aws:iam::123456789012:role/r")}
	cases := map[string]struct {
		data          map[string][]byte
		needAccessKey bool
		wantErr       string
	}{
		"access key":                          {data: key},
		"role only":                           {data: role},
		"role only, an access key is needed":  {data: role, needAccessKey: true, wantErr: "topology eks needs keys"},
		"access key without its secret":       {data: map[string][]byte{api.CredentialAccessKey: []byte("AKIA")}, wantErr: "go together"},
		"blank secret key":                    {data: map[string][]byte{api.CredentialAccessKey: []byte("AKIA"), api.CredentialSecretKey: []byte("  ")}, wantErr: "go together"},
		"nothing":                             {data: map[string][]byte{"other": []byte("x")}, wantErr: "needs keys"},
		"role that is not an ARN":             {data: map[string][]byte{api.CredentialRoleARN: []byte("admin")}, wantErr: "not an IAM role ARN"},
		"external_id of its own is no answer": {data: map[string][]byte{api.CredentialExternalID: []byte("x")}, wantErr: "needs keys"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := checkCredential(tc.data, tc.needAccessKey)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			}
			// Never a value in the message.
			if err != nil && (strings.Contains(err.Error(), "AKIA") || strings.Contains(err.Error(), "123456789012")) {
				t.Errorf("the message shows a credential's value: %v", err)
			}
		})
	}
}

// The run history keeps the last MaxRuns runs, updates a known run in place and keeps its start.
func TestRecord(t *testing.T) {
	hc := &kov1alpha1.HostCluster{}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range MaxRuns + 3 {
		record(hc, api.Provision{ID: fmt.Sprint("run-", i), Operation: api.OperationApply, Status: api.StatusQueued, StartedAt: &start})
	}
	runs := hc.Status.ProvisionRuns
	if len(runs) != MaxRuns || runs[0].ID != "run-3" || runs[len(runs)-1].ID != fmt.Sprint("run-", MaxRuns+2) {
		t.Fatalf("history %v, want runs 3..%d", ids(runs), MaxRuns+2)
	}
	end := start.Add(time.Minute)
	record(hc, api.Provision{ID: "run-5", Operation: api.OperationApply, Status: api.StatusSucceeded, FinishedAt: &end})
	got := hc.Status.ProvisionRuns[2]
	if len(hc.Status.ProvisionRuns) != MaxRuns || got.ID != "run-5" || got.Outcome != string(api.StatusSucceeded) ||
		!got.FinishedAt.Equal(&metav1.Time{Time: end}) || !got.StartedAt.Equal(&metav1.Time{Time: start}) {
		t.Errorf("run-5 after its end: %+v (history %v)", got, ids(hc.Status.ProvisionRuns))
	}
}

func ids(runs []kov1alpha1.ProvisionRun) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func TestTerraformEnvironment(t *testing.T) {
	long := strings.Repeat("a", 60)
	cases := map[string]struct {
		clusterID, env, want string
	}{
		"spec wins":                {clusterID: "c1", env: "prod", want: "prod"},
		"clusterID made a suffix":  {clusterID: "-My-Cluster-", want: "my-cluster"},
		"long clusterID shortened": {clusterID: long},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hc := &kov1alpha1.HostCluster{Spec: kov1alpha1.HostClusterSpec{ClusterID: tc.clusterID, Provisioning: &kov1alpha1.HostClusterProvisioning{TerraformEnvironment: tc.env}}}
			got := TerraformEnvironment(hc)
			if tc.want != "" && got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if len(got) > 37 {
				t.Errorf("%q is longer than 37 characters: the state bucket's name would be too long", got)
			}
		})
	}
	hc := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	if reservationKey(hc, api.OperationApply) == reservationKey(hc, api.OperationDestroy) {
		t.Error("an apply and a destroy share a reservation")
	}
	before := reservationKey(hc, api.OperationApply)
	record(hc, api.Provision{ID: "r1", Operation: api.OperationApply})
	if reservationKey(hc, api.OperationApply) == before {
		t.Error("a started run does not get a new reservation for the next one")
	}
}

// A tracked run is the one a step asks for only when it was made for the current spec's module
// inputs (and applies the approved plan, when one is asked for); runs that do not say are taken
// as current.
func TestStale(t *testing.T) {
	cases := map[string]struct {
		p    api.Provision
		run  Run
		want bool
	}{
		"same inputs":                        {p: api.Provision{InputsHash: "a"}, run: Run{Want: "a"}},
		"an earlier spec":                    {p: api.Provision{InputsHash: "a"}, run: Run{Want: "b"}, want: true},
		"a run from before inputs were kept": {p: api.Provision{}, run: Run{Want: "b"}},
		"no spec asked for":                  {p: api.Provision{InputsHash: "a"}, run: Run{}},
		"the approved plan":                  {p: api.Provision{InputsHash: "a", PlanRun: "p1"}, run: Run{Want: "a", PlanRun: "p1"}},
		"another plan":                       {p: api.Provision{InputsHash: "a", PlanRun: "p0"}, run: Run{Want: "a", PlanRun: "p1"}, want: true},
		"an apply that planned by itself":    {p: api.Provision{InputsHash: "a"}, run: Run{Want: "a", PlanRun: "p1"}, want: true},
	}
	for name, tc := range cases {
		if got := stale(tc.p, tc.run); got != tc.want {
			t.Errorf("%s: stale %t, want %t", name, got, tc.want)
		}
	}
}

// The inputs hash of a HostCluster's runs follows the module's inputs in its spec only.
func TestInputsHashOfTheSpec(t *testing.T) {
	hc := func(mutate func(*kov1alpha1.HostCluster)) Cluster {
		h := &kov1alpha1.HostCluster{ObjectMeta: metav1.ObjectMeta{UID: "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f"}, Spec: kov1alpha1.HostClusterSpec{
			ClusterID: "c1", Mode: kov1alpha1.HostClusterModeProvisionVanilla, Region: "eu-north-1", Domain: "a.example.com",
			Provisioning: &kov1alpha1.HostClusterProvisioning{Topology: kov1alpha1.TopologyVanillaKubeadm, NodeCount: 2, InstanceType: "t3.medium",
				KubernetesVersion: "1.31.0", CredentialRef: "aws", DeletionPolicy: kov1alpha1.DeletionPolicyRetain, ApprovePlan: kov1alpha1.PlanApprovalAuto}}}
		if mutate != nil {
			mutate(h)
		}
		return Cluster{Scope: &reconcile.Scope{LogicalCluster: "1bg4baqdjkcw9lz4", Namespace: "kcp-d37f1981a6be"}, HostCluster: h}
	}
	base := InputsHash(hc(nil))
	for name, m := range map[string]func(*kov1alpha1.HostCluster){
		"domain":         func(h *kov1alpha1.HostCluster) { h.Spec.Domain = "b.example.com" },
		"deletionPolicy": func(h *kov1alpha1.HostCluster) { h.Spec.Provisioning.DeletionPolicy = kov1alpha1.DeletionPolicyDestroy },
		"approvePlan":    func(h *kov1alpha1.HostCluster) { h.Spec.Provisioning.ApprovePlan = kov1alpha1.PlanApprovalManual },
		"credentialRef":  func(h *kov1alpha1.HostCluster) { h.Spec.Provisioning.CredentialRef = "aws-2" },
	} {
		if got := InputsHash(hc(m)); got != base {
			t.Errorf("a change of %s changes the inputs hash: nothing would be applied by a new run", name)
		}
	}
	if InputsHash(hc(func(h *kov1alpha1.HostCluster) { h.Spec.Provisioning.NodeCount = 5 })) == base {
		t.Error("nodeCount 2 to 5 leaves the inputs hash: it would never be applied")
	}
}
