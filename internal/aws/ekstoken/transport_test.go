package ekstoken

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServer answers /version and records the Authorization header of every request; it answers
// 401 to the tokens in reject.
type apiServer struct {
	mu     sync.Mutex
	seen   []string
	reject map[string]bool
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	a.mu.Lock()
	a.seen = append(a.seen, auth)
	rejected := a.reject[strings.TrimPrefix(auth, "Bearer ")]
	a.mu.Unlock()
	if rejected {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"major":"1","minor":"31","gitVersion":"v1.31.0"}`))
}

func (a *apiServer) tokens() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// restConfig is a rest.Config for srv whose requests carry tokens of wrap.
func restConfig(srv *httptest.Server, wrap func(http.RoundTripper) http.RoundTripper) *rest.Config {
	return &rest.Config{Host: srv.URL, WrapTransport: wrap}
}

func TestWrapTransportPutsAVerifiableTokenOnEveryRequest(t *testing.T) {
	isolateAWSEnv(t)
	api := &apiServer{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	wrap, err := WrapTransport(StaticConfig("eu-north-1", "", aws.Credentials{AccessKeyID: testAccessKeyID, SecretAccessKey: testSecretAccessKey}), "my-cluster")
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(restConfig(srv, wrap))
	for range 3 {
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatalf("ServerVersion: %v", err)
		}
	}
	seen := api.tokens()
	if len(seen) != 3 {
		t.Fatalf("%d requests, want 3", len(seen))
	}
	for _, auth := range seen {
		if auth != seen[0] {
			t.Errorf("a token was minted again before it expired: %q then %q", seen[0], auth)
		}
	}
	token, ok := strings.CutPrefix(seen[0], "Bearer ")
	if !ok {
		t.Fatalf("Authorization %q is not a bearer token", seen[0])
	}
	// The token is what the helper prints: a presigned GetCallerIdentity at STS's regional
	// endpoint (no endpoint given: real AWS), signed with the static key for this cluster.
	u := decodeToken(t, token)
	checkPresignedURL(t, u, "sts.eu-north-1.amazonaws.com", "eu-north-1", testAccessKeyID)
	verifySignature(t, u, "my-cluster", testSecretAccessKey)
}

// TestWrapTransportMintsAgain: an expired token is never sent again, and a 401 makes the next
// request carry a new token.
func TestWrapTransportMintsAgain(t *testing.T) {
	isolateAWSEnv(t)
	creds := aws.Credentials{AccessKeyID: testAccessKeyID, SecretAccessKey: testSecretAccessKey}

	t.Run("after expiry", func(t *testing.T) {
		api := &apiServer{}
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		// Tokens signed one expiry ago, a second apart: each is expired when the next request
		// goes out.
		signed := time.Now().Add(-ExpirationAfterSigning - time.Minute)
		var mu sync.Mutex
		clock := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			signed = signed.Add(time.Second)
			return signed
		}
		wrap, err := wrapTransport(StaticConfig("eu-north-1", "", creds), "my-cluster", clock)
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(restConfig(srv, wrap))
		for range 3 {
			if _, err := cs.Discovery().ServerVersion(); err != nil {
				t.Fatal(err)
			}
		}
		seen := api.tokens()
		if len(seen) != 3 || seen[0] == seen[1] || seen[1] == seen[2] {
			t.Errorf("an expired token was sent again: %d requests, distinct %t %t", len(seen), seen[0] != seen[1], seen[1] != seen[2])
		}
	})

	t.Run("after 401", func(t *testing.T) {
		api := &apiServer{reject: map[string]bool{}}
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		signed := time.Now()
		var mu sync.Mutex
		clock := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			signed = signed.Add(time.Second)
			return signed
		}
		wrap, err := wrapTransport(StaticConfig("eu-north-1", "", creds), "my-cluster", clock)
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(restConfig(srv, wrap))
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		first := strings.TrimPrefix(api.tokens()[0], "Bearer ")
		api.mu.Lock()
		api.reject[first] = true
		api.mu.Unlock()
		if _, err := cs.Discovery().ServerVersion(); err == nil {
			t.Fatal("the rejected token was not rejected")
		}
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatalf("after a 401 the next request still failed: %v", err)
		}
		seen := api.tokens()
		if len(seen) != 3 || seen[1] != seen[0] || seen[2] == seen[0] {
			t.Errorf("tokens %d: the one rejected was not replaced after the 401", len(seen))
		}
	})
}

// TestWrapTransportAssumesTheRole: with AssumeRole the token is signed by the role's session,
// assumed once for several tokens (the session outlives them), with the external id.
func TestWrapTransportAssumesTheRole(t *testing.T) {
	isolateAWSEnv(t)
	sts := &fakeSTS{}
	stsSrv := httptest.NewServer(sts)
	t.Cleanup(stsSrv.Close)
	api := &apiServer{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	base := StaticConfig("eu-north-1", stsSrv.URL, aws.Credentials{AccessKeyID: testAccessKeyID, SecretAccessKey: testSecretAccessKey})
	cfg, err := AssumeRole(base, Role{ARN: "arn:aws:iam::123456789012:role/eks-admin", ExternalID: "kubeopera-0a1b"})
	if err != nil {
		t.Fatal(err)
	}
	signed := time.Now().Add(-ExpirationAfterSigning - time.Minute)
	var mu sync.Mutex
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		signed = signed.Add(time.Second)
		return signed
	}
	wrap, err := wrapTransport(cfg, "my-cluster", clock)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(restConfig(srv, wrap))
	for range 2 {
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
	}
	reqs := sts.recorded()
	if len(reqs) != 1 || reqs[0].form.Get("ExternalId") != "kubeopera-0a1b" || reqs[0].form.Get("DurationSeconds") != "3600" {
		t.Fatalf("STS got %d requests (%v), want one AssumeRole of an hour with the external id", len(reqs), reqs)
	}
	seen := api.tokens()
	if len(seen) != 2 || seen[0] == seen[1] {
		t.Fatalf("want two distinct tokens, got %d", len(seen))
	}
	for _, auth := range seen {
		u := decodeToken(t, strings.TrimPrefix(auth, "Bearer "))
		stsURL, _ := url.Parse(stsSrv.URL)
		checkPresignedURL(t, u, stsURL.Host, "eu-north-1", tempAccessKeyID)
		verifySignature(t, u, "my-cluster", tempSecretAccessKey)
	}
}

func TestWrapTransportErrors(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: testAccessKeyID, SecretAccessKey: testSecretAccessKey}
	for name, tc := range map[string]struct {
		cfg     aws.Config
		cluster string
	}{
		"no cluster":     {cfg: StaticConfig("eu-north-1", "", creds)},
		"no region":      {cfg: StaticConfig("", "", creds), cluster: "c"},
		"no credentials": {cfg: aws.Config{Region: "eu-north-1"}, cluster: "c"},
	} {
		if _, err := WrapTransport(tc.cfg, tc.cluster); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
