package sim

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// EKSAuthenticator plays the AWS IAM authenticator of an EKS control plane for a kube-apiserver
// standing in for an EKS cluster: a token authentication webhook
// (--authentication-token-webhook-config-file, TokenReview authentication.k8s.io/v1beta1, the
// version the authenticator's server speaks) that verifies "k8s-aws-v1." bearer tokens as
// kubernetes-sigs/aws-iam-authenticator does (pkg/token/token.go, tokenVerifier.Verify, and
// pkg/server/server.go, authenticateEndpoint, at commit 0221afb):
//   - the token is at most 4 KiB, starts with "k8s-aws-v1.", and the rest is a URL in base64url
//     without padding;
//   - the URL's scheme and host are the STS endpoint's (the real verifier allows https and the
//     partition's STS host names only; here the one STS is the test's, Endpoint), its path is
//     "/", its query holds only action, version and the x-amz-* SigV4 parameters, each once
//     (parameterWhitelist), Action is GetCallerIdentity, x-k8s-aws-id is among the signed
//     headers, X-Amz-Expires is 0 to 900 and X-Amz-Date is at most 15 minutes old;
//   - it GETs the URL with header x-k8s-aws-id set to ClusterID (a token minted for another
//     cluster fails STS's signature check) and "accept: application/json", and reads the
//     caller's Arn, Account and UserId from STS's JSON answer; anything but 200 refuses the token;
//   - the Arn is canonicalised (arn:aws:sts::<account>:assumed-role/<role>/<session> becomes
//     arn:aws:iam::<account>:role/<role>) and looked up, lower-cased, in Users, as the
//     authenticator's mapRoles/mapUsers (EKS: access entries); a token of an unmapped identity is
//     refused;
//   - the answer: 200 with status authenticated, the user's name and groups, uid
//     aws-iam-authenticator:<account>:<userid> and extra arn, canonicalArn, sessionName,
//     accessKeyId; a refusal is 403 with {"status":{"authenticated":false}} (tokenReviewDenyJSON).
//
// Every review is recorded (Reviews). Nothing else of EKS is played.
type EKSAuthenticator struct {
	// ClusterID is the EKS cluster name tokens must be minted for.
	ClusterID string
	// Endpoint is the STS endpoint (the test's sim.AWS URL).
	Endpoint string
	// Users maps canonical IAM ARNs to the Kubernetes user they authenticate as.
	Users map[string]EKSUser

	server     *httptest.Server
	client     *http.Client
	mu         sync.Mutex
	reviews    []EKSReview
	kubeconfig string
}

// EKSUser is who a mapped IAM identity is in the cluster.
type EKSUser struct {
	Username string
	Groups   []string
}

// EKSReview is one TokenReview the authenticator answered.
type EKSReview struct {
	// Authenticated is the answer; Error says why a token was refused.
	Authenticated bool
	Error         string
	// ARN and CanonicalARN are the caller STS named; AccessKeyID signed the token.
	ARN, CanonicalARN, AccessKeyID string
	// Username is who the token authenticated as.
	Username string
}

// The verifier's limits (aws-iam-authenticator pkg/token/token.go).
const (
	eksTokenPrefix      = "k8s-aws-v1."
	eksMaxTokenBytes    = 4 << 10
	eksClusterIDHeader  = "x-k8s-aws-id"
	eksPresignedExpires = 15 * time.Minute
)

// eksQueryAllowed is the verifier's parameterWhitelist.
var eksQueryAllowed = map[string]bool{
	"action": true, "version": true, "x-amz-algorithm": true, "x-amz-credential": true, "x-amz-date": true,
	"x-amz-expires": true, "x-amz-security-token": true, "x-amz-signature": true, "x-amz-signedheaders": true,
}

