package ekstoken

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"
)

func TestExecCredential(t *testing.T) {
	expiry := time.Date(2026, 9, 10, 0, 49, 12, 0, time.FixedZone("CEST", 2*60*60))
	out, err := ExecCredential("k8s-aws-v1.abc", expiry)
	if err != nil {
		t.Fatalf("ExecCredential: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	want := map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1beta1",
		"kind":       "ExecCredential",
		"spec":       map[string]any{"interactive": false},
		"status": map[string]any{
			"token": "k8s-aws-v1.abc",
			// RFC 3339 in UTC, as client-go parses it.
			"expirationTimestamp": "2026-09-09T22:49:12Z",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExecCredential JSON (-want +got):\n%s", diff)
	}
	if ExecCredentialAPIVersion != clientauthv1beta1.SchemeGroupVersion.String() {
		t.Errorf("ExecCredentialAPIVersion = %q, client-go's is %q", ExecCredentialAPIVersion, clientauthv1beta1.SchemeGroupVersion)
	}
}

func TestExecCredentialErrors(t *testing.T) {
	cases := map[string]struct {
		token  string
		expiry time.Time
	}{
		"no token":  {expiry: time.Now()},
		"no expiry": {token: "k8s-aws-v1.abc"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if out, err := ExecCredential(tc.token, tc.expiry); err == nil {
				t.Errorf("ExecCredential = %s, want an error", out)
			}
		})
	}
}
