package ekstoken

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

const (
	tempAccessKeyID     = "ASIAEXAMPLETEMP00001"
	tempSecretAccessKey = "temp/secret/key/that/must/never/leak0001"
	tempSessionToken    = "FwoGZXIvYXdzEXAMPLEsessionTOKEN//////////wEaDEXAMPLE="
)

// assumeRoleResponse is sts:AssumeRole's success response as STS sends it for the awsquery
// protocol: the shape of the "Sample Response" on
// https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html (AssumeRoleResponse ->
// AssumeRoleResult -> Credentials{AccessKeyId, SecretAccessKey, SessionToken, Expiration},
// AssumedRoleUser, PackedPolicySize; ResponseMetadata -> RequestId).
const assumeRoleResponse = `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/eks-admin/kubeopera-eks-token</Arn>
      <AssumedRoleId>AROA3XFRBF535PLBIFPI4:kubeopera-eks-token</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>%s</SecretAccessKey>
      <SessionToken>%s</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
    <PackedPolicySize>6</PackedPolicySize>
  </AssumeRoleResult>
  <ResponseMetadata>
    <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>
  </ResponseMetadata>
</AssumeRoleResponse>`

// fakeSTS answers sts:AssumeRole and records every request it gets.
type fakeSTS struct {
	mu       sync.Mutex
	requests []stsRequest
}

type stsRequest struct {
	form          url.Values
	authorization string
}

func (f *fakeSTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, stsRequest{form: r.PostForm, authorization: r.Header.Get("Authorization")})
	f.mu.Unlock()
	if r.Method != http.MethodPost || r.PostForm.Get("Action") != "AssumeRole" {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	expiration := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	fmt.Fprintf(w, assumeRoleResponse, tempAccessKeyID, tempSecretAccessKey, tempSessionToken, expiration)
}

func (f *fakeSTS) recorded() []stsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stsRequest(nil), f.requests...)
}

func TestAssumeRoleSignsWithTemporaryCredentials(t *testing.T) {
	cases := map[string]struct {
		role            Role
		wantSessionName string
		wantExternalID  string
	}{
		"external id and default session name": {
			role:            Role{ARN: "arn:aws:iam::123456789012:role/eks-admin", ExternalID: "kubeopera-7e9d3a1b"},
			wantSessionName: DefaultSessionName,
			wantExternalID:  "kubeopera-7e9d3a1b",
		},
		"no external id, own session name": {
			role:            Role{ARN: "arn:aws:iam::123456789012:role/eks-admin", SessionName: "cluster-7e9d3a1b"},
			wantSessionName: "cluster-7e9d3a1b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fake := &fakeSTS{}
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)

			base := staticConfig("eu-north-1")
			base.BaseEndpoint = aws.String(srv.URL)
			cfg, err := AssumeRole(base, tc.role)
			if err != nil {
				t.Fatalf("AssumeRole: %v", err)
			}
			if len(fake.recorded()) != 0 {
				t.Fatal("AssumeRole called STS before credentials were needed")
			}

			token, _, err := Token(context.Background(), cfg, "my-cluster", fixedNow)
			if err != nil {
				t.Fatalf("Token: %v", err)
			}

			reqs := fake.recorded()
			if len(reqs) != 1 {
				t.Fatalf("STS got %d requests, want exactly one AssumeRole", len(reqs))
			}
			form := reqs[0].form
			for k, want := range map[string]string{
				"Action":          "AssumeRole",
				"Version":         "2011-06-15",
				"RoleArn":         tc.role.ARN,
				"RoleSessionName": tc.wantSessionName,
				"ExternalId":      tc.wantExternalID,
			} {
				if got := form.Get(k); got != want {
					t.Errorf("AssumeRole %s = %q, want %q", k, got, want)
				}
			}
			if tc.wantExternalID == "" && form.Has("ExternalId") {
				t.Errorf("AssumeRole sent ExternalId %q though none was configured", form.Get("ExternalId"))
			}
			if !strings.Contains(reqs[0].authorization, "Credential="+testAccessKeyID+"/") {
				t.Errorf("AssumeRole not signed with the base credentials: Authorization %q", reqs[0].authorization)
			}

			u := decodeToken(t, token)
			srvURL, _ := url.Parse(srv.URL)
			checkPresignedURL(t, u, srvURL.Host, "eu-north-1", tempAccessKeyID)
			if got := u.Query().Get("X-Amz-Security-Token"); got != tempSessionToken {
				t.Errorf("X-Amz-Security-Token = %q, want the assumed role's session token", got)
			}
			verifySignature(t, u, "my-cluster", tempSecretAccessKey)
			if strings.Contains(u.String(), testAccessKeyID) {
				t.Error("the token names the base access key id, not only the assumed role's")
			}
		})
	}
}

func TestAssumeRoleFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// STS's awsquery error body (AWS STS API Reference, "Common Errors").
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>AccessDenied</Code><Message>not authorized to perform: sts:AssumeRole</Message></Error>
  <RequestId>4a2b0c1d-0000-0000-0000-000000000000</RequestId>
</ErrorResponse>`)
	}))
	t.Cleanup(srv.Close)

	base := staticConfig("eu-north-1")
	base.BaseEndpoint = aws.String(srv.URL)
	cfg, err := AssumeRole(base, Role{ARN: "arn:aws:iam::123456789012:role/eks-admin"})
	if err != nil {
		t.Fatalf("AssumeRole: %v", err)
	}
	_, _, err = Token(context.Background(), cfg, "my-cluster", fixedNow)
	if err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("err = %v, want the AccessDenied from STS", err)
	}
	if strings.Contains(err.Error(), testSecretAccessKey) {
		t.Error("the error names the secret access key")
	}
}

func TestAssumeRoleRequiresARN(t *testing.T) {
	if _, err := AssumeRole(staticConfig("eu-north-1"), Role{ExternalID: "x"}); err == nil {
		t.Fatal("AssumeRole accepted a role without an ARN")
	}
}