// Start serves the webhook over TLS on loopback until t ends and writes the kubeconfig the API
// server reads it from into a temporary directory.
func (a *EKSAuthenticator) Start(t testing.TB) {
	t.Helper()
	a.client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a.server = httptest.NewTLSServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.server.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.server.Certificate().Raw})
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["authenticator"] = &clientcmdapi.Cluster{Server: a.server.URL + "/authenticate", CertificateAuthorityData: ca}
	cfg.AuthInfos["apiserver"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "authenticator", AuthInfo: "apiserver"}
	cfg.CurrentContext = "webhook"
	a.kubeconfig = filepath.Join(t.TempDir(), "eks-authenticator.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, a.kubeconfig); err != nil {
		t.Fatal(err)
	}
}

// APIServerArgs are the kube-apiserver flags that make it ask the authenticator
// (framework.ClusterOptions.APIServerArgs). Reviews are not cached, so every token is checked.
func (a *EKSAuthenticator) APIServerArgs() map[string]string {
	return map[string]string{
		"authentication-token-webhook-config-file": a.kubeconfig,
		"authentication-token-webhook-version":     "v1beta1",
		"authentication-token-webhook-cache-ttl":   "0s",
	}
}

// Reviews returns the reviews answered so far.
func (a *EKSAuthenticator) Reviews() []EKSReview {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]EKSReview(nil), a.reviews...)
}

