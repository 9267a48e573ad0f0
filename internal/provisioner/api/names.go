package api

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Cloud-side names. Every name a run gives something in the tenant's AWS account is derived from
// the workspace fingerprint (CreateRequest.WorkspaceFingerprint: 12 hex characters of the sha256
// of the workspace's logical cluster, workspaces.Fingerprint) and the tenant's own names
// (clusterID, terraformEnvironment), so two workspaces that chose the same names, in one AWS
// account or in two, never share a state bucket, a state object, an SSM path, a load balancer or
// a cluster. The seed's names stay recognisable as each name's prefix. Each function keeps to the
// service's length and character rules, cited where it is defined; a name that would be too long
// keeps its prefix and the fingerprint and shortens the tenant's part with a hash of it, so two
// different tenant names never shorten to one.

// Names are the cloud-side names of one cluster's runs.
type Names struct {
	// StateBucket is the S3 bucket holding the Terraform state (StateBucketName).
	StateBucket string
	// StateKey is the state object's key in it (StateKey).
	StateKey string
	// SSMPrefix is the SSM path of a vanilla_kubeadm cluster's bootstrap parameters (SSMPrefix).
	SSMPrefix string
	// ClusterName names the cluster in AWS: the EKS cluster, the kubernetes.io/cluster/<name> tags
	// the AWS cloud provider looks for, and the prefix of the VPC's, the instances' and the Auto
	// Scaling group's names (ClusterName).
	ClusterName string
	// SecurityGroupPrefix starts the names of the cluster's security groups (SecurityGroupPrefix).
	SecurityGroupPrefix string
	// IAMPrefix starts the names of the cluster's IAM roles and instance profiles (IAMPrefix).
	IAMPrefix string
	// LoadBalancer names the API load balancer and its target group (LoadBalancerName).
	LoadBalancer string
}

// NamesOf are the cloud-side names of the request's cluster. The request must be valid.
func NamesOf(r *CreateRequest) Names {
	fp, id := r.WorkspaceFingerprint, r.ClusterID
	return Names{
		StateBucket:         StateBucketName(fp, r.TerraformEnvironment),
		StateKey:            StateKey(fp, id),
		SSMPrefix:           SSMPrefix(fp, id),
		ClusterName:         ClusterName(fp, id),
		SecurityGroupPrefix: SecurityGroupPrefix(fp, id),
		IAMPrefix:           IAMPrefix(fp, id),
		LoadBalancer:        LoadBalancerName(fp, id),
	}
}

// FingerprintPattern is the shape of a workspace fingerprint: 12 lowercase hex characters.
const FingerprintPattern = `^[0-9a-f]{12}$`

var fingerprintRe = regexp.MustCompile(FingerprintPattern)

// maxBucketName is S3's limit on a bucket name ("General purpose bucket naming rules",
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html: 3 to 63
// characters of lowercase letters, digits, dots and hyphens, beginning and ending with a letter
// or digit; not formatted as an IP address; not starting with xn--, sthree- or amzn-s3-demo-;
// not ending with -s3alias, --ol-s3, .mrap, --x-s3 or --table-s3).
const maxBucketName = 63

// StateBucketName is the state bucket of a workspace's terraformEnvironment:
// kubeopera-terraform-state-<env>-<fp>. The environment part is shortened to fit 63 characters
// when needed (<first characters>-<hash>). The name starts with StateBucketPrefix and ends with
// the fingerprint's hex digits, so it never carries a reserved prefix or suffix; env is a valid
// terraformEnvironment (lowercase letters, digits and hyphens).
func StateBucketName(fp, env string) string {
	room := maxBucketName - len(StateBucketPrefix) - len("-") - len(fp)
	return StateBucketPrefix + shorten(env, room) + "-" + fp
}

