package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	baseAccessKeyID     = "AKIDEXAMPLEBINARY001"
	baseSecretAccessKey = "binary/base/secret/never/to/be/printed01"
	tempAccessKeyID     = "ASIAEXAMPLEBINARY001"
	tempSecretAccessKey = "binary/temp/secret/never/to/be/printed01"
	tempSessionToken    = "FwoGZXIvYXdzEXAMPLEbinarySESSIONtoken="
)

// TestBinary builds eks-token-helper and runs it as client-go would, with credentials in its
// environment and nothing else of the developer's AWS setup.
func TestBinary(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the binary with")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "eks-token-helper")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	h := helper{bin: bin, home: dir}

	t.Run("env credentials", func(t *testing.T) {
		before := time.Now().UTC().Truncate(time.Second)
		res := h.run(t, map[string]string{
			"AWS_ACCESS_KEY_ID":     baseAccessKeyID,
			"AWS_SECRET_ACCESS_KEY": baseSecretAccessKey,
		}, "--cluster-name", "my-cluster", "--region", "eu-north-1")
		after := time.Now().UTC()
		res.expectSuccess(t)
		res.expectNoSecrets(t, baseSecretAccessKey)

		cred := res.execCredential(t)
		expiry, err := time.Parse(time.RFC3339, cred.Status.ExpirationTimestamp)
		if err != nil {
			t.Fatalf("expirationTimestamp %q is not RFC 3339: %v", cred.Status.ExpirationTimestamp, err)
		}
		if expiry.Before(before.Add(14*time.Minute)) || expiry.After(after.Add(14*time.Minute)) {
			t.Errorf("expirationTimestamp = %s, want 14 minutes after signing (%s..%s)", expiry, before, after)
		}
		u := decodeToken(t, cred.Status.Token)
		q := u.Query()
		if u.Scheme != "https" || u.Host != "sts.eu-north-1.amazonaws.com" {
			t.Errorf("token URL %s://%s, want https://sts.eu-north-1.amazonaws.com", u.Scheme, u.Host)
		}
		if !strings.HasPrefix(q.Get("X-Amz-Credential"), baseAccessKeyID+"/") {
			t.Errorf("X-Amz-Credential = %q, want the env access key id", q.Get("X-Amz-Credential"))
		}
		if q.Get("Action") != "GetCallerIdentity" || q.Get("X-Amz-Expires") != "60" ||
			!strings.Contains(q.Get("X-Amz-SignedHeaders"), "x-k8s-aws-id") {
			t.Errorf("token URL query %v is not a presigned GetCallerIdentity with x-k8s-aws-id", q)
		}
	})

	t.Run("role through AWS_ENDPOINT_URL_STS", func(t *testing.T) {
		fake := &fakeSTS{}
		srv := httptest.NewServer(fake)
		defer srv.Close()
		res := h.run(t, map[string]string{
			"AWS_ACCESS_KEY_ID":     baseAccessKeyID,
			"AWS_SECRET_ACCESS_KEY": baseSecretAccessKey,
			"AWS_ENDPOINT_URL_STS":  srv.URL,
		}, "--cluster-name", "my-cluster", "--region", "eu-north-1",
			"--role-arn", "arn:aws:iam::123456789012:role/eks-admin", "--external-id", "ext-7e9d")
		res.expectSuccess(t)
		res.expectNoSecrets(t, baseSecretAccessKey, tempSecretAccessKey)

		form := fake.form()
		if form == nil {
			t.Fatal("the helper never called sts:AssumeRole at AWS_ENDPOINT_URL_STS")
		}
		for k, want := range map[string]string{
			"RoleArn": "arn:aws:iam::123456789012:role/eks-admin", "ExternalId": "ext-7e9d", "RoleSessionName": "kubeopera-eks-token",
		} {
			if got := form.Get(k); got != want {
				t.Errorf("AssumeRole %s = %q, want %q", k, got, want)
			}
		}
		u := decodeToken(t, res.execCredential(t).Status.Token)
		srvURL, _ := url.Parse(srv.URL)
		if u.Host != srvURL.Host {
			t.Errorf("token URL host = %q, want the AWS_ENDPOINT_URL_STS host %q", u.Host, srvURL.Host)
		}
		q := u.Query()
		if !strings.HasPrefix(q.Get("X-Amz-Credential"), tempAccessKeyID+"/") || q.Get("X-Amz-Security-Token") != tempSessionToken {
			t.Errorf("token not signed with the assumed role's credentials: %v", q)
		}
	})

	t.Run("role denied", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>`+
				`<Code>AccessDenied</Code><Message>not authorized to perform: sts:AssumeRole</Message></Error>`+
				`<RequestId>4a2b0c1d</RequestId></ErrorResponse>`)
		}))
		defer srv.Close()
		res := h.run(t, map[string]string{
			"AWS_ACCESS_KEY_ID":     baseAccessKeyID,
			"AWS_SECRET_ACCESS_KEY": baseSecretAccessKey,
			"AWS_ENDPOINT_URL_STS":  srv.URL,
		}, "--cluster-name", "my-cluster", "--region", "eu-north-1", "--role-arn", "arn:aws:iam::123456789012:role/eks-admin")
		res.expectFailure(t, 1, "AccessDenied")
		res.expectNoSecrets(t, baseSecretAccessKey)
	})

	t.Run("no credentials", func(t *testing.T) {
		res := h.run(t, nil, "--cluster-name", "my-cluster", "--region", "eu-north-1")
		res.expectFailure(t, 1, "failed to retrieve AWS credentials")
	})

	usage := map[string]struct {
		args []string
		want string
	}{
		"no cluster name":       {args: []string{"--region", "eu-north-1"}, want: "--cluster-name is required"},
		"no region":             {args: []string{"--cluster-name", "c"}, want: "--region is required"},
		"external id, no role":  {args: []string{"--cluster-name", "c", "--region", "eu-north-1", "--external-id", "x"}, want: "--external-id requires --role-arn"},
		"session name, no role": {args: []string{"--cluster-name", "c", "--region", "eu-north-1", "--session-name", "x"}, want: "--session-name requires --role-arn"},
		"positional argument":   {args: []string{"--cluster-name", "c", "--region", "eu-north-1", "extra"}, want: "unexpected arguments"},
		"unknown flag":          {args: []string{"--cluster-name", "c", "--region", "eu-north-1", "--profile", "p"}, want: "unknown flag"},
		"shorthand flag":        {args: []string{"-i", "c"}, want: "unknown shorthand flag"},
	}
	for name, tc := range usage {
		t.Run("usage/"+name, func(t *testing.T) {
			res := h.run(t, map[string]string{
				"AWS_ACCESS_KEY_ID":     baseAccessKeyID,
				"AWS_SECRET_ACCESS_KEY": baseSecretAccessKey,
			}, tc.args...)
			res.expectFailure(t, 2, tc.want)
			res.expectNoSecrets(t, baseSecretAccessKey)
		})
	}
}

type helper struct {
	bin  string
	home string
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the binary with env and an AWS setup that has no files, no profile and no IMDS.
func (h helper) run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	cmd := exec.Command(h.bin, args...)
	cmd.Env = []string{
		"HOME=" + h.home,
		"AWS_CONFIG_FILE=" + filepath.Join(h.home, "no-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(h.home, "no-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("running %s: %v", h.bin, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

func (r result) expectSuccess(t *testing.T) {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; want success and a silent stderr", r.code, r.stderr)
	}
}

func (r result) expectFailure(t *testing.T, code int, stderrWant string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q on failure, want nothing", r.stdout)
	}
	if !strings.Contains(r.stderr, stderrWant) {
		t.Errorf("stderr %q, want it to contain %q", r.stderr, stderrWant)
	}
}

func (r result) expectNoSecrets(t *testing.T, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
			t.Errorf("a secret access key appears in the output")
		}
	}
}

// wireExecCredential is the JSON client-go reads from an exec plugin, decoded without client-go so
// the test checks the wire shape rather than the types that produced it.
type wireExecCredential struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Spec       json.RawMessage `json:"spec"`
	Status     struct {
		ExpirationTimestamp string `json:"expirationTimestamp"`
		Token               string `json:"token"`
	} `json:"status"`
}

func (r result) execCredential(t *testing.T) wireExecCredential {
	t.Helper()
	if !strings.HasSuffix(r.stdout, "}\n") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("stdout is not one JSON document on one line: %q", r.stdout)
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	var cred wireExecCredential
	if err := dec.Decode(&cred); err != nil {
		t.Fatalf("stdout is not an ExecCredential: %v\n%s", err, r.stdout)
	}
	if cred.APIVersion != "client.authentication.k8s.io/v1beta1" || cred.Kind != "ExecCredential" {
		t.Errorf("apiVersion/kind = %s/%s, want client.authentication.k8s.io/v1beta1/ExecCredential", cred.APIVersion, cred.Kind)
	}
	if !strings.HasPrefix(cred.Status.Token, "k8s-aws-v1.") {
		t.Errorf("status.token %q lacks the k8s-aws-v1. prefix", cred.Status.Token)
	}
	return cred
}

func decodeToken(t *testing.T, token string) *url.URL {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, "k8s-aws-v1."))
	if err != nil {
		t.Fatalf("token is not base64url without padding: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("token does not hold a URL: %v", err)
	}
	return u
}

// fakeSTS answers sts:AssumeRole with the response shape of the STS API Reference's AssumeRole
// "Sample Response" (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html).
type fakeSTS struct {
	mu       sync.Mutex
	lastForm url.Values
}

func (f *fakeSTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("Action") != "AssumeRole" {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.lastForm = r.PostForm
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
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
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</AssumeRoleResponse>`, tempAccessKeyID, tempSecretAccessKey, tempSessionToken, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

func (f *fakeSTS) form() url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastForm
}
