package api

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	fpA = "d37f1981a6be"
	fpB = "0c5e2a9f4b17"
)

func TestNamesOfTheSample(t *testing.T) {
	r := valid()
	r.TerraformEnvironment = "c-7e9d3a1b"
	want := Names{
		StateBucket:         "kubeopera-terraform-state-c-7e9d3a1b-d37f1981a6be",
		StateKey:            "d37f1981a6be/c-7e9d3a1b/terraform.tfstate",
		SSMPrefix:           "/kubeopera/d37f1981a6be/c-7e9d3a1b",
		ClusterName:         "c-7e9d3a1b-d37f1981a6be",
		SecurityGroupPrefix: "c-7e9d3a1b-d37f1981a6be",
		IAMPrefix:           "c-7e9d3a1b-d37f1981a6be",
		LoadBalancer:        LoadBalancerName(fpA, "c-7e9d3a1b"),
	}
	if d := cmp.Diff(want, NamesOf(&r)); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	if !regexp.MustCompile(`^ko-c-7e9d3a1b-[0-9a-f]{10}-api$`).MatchString(want.LoadBalancer) {
		t.Errorf("load balancer %q", want.LoadBalancer)
	}
}

// Two workspaces that copied the same sample get names that share nothing but their prefixes.
func TestNamesDifferAcrossWorkspaces(t *testing.T) {
	r := valid()
	a := NamesOf(&r)
	r.WorkspaceFingerprint = fpB
	b := NamesOf(&r)
	for what, pair := range map[string][2]string{
		"state bucket": {a.StateBucket, b.StateBucket}, "state key": {a.StateKey, b.StateKey},
		"SSM prefix": {a.SSMPrefix, b.SSMPrefix}, "cluster name": {a.ClusterName, b.ClusterName},
		"security groups": {a.SecurityGroupPrefix, b.SecurityGroupPrefix}, "IAM prefix": {a.IAMPrefix, b.IAMPrefix},
		"load balancer": {a.LoadBalancer, b.LoadBalancer},
	} {
		if pair[0] == pair[1] {
			t.Errorf("%s: both workspaces get %q", what, pair[0])
		}
	}
	// An SSM prefix is never a prefix of another workspace's, nor of another cluster's.
	other := SSMPrefix(fpA, "c-7e9d3a1b-2")
	for _, p := range []string{b.SSMPrefix, other} {
		if strings.HasPrefix(p+"/", a.SSMPrefix+"/") {
			t.Errorf("%s lies under %s", p, a.SSMPrefix)
		}
	}
}

func TestValidBucketName(t *testing.T) {
	for name, ok := range map[string]bool{
		"kubeopera-terraform-state-dev-d37f1981a6be": true,
		"abc":                      true,
		"ab":                       false,
		strings.Repeat("a", 63):    true,
		strings.Repeat("a", 64):    false,
		"Abc":                      false,
		"a_b":                      false,
		"a.b":                      false, // valid for S3, refused here (virtual-hosted TLS)
		"-abc":                     false,
		"abc-":                     false,
		"xn--abc":                  false,
		"sthree-abc":               false,
		"amzn-s3-demo-abc":         false,
		"abc-s3alias":              false,
		"abc--ol-s3":               false,
		"abc--x-s3":                false,
		"abc--table-s3":            false,
		"kubeopera--state--bucket": true,
	} {
		if got := ValidBucketName(name); got != ok {
			t.Errorf("ValidBucketName(%q) = %t, want %t", name, got, ok)
		}
	}
}

