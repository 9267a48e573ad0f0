package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/google/go-cmp/cmp"

	"github.com/kubeopera/kubeopera/internal/provisioner/api"
	"github.com/kubeopera/kubeopera/test/sim"
)

// projectSecret writes data as the kubelet projects a Secret volume: the files in a timestamped
// directory, a ..data symlink to it, a symlink per key.
func projectSecret(t *testing.T, data map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_11_29_12_00_00.123")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadCredential(t *testing.T) {
	dir := projectSecret(t, map[string]string{
		api.CredentialAccessKey:  "AKIAEXAMPLE\n",
		api.CredentialSecretKey:  "  secret/key+1 \n",
		api.CredentialRoleARN:    "arn:aws:iam::123456789012:role/path/provisioning",
		api.CredentialExternalID: "ext-1",
		"unrelated":              "ignored",
	})
	c, err := ReadCredential(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Credential{AccessKey: "AKIAEXAMPLE", SecretKey: "secret/key+1", RoleARN: "arn:aws:iam::123456789012:role/path/provisioning", ExternalID: "ext-1"}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}

	for name, tc := range map[string]struct {
		data map[string]string
		err  string
	}{
		"nothing":              {map[string]string{}, "credential has neither access_key/secret_key nor role_arn"},
		"half a key":           {map[string]string{api.CredentialAccessKey: "AKIA"}, "credential has only one of access_key and secret_key"},
		"token without a key":  {map[string]string{api.CredentialSessionToken: "t", api.CredentialRoleARN: "arn:aws:iam::123456789012:role/r"}, "session_token without access_key"},
		"external id, no role": {map[string]string{api.CredentialAccessKey: "A", api.CredentialSecretKey: "S", api.CredentialExternalID: "e"}, "external_id without role_arn"},
		"not a role ARN":       {map[string]string{api.CredentialRoleARN: "arn:aws:iam::123456789012:user/alice"}, "role_arn is not an IAM role ARN"},
		"role alone":           {map[string]string{api.CredentialRoleARN: "arn:aws:iam::123456789012:role/r"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadCredential(projectSecret(t, tc.data))
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			for _, v := range tc.data {
				if err != nil && len(v) > 1 && strings.Contains(err.Error(), v) {
					t.Errorf("error %q shows a value", err)
				}
			}
		})
	}
}

func TestTerraformEnv(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "HOME=/home/runner", "AWS_ENDPOINT_URL=http://127.0.0.1:1", "TF_PLUGIN_CACHE_DIR=/cache",
		"AWS_ACCESS_KEY_ID=inherited", "AWS_SECRET_ACCESS_KEY=inherited", "AWS_SESSION_TOKEN=inherited", "AWS_PROFILE=p",
		"AWS_WEB_IDENTITY_TOKEN_FILE=/t", "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://x", "KUBECONFIG=/kubeconfig",
		"TF_VAR_secret=x", "TF_LOG=TRACE", "TF_CLI_ARGS_apply=-parallelism=1", "AWS_REGION=us-east-1",
	}
	got := TerraformEnv(environ, aws.Credentials{AccessKeyID: "ASIAROLE", SecretAccessKey: "rolesecret", SessionToken: "roletoken"}, "eu-north-1")
	want := map[string]string{
		"PATH": "/usr/bin", "HOME": "/home/runner", "AWS_ENDPOINT_URL": "http://127.0.0.1:1", "TF_PLUGIN_CACHE_DIR": "/cache",
		"AWS_ACCESS_KEY_ID": "ASIAROLE", "AWS_SECRET_ACCESS_KEY": "rolesecret", "AWS_SESSION_TOKEN": "roletoken", "AWS_REGION": "eu-north-1",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got := TerraformEnv(nil, aws.Credentials{AccessKeyID: "AKIA", SecretAccessKey: "s"}, "eu-north-1"); got["AWS_SESSION_TOKEN"] != "" {
		t.Errorf("a static key has no session token: %v", got)
	}
}

func TestScrubAndTrim(t *testing.T) {
	msg := "Error: signing with AKIAEXAMPLE and secret abcd/efgh+ijkl failed; token tok-123-tok-123 rejected"
	got := Scrub(msg, "AKIAEXAMPLE", "abcd/efgh+ijkl", "tok-123", "tok-123-tok-123", "", "ab")
	if want := "Error: signing with [redacted] and secret [redacted] failed; token [redacted] rejected"; got != want {
		t.Errorf("Scrub = %q", got)
	}
	long := strings.Repeat("é", 3000) // 6000 bytes
	trimmed := Trim(long, MaxMessage)
	if len(trimmed) > MaxMessage || !strings.HasSuffix(trimmed, "(truncated)") || !strings.HasPrefix(trimmed, "éé") {
		t.Errorf("Trim: %d bytes, ends %q", len(trimmed), trimmed[len(trimmed)-20:])
	}
	if Trim("short", MaxMessage) != "short" {
		t.Error("Trim changed a short message")
	}
}

func TestRoleSessionName(t *testing.T) {
	if got := RoleSessionName("a1b2"); got != "kubeopera-provision-a1b2" {
		t.Errorf("got %q", got)
	}
	if got := RoleSessionName("x y/" + strings.Repeat("z", 80)); len(got) != 64 || strings.ContainsAny(got, " /") {
		t.Errorf("got %q", got)
	}
}

// TestAWSConfigAssumesRole: a credential with role_arn makes the runner's calls with the role's
// temporary credentials, obtained by sts:AssumeRole signed with the access key, with the
// external id and session name kubeopera-provision-<id>, for an hour.
func TestAWSConfigAssumesRole(t *testing.T) {
	e := sim.StartAWS(t)
	t.Setenv("AWS_ENDPOINT_URL", e.URL)
	for _, k := range []string{"AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		t.Setenv(k, "")
	}
	user := e.AddUser("provisioner")
	role := e.STS.AddRole("provisioning", "ext-7")
	ctx := t.Context()

	cfg, err := AWSConfig(ctx, Credential{AccessKey: user.AccessKeyID, SecretKey: user.SecretAccessKey, RoleARN: role, ExternalID: "ext-7"}, "eu-north-1", "r7")
	if err != nil {
		t.Fatal(err)
	}
	id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "arn:aws:sts::" + sim.AWSAccountID + ":assumed-role/provisioning/kubeopera-provision-r7"; aws.ToString(id.Arn) != want {
		t.Errorf("caller %s, want %s", aws.ToString(id.Arn), want)
	}
	calls := e.STS.AssumeRoleCalls()
	if len(calls) != 1 || calls[0].ExternalID != "ext-7" || calls[0].CallerAccessKeyID != user.AccessKeyID || calls[0].DurationSeconds != 3600 || calls[0].RoleSessionName != "kubeopera-provision-r7" {
		t.Errorf("AssumeRole calls %+v", calls)
	}

	// The wrong external id is refused by STS, and the error says so.
	cfg, err = AWSConfig(ctx, Credential{AccessKey: user.AccessKeyID, SecretKey: user.SecretAccessKey, RoleARN: role, ExternalID: "wrong"}, "eu-north-1", "r8")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("assuming with the wrong external id: %v", err)
	}

	// Without a role, the static key itself.
	cfg, err = AWSConfig(ctx, Credential{AccessKey: user.AccessKeyID, SecretKey: user.SecretAccessKey}, "eu-north-1", "r9")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); err != nil || !strings.HasSuffix(aws.ToString(id.Arn), ":user/provisioner") {
		t.Errorf("caller %v %v", id, err)
	}
}
