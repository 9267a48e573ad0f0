package overview_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeopera/kubeopera/internal/devenv"
	"github.com/kubeopera/kubeopera/internal/manifests"
	"github.com/kubeopera/kubeopera/internal/overview"
	"github.com/kubeopera/kubeopera/test/framework"
)

// TestSecureOnBackend serves the secure overview against a real kube-apiserver: TokenReview and
// SubjectAccessReview decide, with ClusterRole kubeopera-fleet-viewer as shipped in config/rbac.
func TestSecureOnBackend(t *testing.T) {
	b := framework.StartBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c, err := client.New(b.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "rbac", "fleet-viewer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("failed to apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	for _, name := range []string{"fleet-viewer", "fleet-stranger"} {
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeopera-fleet-viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "fleet-viewer"}},
	}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, b, "system:serviceaccount:default:fleet-viewer")
	viewer := token(ctx, t, b, "fleet-viewer")
	stranger := token(ctx, t, b, "fleet-stranger")

	srv, err := overview.New(overview.Options{
		BindAddress: "127.0.0.1:0",
		Secure:      true,
		RestConfig:  b.Config,
		Source:      overview.SourceFunc(func(context.Context) ([]overview.Cluster, error) { return clusters(), nil }),
		Log:         testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(srvCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Start = %v", err)
		}
	})
	base := "https://" + overview.WaitAddr(t, srv)

	hc := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the overview's self-signed certificate
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	const html = "text/html,application/xhtml+xml,*/*;q=0.8"

	tests := []struct {
		name                   string
		method, path           string
		bearer, cookie, accept string
		form                   url.Values
		wantStatus             int
		wantBody, wantLocation string
	}{
		{name: "viewer, page", path: "/", bearer: viewer, accept: html, wantStatus: 200, wantBody: `<table id="clusters">`},
		{name: "viewer, JSON", path: "/v1/fleet", bearer: viewer, wantStatus: 200, wantBody: `"name": "prod-eu"`},
		{name: "viewer, fragment", path: "/fragments/fleet?sort=cpu", bearer: viewer, wantStatus: 200, wantBody: `<div id="fleet"`},
		{name: "viewer, cluster page", path: "/clusters/root:orgs:acme/infra/prod-eu", bearer: viewer, wantStatus: 200, wantBody: "PodsFailed"},
		{name: "viewer, cluster JSON", path: "/v1/fleet/clusters/root:orgs:acme/infra/prod-eu", bearer: viewer, wantStatus: 200, wantBody: `"clusterID": "prod-eu-1"`},
		{name: "viewer, cookie", path: "/", cookie: viewer, accept: html, wantStatus: 200, wantBody: `data-card="healthy"`},
		// Every path of the overview needs kubeopera-fleet-viewer, none is open to every
		// authenticated identity as Kubernetes' discovery paths (/api/*, /apis/*) are.
		{name: "stranger, JSON", path: "/v1/fleet", bearer: stranger, wantStatus: 403},
		{name: "stranger, cluster JSON", path: "/v1/fleet/clusters/root:orgs:acme/infra/prod-eu", bearer: stranger, wantStatus: 403},
		{name: "stranger, cluster page", path: "/clusters/root:orgs:acme/infra/prod-eu", bearer: stranger, wantStatus: 403},
		{name: "stranger, fragment", path: "/fragments/fleet", bearer: stranger, wantStatus: 403},
		{name: "stranger, page", path: "/", bearer: stranger, accept: html, wantStatus: 403},
		{name: "stranger, cookie: login page", path: "/", cookie: stranger, accept: html, wantStatus: 403, wantBody: "This identity may not view the fleet overview"},
		// The TokenReview fails on a token the backend did not issue: the filter answers 500.
		{name: "bad token, cookie: login page", path: "/", cookie: "not-a-valid-token", accept: html, wantStatus: 500, wantBody: "The token could not be verified"},
		{name: "bad token, JSON", path: "/v1/fleet", bearer: "not-a-valid-token", wantStatus: 500, wantBody: "Authentication failed"},
		{name: "no token, JSON", path: "/v1/fleet", wantStatus: 401},
		{name: "no token, page", path: "/", accept: html, wantStatus: 303, wantLocation: "/login?next=%2F"},
		{name: "login page", path: "/login", accept: html, wantStatus: 200, wantBody: `<textarea id="token" name="token"`},
		{name: "assets", path: "/assets/app.js", wantStatus: 200, wantBody: "use strict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, header, body := call(ctx, t, hc, "GET", base+tt.path, tt.bearer, tt.cookie, tt.accept, nil)
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d:\n%s", status, tt.wantStatus, body)
			}
			if !strings.Contains(body, tt.wantBody) {
				t.Errorf("body lacks %q:\n%s", tt.wantBody, body)
			}
			if got := header.Get("Location"); got != tt.wantLocation {
				t.Errorf("Location %q, want %q", got, tt.wantLocation)
			}
			for _, tok := range []string{viewer, stranger} {
				if strings.Contains(body, tok) {
					t.Error("the response echoes a token")
				}
			}
		})
	}

	t.Run("login with a form, then the cookie", func(t *testing.T) {
		status, header, _ := call(ctx, t, hc, "POST", base+"/login", "", "", html, url.Values{"token": {viewer}})
		if status != http.StatusSeeOther || header.Get("Location") != "/" {
			t.Fatalf("POST /login = %d to %q", status, header.Get("Location"))
		}
		resp := &http.Response{Header: header}
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "kubeopera-fleet-token" {
				cookie = c
			}
		}
		if cookie == nil || !cookie.HttpOnly || !cookie.Secure || cookie.SameSite != http.SameSiteStrictMode {
			t.Fatalf("login cookie %+v", cookie)
		}
		status, _, body := call(ctx, t, hc, "GET", base+"/", "", cookie.Value, html, nil)
		if status != http.StatusOK || !strings.Contains(body, `<table id="clusters">`) {
			t.Errorf("GET / with the login's cookie = %d", status)
		}
	})
}

func token(ctx context.Context, t *testing.T, b *devenv.Backend, name string) string {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(ctx, b.Config, "default", name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.BearerToken
}

// waitAllowed waits until the backend's RBAC lets user get /v1/fleet, so the filter's
// decision cache never holds a denial from before the binding was seen.
func waitAllowed(ctx context.Context, t *testing.T, b *devenv.Backend, user string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(b.Config)
	if err != nil {
		t.Fatal(err)
	}
	for {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  user,
			Groups:                []string{"system:serviceaccounts", "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/v1/fleet", Verb: "get"},
		}}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s is not allowed to get /v1/fleet: %v", user, errors.Join(err, ctx.Err()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func call(ctx context.Context, t *testing.T, hc *http.Client, method, target, bearer, cookie, accept string, form url.Values) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "kubeopera-fleet-token", Value: cookie})
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func clusters() []overview.Cluster {
	pct := int32(41)
	return []overview.Cluster{{
		Workspace: "root:orgs:acme", Namespace: "infra", Name: "prod-eu", ClusterID: "prod-eu-1",
		Phase: "Ready", Ready: true, NodesReady: 3, NodesTotal: 3, CPUPercent: &pct,
		Health: &overview.Health{Score: 92, Band: "green", Penalties: []overview.Penalty{{Reason: "PodsFailed", Detail: "4 pods failed", Points: "8"}}},
	}}
}
