package ekstoken

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

const (
	testAccessKeyID     = "AKIDEXAMPLEBASE00001"
	testSecretAccessKey = "base/secret/key/that/must/never/leak0001"
)

var testNow = time.Date(2026, 9, 10, 0, 35, 12, 345_000_000, time.UTC)

func fixedNow() time.Time { return testNow }

func staticConfig(region string) aws.Config {
	return aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKeyID, testSecretAccessKey, ""),
	}
}

// decodeToken undoes the token encoding: prefix, then base64url without padding, then a URL.
func decodeToken(t *testing.T, token string) *url.URL {
	t.Helper()
	encoded, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok {
		t.Fatalf("token %q lacks the %q prefix", token, TokenPrefix)
	}
	if strings.ContainsAny(encoded, "=+/") {
		t.Fatalf("token is not base64url without padding: %q", encoded)
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatalf("token does not decode as base64url: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("token does not hold a URL: %v", err)
	}
	return u
}

// checkPresignedURL asserts the shape every EKS token's URL must have and which the
// aws-iam-authenticator verifier checks: GetCallerIdentity, path "/", only the parameters in its
// allow list, the cluster header signed, X-Amz-Expires=60, the credential scope of region/sts.
func checkPresignedURL(t *testing.T, u *url.URL, wantHost, region, accessKeyID string) {
	t.Helper()
	q := u.Query()
	if u.Host != wantHost {
		t.Errorf("host = %q, want %q", u.Host, wantHost)
	}
	if u.Path != "/" {
		t.Errorf("path = %q, want /", u.Path)
	}
	want := map[string]string{
		"Action":          "GetCallerIdentity",
		"Version":         "2011-06-15",
		"X-Amz-Expires":   "60",
		"X-Amz-Algorithm": "AWS4-HMAC-SHA256",
	}
	for k, v := range want {
		if got := q.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	for _, h := range []string{"host", ClusterIDHeader} {
		if !contains(signed, h) {
			t.Errorf("X-Amz-SignedHeaders = %q, lacks %q", q.Get("X-Amz-SignedHeaders"), h)
		}
	}
	cred := q.Get("X-Amz-Credential")
	if !strings.HasPrefix(cred, accessKeyID+"/") || !strings.HasSuffix(cred, "/"+region+"/sts/aws4_request") {
		t.Errorf("X-Amz-Credential = %q, want %s/<date>/%s/sts/aws4_request", cred, accessKeyID, region)
	}
	if q.Get("X-Amz-Signature") == "" {
		t.Error("X-Amz-Signature is empty")
	}
	// aws-iam-authenticator's parameterWhitelist: any other query parameter fails verification.
	allowed := []string{"action", "version", "x-amz-algorithm", "x-amz-credential", "x-amz-date",
		"x-amz-expires", "x-amz-security-token", "x-amz-signature", "x-amz-signedheaders"}
	for k, v := range q {
		if !contains(allowed, strings.ToLower(k)) {
			t.Errorf("query parameter %q is not one the EKS authenticator accepts", k)
		}
		if len(v) != 1 {
			t.Errorf("query parameter %q has %d values, want 1", k, len(v))
		}
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// verifySignature fails t unless signatureError finds the URL's signature valid.
func verifySignature(t *testing.T, u *url.URL, clusterName, secretAccessKey string) {
	t.Helper()
	if err := signatureError(u, clusterName, secretAccessKey); err != nil {
		t.Error(err)
	}
}

// signatureError recomputes the SigV4 query-string signature from the URL alone, with the cluster
// name as the x-k8s-aws-id header value, independently of the SDK's signer (AWS General
// Reference, "Create a signed AWS API request": canonical request, string to sign, signing key).
func signatureError(u *url.URL, clusterName, secretAccessKey string) error {
	q := u.Query()
	var pairs []string
	for k, vs := range q {
		if k == "X-Amz-Signature" {
			continue
		}
		for _, v := range vs {
			pairs = append(pairs, uriEncode(k)+"="+uriEncode(v))
		}
	}
	sort.Strings(pairs)
	headers := map[string]string{"host": u.Host, ClusterIDHeader: clusterName}
	signedHeaders := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	var canonicalHeaders strings.Builder
	for _, h := range signedHeaders {
		v, ok := headers[h]
		if !ok {
			return fmt.Errorf("signed header %q has no known value", h)
		}
		canonicalHeaders.WriteString(h + ":" + v + "\n")
	}
	emptyPayload := sha256.Sum256(nil)
	canonicalRequest := strings.Join([]string{
		"GET", "/", strings.Join(pairs, "&"), canonicalHeaders.String(),
		strings.Join(signedHeaders, ";"), hex.EncodeToString(emptyPayload[:]),
	}, "\n")
	_, scope, ok := strings.Cut(q.Get("X-Amz-Credential"), "/")
	if !ok {
		return fmt.Errorf("X-Amz-Credential %q has no scope", q.Get("X-Amz-Credential"))
	}
	crHash := sha256.Sum256([]byte(canonicalRequest))
	stringToSign := strings.Join([]string{"AWS4-HMAC-SHA256", q.Get("X-Amz-Date"), scope, hex.EncodeToString(crHash[:])}, "\n")
	key := []byte("AWS4" + secretAccessKey)
	for _, part := range strings.Split(scope, "/") {
		key = hmacSHA256(key, part)
	}
	if got, want := q.Get("X-Amz-Signature"), hex.EncodeToString(hmacSHA256(key, stringToSign)); got != want {
		return fmt.Errorf("X-Amz-Signature = %s, recomputed %s for %s=%q", got, want, ClusterIDHeader, clusterName)
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// uriEncode is SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~ percent-encoded.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

func TestTokenFormat(t *testing.T) {
	cases := map[string]struct {
		region  string
		cluster string
		host    string
	}{
		"regional endpoint": {region: "eu-north-1", cluster: "my-cluster", host: "sts.eu-north-1.amazonaws.com"},
		"us-east-1 is regional too": {
			region: "us-east-1", cluster: "prod", host: "sts.us-east-1.amazonaws.com",
		},
		"china partition": {region: "cn-north-1", cluster: "c1", host: "sts.cn-north-1.amazonaws.com.cn"},
		"mixed-case cluster name": {
			region: "eu-west-1", cluster: "Cluster_With-Mixed.Case", host: "sts.eu-west-1.amazonaws.com",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			token, expiry, err := Token(context.Background(), staticConfig(tc.region), tc.cluster, fixedNow)
			if err != nil {
				t.Fatalf("Token: %v", err)
			}
			u := decodeToken(t, token)
			if u.Scheme != "https" {
				t.Errorf("scheme = %q, want https", u.Scheme)
			}
			checkPresignedURL(t, u, tc.host, tc.region, testAccessKeyID)
			verifySignature(t, u, tc.cluster, testSecretAccessKey)

			q := u.Query()
			if got, want := q.Get("X-Amz-Date"), "20260910T003512Z"; got != want {
				t.Errorf("X-Amz-Date = %q, want %q (signed at now())", got, want)
			}
			if got := q.Get("X-Amz-Credential"); !strings.Contains(got, "/20260910/") {
				t.Errorf("X-Amz-Credential = %q, want the signing date 20260910", got)
			}
			if q.Has("X-Amz-Security-Token") {
				t.Error("X-Amz-Security-Token present for long-term credentials")
			}
			if strings.Contains(token, testSecretAccessKey) || strings.Contains(u.String(), testSecretAccessKey) {
				t.Error("the secret access key appears in the token")
			}
			wantExpiry := time.Date(2026, 9, 10, 0, 49, 12, 0, time.UTC)
			if !expiry.Equal(wantExpiry) {
				t.Errorf("expiry = %s, want %s (X-Amz-Date + 14m)", expiry, wantExpiry)
			}
		})
	}
}

func TestTokenSignatureBindsCluster(t *testing.T) {
	token, _, err := Token(context.Background(), staticConfig("eu-north-1"), "cluster-a", fixedNow)
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	u := decodeToken(t, token)
	verifySignature(t, u, "cluster-a", testSecretAccessKey)

	// The same URL replayed for another cluster must not verify.
	if signatureError(u, "cluster-b", testSecretAccessKey) == nil {
		t.Error("signature verifies for a different cluster name; x-k8s-aws-id is not signed")
	}
}

func TestTokenDefaultsToTimeNow(t *testing.T) {
	before := time.Now().Truncate(time.Second)
	_, expiry, err := Token(context.Background(), staticConfig("eu-north-1"), "c", nil)
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	after := time.Now()
	if expiry.Before(before.Add(ExpirationAfterSigning)) || expiry.After(after.Add(ExpirationAfterSigning)) {
		t.Errorf("expiry %s not 14m after signing in [%s, %s]", expiry, before, after)
	}
}

func TestTokenEndpointOverride(t *testing.T) {
	cases := map[string]struct {
		env  map[string]string
		host string
	}{
		"AWS_ENDPOINT_URL_STS": {
			env:  map[string]string{"AWS_ENDPOINT_URL_STS": "https://sts.internal.example:8443"},
			host: "sts.internal.example:8443",
		},
		"AWS_ENDPOINT_URL": {
			env:  map[string]string{"AWS_ENDPOINT_URL": "https://aws.internal.example"},
			host: "aws.internal.example",
		},
		"AWS_ENDPOINT_URL_STS wins over AWS_ENDPOINT_URL": {
			env: map[string]string{
				"AWS_ENDPOINT_URL":     "https://aws.internal.example",
				"AWS_ENDPOINT_URL_STS": "https://sts.internal.example",
			},
			host: "sts.internal.example",
		},
		"no override": {host: "sts.eu-north-1.amazonaws.com"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			isolateAWSEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("eu-north-1"),
				config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(testAccessKeyID, testSecretAccessKey, "")))
			if err != nil {
				t.Fatalf("LoadDefaultConfig: %v", err)
			}
			token, _, err := Token(context.Background(), cfg, "my-cluster", fixedNow)
			if err != nil {
				t.Fatalf("Token: %v", err)
			}
			u := decodeToken(t, token)
			checkPresignedURL(t, u, tc.host, "eu-north-1", testAccessKeyID)
			verifySignature(t, u, "my-cluster", testSecretAccessKey)
		})
	}
}

// isolateAWSEnv keeps the developer's AWS environment and files out of a test that loads the
// default config.
func isolateAWSEnv(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"} {
		t.Setenv(k, "") // restores the variable after the test
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestTokenErrors(t *testing.T) {
	cases := map[string]struct {
		cfg     aws.Config
		cluster string
		want    string
	}{
		"no cluster name":       {cfg: staticConfig("eu-north-1"), want: "cluster name is required"},
		"no region":             {cfg: staticConfig(""), cluster: "c", want: "AWS region is required"},
		"no credentials":        {cfg: aws.Config{Region: "eu-north-1"}, cluster: "c", want: "no AWS credentials provider"},
		"anonymous":             {cfg: aws.Config{Region: "eu-north-1", Credentials: aws.AnonymousCredentials{}}, cluster: "c", want: "failed to retrieve AWS credentials"},
		"empty static key pair": {cfg: aws.Config{Region: "eu-north-1", Credentials: credentials.StaticCredentialsProvider{}}, cluster: "c", want: "failed to retrieve AWS credentials"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			token, expiry, err := Token(context.Background(), tc.cfg, tc.cluster, fixedNow)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if token != "" || !expiry.IsZero() {
				t.Errorf("token %q, expiry %s returned with an error", token, expiry)
			}
		})
	}
}