// ValidBucketName reports whether name obeys S3's general purpose bucket naming rules (see
// maxBucketName). Dots, which S3 allows, are refused too: a bucket with a dot in its name cannot
// be reached over virtual-hosted TLS.
func ValidBucketName(name string) bool {
	if len(name) < 3 || len(name) > maxBucketName || !bucketRe.MatchString(name) {
		return false
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, s := range append([]string{".mrap"}, ReservedBucketSuffixes...) {
		if strings.HasSuffix(name, s) {
			return false
		}
	}
	return true
}

var bucketRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*[a-z0-9]$`)

// IsStateBucketOf reports whether bucket is a state bucket of workspace fp: the runner refuses to
// touch any other.
func IsStateBucketOf(bucket, fp string) bool {
	return fingerprintRe.MatchString(fp) && strings.HasPrefix(bucket, StateBucketPrefix) && strings.HasSuffix(bucket, "-"+fp) && ValidBucketName(bucket)
}

// StateKey is the state object's key: <fp>/<clusterID>/terraform.tfstate (an S3 key may be up to
// 1024 bytes of UTF-8, "Naming Amazon S3 objects",
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html; this one is at most 98).
func StateKey(fp, clusterID string) string { return fp + "/" + clusterID + "/terraform.tfstate" }

// PlanKey is the object of plan run runID's saved plan in the cluster's state bucket, next to the
// state: <fp>/<clusterID>/plans/<runID>.tfplan (encrypted like the state: a plan holds state
// values).
func PlanKey(fp, clusterID, runID string) string {
	return fp + "/" + clusterID + "/plans/" + runID + ".tfplan"
}

// SSMPrefix is the SSM path of a vanilla_kubeadm cluster's bootstrap parameters:
// /kubeopera/<fp>/<clusterID>. SSM parameter names are case sensitive, made of a-zA-Z0-9_.- with
// / between hierarchy levels, at most 15 levels deep, and may not start with "aws" or "ssm"
// (PutParameter's Name, https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_PutParameter.html);
// the deepest parameter under this prefix, control_plane_joined/<index>, is five levels and
// fewer than 120 characters.
func SSMPrefix(fp, clusterID string) string { return "/kubeopera/" + fp + "/" + clusterID }

// maxClusterName is EKS's limit on a cluster name: 1 to 100 alphanumeric characters, hyphens and
// underscores, starting with an alphanumeric character, unique per account and region
// (CreateCluster's name, https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html).
const maxClusterName = 100

// ClusterName is the cluster's name in AWS: <clusterID>-<fp> (at most 76 characters; the
// clusterID pattern starts with an alphanumeric and has only alphanumerics and hyphens). It is
// also the value of the kubernetes.io/cluster/<name> tag keys (a tag key may be 128 characters,
// "Tag your Amazon EC2 resources", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html)
// and the prefix of the Auto Scaling group's name (255 characters) and the launch template's
// (128 characters).
func ClusterName(fp, clusterID string) string {
	return shorten(clusterID, maxClusterName-len("-")-len(fp)) + "-" + fp
}

// SecurityGroupPrefix starts the cluster's security group names (<prefix>-api, -control-plane,
// -workers): ClusterName, with "ko-" in front when it would start with "sg-". A security group
// name is up to 255 characters of a-zA-Z0-9, spaces and ._-:/()#,@[]+=&;{}!$*, unique within its
// VPC, case-insensitive, and may not start with sg- (CreateSecurityGroup's GroupName,
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateSecurityGroup.html).
func SecurityGroupPrefix(fp, clusterID string) string {
	name := ClusterName(fp, clusterID)
	if strings.HasPrefix(strings.ToLower(name), "sg-") {
		return "ko-" + name
	}
	return name
}

// maxIAMPrefix bounds IAMPrefix: IAM role and instance profile names are at most 64 and 128
// characters of alphanumerics and +=,.@_- ("IAM and AWS STS quotas", IAM name requirements,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html), and the AWS
// provider's name_prefix appends 26 characters, so a role's name_prefix is at most 38; the
// modules add at most "-worker-" (8).
const maxIAMPrefix = 24

// IAMPrefix starts the names of the cluster's IAM roles and instance profiles:
// <start of clusterID>-<fp>, at most 24 characters.
func IAMPrefix(fp, clusterID string) string {
	room := maxIAMPrefix - len("-") - len(fp)
	id := clusterID
	if len(id) > room {
		id = strings.TrimRight(id[:room], "-")
	}
	return id + "-" + fp
}

// maxLoadBalancerName is Elastic Load Balancing's limit on a load balancer's and a target
// group's name: at most 32 alphanumeric characters or hyphens, not beginning or ending with a
// hyphen, unique per account and region, and a load balancer's not beginning with "internal-"
// (CreateLoadBalancer's and CreateTargetGroup's Name,
// https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_CreateLoadBalancer.html,
// https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_CreateTargetGroup.html).
const maxLoadBalancerName = 32

// LoadBalancerName names the API load balancer and its target group:
// ko-<start of clusterID>-<hash>-api, the hash (10 hex characters) of the fingerprint and the
// whole clusterID, so clusters of two workspaces, and two clusters of one workspace whose IDs
// start alike, get different names.
func LoadBalancerName(fp, clusterID string) string {
	sum := sha256.Sum256([]byte(fp + "/" + clusterID))
	h := hex.EncodeToString(sum[:])[:10]
	room := maxLoadBalancerName - len("ko-") - len("-") - len(h) - len("-api")
	base := strings.ToLower(clusterID)
	if len(base) > room {
		base = base[:room]
	}
	base = strings.TrimRight(base, "-")
	return "ko-" + base + "-" + h + "-api"
}

// shorten returns s when it has at most max characters, else its first characters and a hash of
// all of it (<start>-<10 hex>), max characters long, the start without a trailing hyphen.
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(s[:max-len(h)-1], "-") + "-" + h
}
