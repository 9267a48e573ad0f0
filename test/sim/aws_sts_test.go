package sim

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/kubeopera/kubeopera/internal/aws/ekstoken"
)

// replay GETs an EKS token's presigned URL as the EKS authenticator does: header x-k8s-aws-id set
// to cluster, JSON asked for. It returns the status and body.
func replay(t *testing.T, token, cluster string) (int, string) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, ekstoken.TokenPrefix))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, string(raw), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ekstoken.ClusterIDHeader, cluster)
	req.Header.Set("accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// callerARN reads the Arn of a JSON GetCallerIdentity answer.
func callerARN(t *testing.T, body string) string {
	t.Helper()
	var id struct {
		GetCallerIdentityResponse struct {
			GetCallerIdentityResult struct{ Arn, Account, UserId string } //nolint:revive // STS's names
		}
	}
	if err := json.Unmarshal([]byte(body), &id); err != nil {
		t.Fatalf("not GetCallerIdentity's JSON answer: %v\n%s", err, body)
	}
	return id.GetCallerIdentityResponse.GetCallerIdentityResult.Arn
}

// TestSTSPresignedGetCallerIdentity: an EKS token's presigned URL, replayed, names its signer; it
// is refused for another cluster (x-k8s-aws-id is signed), once 15 minutes old, and signed by a
// wrong secret.
func TestSTSPresignedGetCallerIdentity(t *testing.T) {
	e := StartAWS(t)
	ctx := t.Context()
	user := e.AddUser("tenant")
	cfg := ekstoken.StaticConfig("eu-north-1", e.URL, aws.Credentials{AccessKeyID: user.AccessKeyID, SecretAccessKey: user.SecretAccessKey})
	token, _, err := ekstoken.Token(ctx, cfg, "my-cluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	code, body := replay(t, token, "my-cluster")
	if code != http.StatusOK || callerARN(t, body) != "arn:aws:iam::"+AWSAccountID+":user/tenant" {
		t.Fatalf("replayed token: %d %s, want 200 naming the user", code, body)
	}
	if code, body := replay(t, token, "another-cluster"); code != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Errorf("token replayed for another cluster: %d %s, want 403 SignatureDoesNotMatch", code, body)
	}
	old, _, err := ekstoken.Token(ctx, cfg, "my-cluster", func() time.Time { return time.Now().Add(-16 * time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	if code, body := replay(t, old, "my-cluster"); code != http.StatusForbidden || !strings.Contains(body, "Signature expired") {
		t.Errorf("a 16-minute-old token: %d %s, want 403 Signature expired", code, body)
	}
	wrong := ekstoken.StaticConfig("eu-north-1", e.URL, aws.Credentials{AccessKeyID: user.AccessKeyID, SecretAccessKey: "not-" + user.SecretAccessKey})
	forged, _, err := ekstoken.Token(ctx, wrong, "my-cluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := replay(t, forged, "my-cluster"); code != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Errorf("a token signed with a wrong secret: %d %s, want 403 SignatureDoesNotMatch", code, body)
	}

	// A role session's token (its session token in the query) names the assumed role.
	role := e.STS.AddRole("eks-admin", "")
	assumed, err := ekstoken.AssumeRole(cfg, ekstoken.Role{ARN: role, SessionName: "kubeopera-manager"})
	if err != nil {
		t.Fatal(err)
	}
	token, _, err = ekstoken.Token(ctx, assumed, "my-cluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := replay(t, token, "my-cluster"); code != http.StatusOK || callerARN(t, body) != "arn:aws:sts::"+AWSAccountID+":assumed-role/eks-admin/kubeopera-manager" {
		t.Errorf("a role session's token: %d %s, want 200 naming the assumed role", code, body)
	}
	var gets int
	for _, r := range e.Requests("sts") {
		if r.Operation == "GetCallerIdentity" && r.Status == http.StatusOK {
			gets++
		}
	}
	if gets != 2 {
		t.Errorf("%d successful GetCallerIdentity recorded, want the two valid replays", gets)
	}
	// The SDK's own (XML, POST) GetCallerIdentity still works.
	if out, err := sts.NewFromConfig(config(e, user, "eu-north-1")).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); err != nil || aws.ToString(out.Arn) != "arn:aws:iam::"+AWSAccountID+":user/tenant" {
		t.Errorf("GetCallerIdentity: %+v %v", out, err)
	}
}

// TestSTSTrustPolicy: a role trusting one principal with an sts:ExternalId condition is assumed
// by that principal with that external ID only; everything else is AccessDenied, as AWS answers
// (API_AssumeRole.html, "Errors"; IAM User Guide, "Access to AWS accounts owned by third
// parties").
func TestSTSTrustPolicy(t *testing.T) {
	e := StartAWS(t)
	ctx := t.Context()
	platform := e.AddUser("platform")
	other := e.AddUser("other")
	role := e.STS.AddRoleTrusting("tenant-b", Trust{Principals: []string{"arn:aws:iam::" + AWSAccountID + ":user/platform"}, ExternalID: "kubeopera-b"})
	assume := func(c AWSCredentials, externalID *string) error {
		_, err := sts.NewFromConfig(config(e, c, "eu-north-1")).AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("s1"), ExternalId: externalID})
		return err
	}
	for name, tc := range map[string]struct {
		caller     AWSCredentials
		externalID *string
		want       string
	}{
		"the trusted principal with the external id": {platform, aws.String("kubeopera-b"), ""},
		"the trusted principal with another id":      {platform, aws.String("kubeopera-a"), "AccessDenied"},
		"the trusted principal without an id":        {platform, nil, "AccessDenied"},
		"another principal with the external id":     {other, aws.String("kubeopera-b"), "AccessDenied"},
		"an external id with a space":                {platform, aws.String("kubeopera b"), "ValidationError"},
	} {
		if got := code(assume(tc.caller, tc.externalID)); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
	denied := 0
	for _, c := range e.STS.AssumeRoleCalls() {
		if c.Error == "AccessDenied" && c.Issued.AccessKeyID == "" {
			denied++
		}
	}
	if denied != 3 {
		t.Errorf("%d AccessDenied calls recorded without credentials, want 3", denied)
	}
}