func TestStateBucketName(t *testing.T) {
	long := strings.Repeat("a", 36) + "b" // 37, the schema's MaxLength
	for _, tc := range []struct {
		env, want string
	}{
		{"dev", "kubeopera-terraform-state-dev-" + fpA},
		// 24 characters is the longest environment kept as it is: 26 + 24 + 1 + 12 = 63.
		{strings.Repeat("e", 24), "kubeopera-terraform-state-" + strings.Repeat("e", 24) + "-" + fpA},
		{strings.Repeat("e", 25), "kubeopera-terraform-state-" + strings.Repeat("e", 13) + "-" + hash10(strings.Repeat("e", 25)) + "-" + fpA},
		// The cut is not left ending in a hyphen.
		{"abcdefghijkl-mnopqrstuvwxyz", "kubeopera-terraform-state-abcdefghijkl-" + hash10("abcdefghijkl-mnopqrstuvwxyz") + "-" + fpA},
		{long, "kubeopera-terraform-state-" + strings.Repeat("a", 13) + "-" + hash10(long) + "-" + fpA},
	} {
		got := StateBucketName(fpA, tc.env)
		if got != tc.want {
			t.Errorf("StateBucketName(%q) = %q, want %q", tc.env, got, tc.want)
		}
		if !ValidBucketName(got) || len(got) > 63 || !IsStateBucketOf(got, fpA) || IsStateBucketOf(got, fpB) {
			t.Errorf("StateBucketName(%q) = %q: not a valid state bucket of its workspace only", tc.env, got)
		}
	}
	// Environments that share their first characters do not share a bucket.
	a, b := strings.Repeat("x", 30)+"-1", strings.Repeat("x", 30)+"-2"
	if StateBucketName(fpA, a) == StateBucketName(fpA, b) {
		t.Errorf("%q and %q share bucket %q", a, b, StateBucketName(fpA, a))
	}
	for _, bucket := range []string{"kubeopera-terraform-state-dev", "kubeopera-terraform-state-dev-" + fpA + "x", "someone-else-" + fpA} {
		if IsStateBucketOf(bucket, fpA) {
			t.Errorf("IsStateBucketOf(%q, %s) = true", bucket, fpA)
		}
	}
}

// hash10 is the first 10 hex characters of the sha256 of s.
func hash10(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:10]
}

// clusterIDs covers the clusterID pattern's extremes.
var clusterIDs = []string{"a", "c-7e9d3a1b", "C-UPPER-9", "sg-lookalike", "trailing-", strings.Repeat("z", 63), strings.Repeat("q", 14) + "-" + strings.Repeat("r", 48)}

func TestClusterNameAndPrefixes(t *testing.T) {
	eksName := regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`)
	iamName := regexp.MustCompile(`^[\w+=,.@-]+$`)
	sgName := regexp.MustCompile(`^[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]{1,255}$`)
	for _, id := range clusterIDs {
		c := ClusterName(fpA, id)
		if !eksName.MatchString(c) || !strings.HasPrefix(c, id) || !strings.HasSuffix(c, "-"+fpA) {
			t.Errorf("ClusterName(%q) = %q: not an EKS cluster name of clusterID and fingerprint", id, c)
		}
		if n := len("kubernetes.io/cluster/" + c); n > 128 {
			t.Errorf("ClusterName(%q): tag key of %d characters", id, n)
		}
		sg := SecurityGroupPrefix(fpA, id)
		for _, suffix := range []string{"-api", "-control-plane", "-workers"} {
			if n := sg + suffix; !sgName.MatchString(n) || strings.HasPrefix(strings.ToLower(n), "sg-") {
				t.Errorf("security group %q of clusterID %q is not a valid name", n, id)
			}
		}
		iam := IAMPrefix(fpA, id)
		if len(iam) > 24 || !iamName.MatchString(iam) || !strings.HasSuffix(iam, "-"+fpA) {
			t.Errorf("IAMPrefix(%q) = %q", id, iam)
		}
		if n := len(iam + "-worker-"); n > 38 {
			t.Errorf("IAMPrefix(%q): a role name_prefix of %d characters (the AWS provider allows 38)", id, n)
		}
		if StateKey(fpA, id) == StateKey(fpB, id) || SSMPrefix(fpA, id) == SSMPrefix(fpB, id) {
			t.Errorf("%q: the state key or SSM prefix ignores the workspace", id)
		}
	}
	if got := SecurityGroupPrefix(fpA, "sg-lookalike"); got != "ko-sg-lookalike-"+fpA {
		t.Errorf("SecurityGroupPrefix of an sg- clusterID = %q", got)
	}
}

func TestLoadBalancerName(t *testing.T) {
	elbName := regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,30}[A-Za-z0-9])?$`)
	seen := map[string]string{}
	for _, fp := range []string{fpA, fpB} {
		for _, id := range append(clusterIDs, strings.Repeat("q", 14)+"-other", "c-7e9d3a1b-2") {
			n := LoadBalancerName(fp, id)
			if !elbName.MatchString(n) || strings.HasPrefix(n, "internal-") {
				t.Errorf("LoadBalancerName(%s, %q) = %q: not a valid load balancer name", fp, id, n)
			}
			if other, dup := seen[n]; dup {
				t.Errorf("LoadBalancerName(%s, %q) = %q, the name of %s", fp, id, n, other)
			}
			seen[n] = fp + "/" + id
		}
	}
}