func (a *EKSAuthenticator) serve(w http.ResponseWriter, r *http.Request) {
	var review authenticationv1beta1.TokenReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&review); err != nil {
		http.Error(w, "not a TokenReview", http.StatusBadRequest)
		return
	}
	rec, user, uid, extra := a.verify(review.Spec.Token)
	a.mu.Lock()
	a.reviews = append(a.reviews, rec)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !rec.Authenticated {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"metadata":{"creationTimestamp":null},"spec":{},"status":{"authenticated":false}}`))
		return
	}
	_ = json.NewEncoder(w).Encode(authenticationv1beta1.TokenReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1beta1", Kind: "TokenReview"},
		Status: authenticationv1beta1.TokenReviewStatus{
			Authenticated: true,
			User:          authenticationv1beta1.UserInfo{Username: user.Username, UID: uid, Groups: user.Groups, Extra: extra},
		},
	})
}

// verify checks token as the authenticator does and maps its identity.
func (a *EKSAuthenticator) verify(token string) (EKSReview, EKSUser, string, map[string]authenticationv1beta1.ExtraValue) {
	refuse := func(rec EKSReview, err error) (EKSReview, EKSUser, string, map[string]authenticationv1beta1.ExtraValue) {
		rec.Error = err.Error()
		return rec, EKSUser{}, "", nil
	}
	var rec EKSReview
	u, err := a.presignedURL(token)
	if err != nil {
		return refuse(rec, err)
	}
	q := u.Query()
	rec.AccessKeyID, _, _ = strings.Cut(q.Get("X-Amz-Credential"), "/")
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return refuse(rec, err)
	}
	req.Header.Set(eksClusterIDHeader, a.ClusterID)
	req.Header.Set("accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return refuse(rec, fmt.Errorf("sts getCallerIdentity failed: %w", err))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return refuse(rec, err)
	}
	if resp.StatusCode != http.StatusOK {
		return refuse(rec, fmt.Errorf("sts getCallerIdentity failed: error from AWS (expected 200, got %d). Body: %s", resp.StatusCode, body))
	}
	var id struct {
		GetCallerIdentityResponse struct {
			GetCallerIdentityResult struct{ Account, Arn, UserId string } //nolint:revive // STS's names
		}
	}
	if err := json.Unmarshal(body, &id); err != nil {
		return refuse(rec, fmt.Errorf("sts getCallerIdentity failed: %w", err))
	}
	res := id.GetCallerIdentityResponse.GetCallerIdentityResult
	rec.ARN = res.Arn
	if rec.CanonicalARN, err = canonicalARN(res.Arn); err != nil {
		return refuse(rec, err)
	}
	userID, session, _ := strings.Cut(res.UserId, ":")
	var user EKSUser
	var mapped bool
	for k, v := range a.Users {
		if strings.EqualFold(k, rec.CanonicalARN) {
			user, mapped = v, true
		}
	}
	if !mapped {
		return refuse(rec, fmt.Errorf("ARN is not mapped: %s", rec.CanonicalARN))
	}
	rec.Authenticated, rec.Username = true, user.Username
	extra := map[string]authenticationv1beta1.ExtraValue{
		"arn": {res.Arn}, "canonicalArn": {rec.CanonicalARN}, "sessionName": {session}, "accessKeyId": {rec.AccessKeyID},
	}
	return rec, user, "aws-iam-authenticator:" + res.Account + ":" + userID, extra
}

// presignedURL decodes and checks a token's presigned URL, without calling STS.
func (a *EKSAuthenticator) presignedURL(token string) (*url.URL, error) {
	if len(token) > eksMaxTokenBytes {
		return nil, errors.New("input token was not properly formatted: token is too large")
	}
	encoded, ok := strings.CutPrefix(token, eksTokenPrefix)
	if !ok {
		return nil, fmt.Errorf("input token was not properly formatted: token is missing expected %q prefix", eksTokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("input token was not properly formatted: %w", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("input token was not properly formatted: %w", err)
	}
	sts, err := url.Parse(a.Endpoint)
	if err != nil {
		return nil, err
	}
	switch {
	case u.Scheme != sts.Scheme:
		return nil, fmt.Errorf("input token was not properly formatted: unexpected scheme %q in pre-signed URL", u.Scheme)
	case u.Host != sts.Host:
		return nil, fmt.Errorf("input token was not properly formatted: unexpected hostname %q in pre-signed URL", u.Host)
	case u.Path != "/":
		return nil, errors.New("input token was not properly formatted: unexpected path in pre-signed URL")
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errors.New("input token was not properly formatted: malformed query parameter")
	}
	lower := url.Values{}
	for k, vs := range query {
		if !eksQueryAllowed[strings.ToLower(k)] {
			return nil, fmt.Errorf("input token was not properly formatted: non-whitelisted query parameter %q", k)
		}
		if len(vs) != 1 {
			return nil, errors.New("input token was not properly formatted: query parameter with multiple values not supported")
		}
		lower.Set(strings.ToLower(k), vs[0])
	}
	if lower.Get("action") != "GetCallerIdentity" {
		return nil, errors.New("input token was not properly formatted: unexpected action parameter in pre-signed URL")
	}
	signed := false
	for h := range strings.SplitSeq(lower.Get("x-amz-signedheaders"), ";") {
		signed = signed || strings.EqualFold(h, eksClusterIDHeader)
	}
	if !signed {
		return nil, fmt.Errorf("input token was not properly formatted: client did not sign the %s header in the pre-signed URL", eksClusterIDHeader)
	}
	if expires, err := strconv.Atoi(lower.Get("x-amz-expires")); err != nil || expires < 0 || expires > 900 {
		return nil, errors.New("input token was not properly formatted: invalid X-Amz-Expires parameter in pre-signed URL")
	}
	date, err := time.Parse("20060102T150405Z", lower.Get("x-amz-date"))
	if err != nil {
		return nil, errors.New("input token was not properly formatted: error parsing X-Amz-Date parameter")
	}
	if time.Now().After(date.Add(eksPresignedExpires)) {
		return nil, errors.New("input token was not properly formatted: X-Amz-Date parameter is expired (15 minute expiration)")
	}
	return u, nil
}

// canonicalARN is aws-iam-authenticator's arn.Canonicalize for the ARNs STS answers here: an IAM
// user's ARN stays, an assumed role's session becomes its role's IAM ARN.
func canonicalARN(arn string) (string, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return "", fmt.Errorf("arn %q is invalid", arn)
	}
	switch parts[2] {
	case "iam":
		return arn, nil
	case "sts":
		resource := strings.Split(parts[5], "/")
		if len(resource) < 2 || resource[0] != "assumed-role" {
			return "", fmt.Errorf("arn %q has an unrecognized STS resource", arn)
		}
		return fmt.Sprintf("arn:%s:iam::%s:role/%s", parts[1], parts[4], resource[1]), nil
	}
	return "", fmt.Errorf("service %q in arn %q is not a valid service for identities", parts[2], arn)
}
