package overview

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// Tokens of the fake filter: viewer may, stranger is authenticated but not authorized, anything
// else is not authenticated.
const (
	viewerToken    = "eyJhbGciOiJSUzI1NiJ9.viewer.sig"
	strangerToken  = "eyJhbGciOiJSUzI1NiJ9.stranger.sig"
	malformedToken = "eyJhbGciOiJSUzI1NiJ9.malformed.sig"
)

// fakeFilter answers as controller-runtime's filter does: 401 or 403 in plain text, and records
// the Authorization header it saw.
func fakeFilter(seen *[]string) func(logr.Logger, http.Handler) (http.Handler, error) {
	return func(_ logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			*seen = append(*seen, auth)
			switch auth {
			case "Bearer " + viewerToken:
				next.ServeHTTP(w, r)
			case "Bearer " + strangerToken:
				http.Error(w, "Authorization denied for user system:serviceaccount:default:stranger", http.StatusForbidden)
			case "Bearer " + malformedToken:
				// What controller-runtime's filter answers when the TokenReview fails, as it
				// does for an expired or malformed token.
				http.Error(w, "Authentication failed", http.StatusInternalServerError)
			default:
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
			}
		}), nil
	}
}

func newSecureTestServer(t *testing.T) (*Server, *[]string) {
	t.Helper()
	seen := &[]string{}
	s, err := New(Options{
		BindAddress: "0.0.0.0:0",
		Secure:      true,
		Filter:      fakeFilter(seen),
		Source:      SourceFunc(func(context.Context) ([]Cluster, error) { return fleet(), nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, seen
}

type request struct {
	method, target string
	header         map[string]string
	cookie         string
	form           url.Values
}

func do(t *testing.T, h http.Handler, r request) *httptest.ResponseRecorder {
	t.Helper()
	var req *http.Request
	if r.form != nil {
		req = httptest.NewRequest(r.method, r.target, strings.NewReader(r.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(r.method, r.target, nil)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if r.cookie != "" {
		req.AddCookie(&http.Cookie{Name: tokenCookie, Value: r.cookie})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

func TestSecureRequests(t *testing.T) {
	s, seen := newSecureTestServer(t)
	h := s.Handler()
	html := map[string]string{"Accept": browserAccept}

	tests := map[string]struct {
		req          request
		wantStatus   int
		wantLocation string
		wantBody     string
	}{
		"browser without credential goes to login": {
			req:        request{method: "GET", target: "/clusters/root:orgs:acme/infra/edge-9?x=1", header: html},
			wantStatus: http.StatusSeeOther, wantLocation: "/login?next=%2Fclusters%2Froot%3Aorgs%3Aacme%2Finfra%2Fedge-9%3Fx%3D1",
		},
		"API client without credential gets the filter's 401": {
			req:        request{method: "GET", target: "/v1/fleet"},
			wantStatus: http.StatusUnauthorized, wantBody: "Unauthorized",
		},
		"bearer header": {
			req:        request{method: "GET", target: "/v1/fleet", header: map[string]string{"Authorization": "Bearer " + viewerToken}},
			wantStatus: http.StatusOK, wantBody: `"name": "prod-eu"`,
		},
		"cookie": {
			req:        request{method: "GET", target: "/", header: html, cookie: viewerToken},
			wantStatus: http.StatusOK, wantBody: `<table id="clusters">`,
		},
		"cookie on the fragment (the page's fetch)": {
			req:        request{method: "GET", target: "/fragments/fleet", cookie: viewerToken},
			wantStatus: http.StatusOK, wantBody: `<div id="fleet"`,
		},
		"the bearer header wins over the cookie": {
			req:        request{method: "GET", target: "/v1/fleet", header: map[string]string{"Authorization": "Bearer " + strangerToken}, cookie: viewerToken},
			wantStatus: http.StatusForbidden, wantBody: "Authorization denied",
		},
		"rejected token, browser: login page with 401": {
			req:        request{method: "GET", target: "/", header: html, cookie: "expired.token"},
			wantStatus: http.StatusUnauthorized, wantBody: "The token was not accepted",
		},
		"unauthorized identity, browser: login page with 403": {
			req:        request{method: "GET", target: "/", header: html, cookie: strangerToken},
			wantStatus: http.StatusForbidden, wantBody: "This identity may not view the fleet overview",
		},
		"unauthorized identity, API client: the filter's 403": {
			req:        request{method: "GET", target: "/v1/fleet", cookie: strangerToken},
			wantStatus: http.StatusForbidden, wantBody: "Authorization denied",
		},
		"assets need nothing": {
			req:        request{method: "GET", target: "/assets/style.css", header: html},
			wantStatus: http.StatusOK, wantBody: ".badge-green",
		},
		"login page needs nothing": {
			req:        request{method: "GET", target: "/login?next=/clusters/a/b/c", header: html},
			wantStatus: http.StatusOK, wantBody: `<input type="hidden" name="next" value="/clusters/a/b/c">`,
		},
		"token the TokenReview fails on, browser: login page with 500": {
			req:        request{method: "GET", target: "/", header: html, cookie: malformedToken},
			wantStatus: http.StatusInternalServerError, wantBody: "The token could not be verified",
		},
		"token the TokenReview fails on, API client: the filter's 500": {
			req:        request{method: "GET", target: "/fragments/fleet", cookie: malformedToken},
			wantStatus: http.StatusInternalServerError, wantBody: "Authentication failed",
		},
		"the overview's own 404 passes": {
			req:        request{method: "GET", target: "/nope", header: html, cookie: viewerToken},
			wantStatus: http.StatusNotFound, wantBody: "<h1>Page not found</h1>",
		},
		"a 404 is only shown to the authorized": {
			req:        request{method: "GET", target: "/nope", header: html, cookie: strangerToken},
			wantStatus: http.StatusForbidden, wantBody: "This identity may not view",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			rec := do(t, h, tt.req)
			if rec.Code != tt.wantStatus {
				t.Errorf("status %d, want %d:\n%s", rec.Code, tt.wantStatus, rec.Body)
			}
			if got := rec.Header().Get("Location"); got != tt.wantLocation {
				t.Errorf("Location %q, want %q", got, tt.wantLocation)
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("body lacks %q:\n%s", tt.wantBody, rec.Body)
			}
			if rec.Header().Get("Content-Security-Policy") != "default-src 'self'" {
				t.Error("no CSP")
			}
			body := rec.Body.String()
			for _, tok := range []string{viewerToken, strangerToken, malformedToken, "expired.token"} {
				if strings.Contains(body, tok) {
					t.Errorf("the response echoes token %s", tok)
				}
			}
			if tt.wantStatus == http.StatusUnauthorized || tt.wantStatus == http.StatusForbidden || tt.wantStatus == http.StatusInternalServerError {
				if tt.req.header["Accept"] != "" && (strings.Contains(body, "Unauthorized\n") || strings.Contains(body, "Authorization denied") || strings.Contains(body, "Authentication failed")) {
					t.Error("a browser gets the filter's plain text")
				}
				if tt.req.header["Accept"] != "" && rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
					t.Errorf("a refused browser gets Content-Type %q", rec.Header().Get("Content-Type"))
				}
			}
		})
	}
	// The login page and the assets never reach the filter.
	for _, auth := range *seen {
		if auth != "" && auth != "Bearer "+viewerToken && auth != "Bearer "+strangerToken && auth != "Bearer "+malformedToken && auth != "Bearer expired.token" {
			t.Errorf("the filter saw Authorization %q", auth)
		}
	}
	if n := len(*seen); n != 12 {
		t.Errorf("the filter saw %d requests, want 12 (all but the redirect, the asset and the login page)", n)
	}
}

func TestLoginAndLogout(t *testing.T) {
	s, _ := newSecureTestServer(t)
	h := s.Handler()
	origin := map[string]string{"Origin": "https://example.com"} // httptest's Host is example.com

	rec := do(t, h, request{method: "POST", target: "/login", header: origin, form: url.Values{"token": {"  Bearer " + viewerToken + "\n"}, "next": {"/clusters/a/b/c?sort=cpu"}}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/clusters/a/b/c?sort=cpu" {
		t.Fatalf("POST /login = %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("POST /login set %d cookies", len(cookies))
	}
	c := cookies[0]
	if c.Name != tokenCookie || c.Value != viewerToken || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Errorf("cookie %s=…: HttpOnly %v, Secure %v, SameSite %v, Path %q; value is the token: %v",
			c.Name, c.HttpOnly, c.Secure, c.SameSite, c.Path, c.Value == viewerToken)
	}
	if strings.Contains(rec.Body.String(), viewerToken) {
		t.Error("the login response echoes the token")
	}
	// The cookie works.
	if rec := do(t, h, request{method: "GET", target: "/", header: map[string]string{"Accept": browserAccept}, cookie: c.Value}); rec.Code != http.StatusOK {
		t.Errorf("GET / with the login's cookie = %d", rec.Code)
	}

	for name, next := range map[string]string{"other host": "//evil.example/x", "absolute": "https://evil.example/", "backslash": `/\evil.example`, "empty": ""} {
		rec := do(t, h, request{method: "POST", target: "/login", form: url.Values{"token": {viewerToken}, "next": {next}}})
		if rec.Header().Get("Location") != "/" {
			t.Errorf("%s next %q: redirected to %q, want /", name, next, rec.Header().Get("Location"))
		}
	}

	rec = do(t, h, request{method: "POST", target: "/login", form: url.Values{"token": {"not a token; <b>"}}})
	if rec.Code != http.StatusBadRequest || len(rec.Result().Cookies()) != 0 || !strings.Contains(rec.Body.String(), "does not look like a token") {
		t.Errorf("a malformed token: %d, %d cookies", rec.Code, len(rec.Result().Cookies()))
	}
	if strings.Contains(rec.Body.String(), "not a token; ") {
		t.Error("the login page echoes what was posted")
	}

	rec = do(t, h, request{method: "POST", target: "/login", header: map[string]string{"Origin": "https://evil.example"}, form: url.Values{"token": {viewerToken}}})
	if rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
		t.Errorf("a cross-origin login = %d with %d cookies, want 403 and none", rec.Code, len(rec.Result().Cookies()))
	}

	rec = do(t, h, request{method: "POST", target: "/login", header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://example.com"}, form: url.Values{"token": {viewerToken}}})
	if rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
		t.Errorf("a login the browser says is cross-site = %d with %d cookies, want 403 and none", rec.Code, len(rec.Result().Cookies()))
	}
	// Under Referrer-Policy no-referrer a browser's form post carries Origin "null"; its
	// Sec-Fetch-Site says it came from this site.
	rec = do(t, h, request{method: "POST", target: "/login", header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "null"}, form: url.Values{"token": {viewerToken}}})
	if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 {
		t.Errorf("a browser's same-origin login with Origin null = %d with %d cookies, want 303 and the cookie", rec.Code, len(rec.Result().Cookies()))
	}

	rec = do(t, h, request{method: "POST", target: "/logout", header: origin, cookie: viewerToken})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/login" {
		t.Errorf("POST /logout = %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	cookies = rec.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != tokenCookie || cookies[0].Value != "" || cookies[0].MaxAge >= 0 {
		t.Errorf("POST /logout cookies = %v, want %s cleared", cookies, tokenCookie)
	}

	// Pages of the secure overview offer to log out; the plain one has no login at all.
	if rec := do(t, h, request{method: "GET", target: "/", cookie: viewerToken}); !strings.Contains(rec.Body.String(), `<form class="logout" method="post" action="/logout">`) {
		t.Error("the secure page has no logout button")
	}
	plain := newTestServer(t, fleet()).Handler()
	if rec := get(t, plain, "/login"); rec.status != http.StatusNotFound {
		t.Errorf("GET /login on the plain overview = %d, want 404", rec.status)
	}
	if rec := get(t, plain, "/"); rec.status != http.StatusOK || strings.Contains(rec.body, "logout") {
		t.Error("the plain page has a logout button")
	}
}
