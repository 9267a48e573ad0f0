package authapi

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeopera/kubeopera/internal/reconcile"
)

// The bootstrap through a real API server's service proxy is tested with the AuthAPI actor in
// test/sim (authapi_test.go); these are the pure parts.

func TestDefaultOptions(t *testing.T) {
	want := Options{Namespace: "kubeopera", Service: "authapi", Port: "http", Secret: "authapi-secrets", SecretKey: "INTERNAL_API_KEY"}
	if got := DefaultOptions(); got != want {
		t.Errorf("DefaultOptions() = %+v, want %+v", got, want)
	}
	got := Options{Namespace: "platform", SecretKey: "KEY"}.withDefaults()
	if got != (Options{Namespace: "platform", Service: "authapi", Port: "http", Secret: "authapi-secrets", SecretKey: "KEY"}) {
		t.Errorf("withDefaults kept or filled the wrong fields: %+v", got)
	}
}

func TestGeneratePassword(t *testing.T) {
	alphabet := regexp.MustCompile(`^[A-Za-z0-9_-]{32}$`)
	seen := map[string]bool{}
	for range 200 {
		p, err := GeneratePassword()
		if err != nil {
			t.Fatal(err)
		}
		if !alphabet.MatchString(p) || !strings.ContainsAny(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") ||
			!strings.ContainsAny(p, "abcdefghijklmnopqrstuvwxyz") || !strings.ContainsAny(p, "0123456789") {
			t.Errorf("password %q: want 32 URL-safe characters with upper, lower and digit", p)
		}
		if seen[p] {
			t.Fatalf("password %q generated twice", p)
		}
		seen[p] = true
	}
}

func TestBootstrapRefusesAnIncompleteAdmin(t *testing.T) {
	for field, a := range map[string]Admin{
		"email":    {Username: "admin", Password: "p"},
		"username": {Email: "a@b.c", Password: "p"},
		"password": {Email: "a@b.c", Username: "admin"},
	} {
		// Checked before the target is touched: no clientset needed.
		err := Bootstrap(context.Background(), nil, DefaultOptions(), a)
		if !reconcile.IsTerminal(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want a terminal error naming it", field, err)
		}
	}
}

func TestAnswerError(t *testing.T) {
	status := func(code int, msg string) string {
		return `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"` + msg + `","code":` + strconv.Itoa(code) + `}`
	}
	const password, key = "Pa55word-secret-xyz", "internal-key-123"
	tests := map[string]struct {
		code      int
		body      string
		transient bool
		is        error
		contains  string
	}{
		"no Service or Endpoints":       {code: 404, body: status(404, `services \"authapi\" not found`), transient: true, is: ErrNotInstalled, contains: "no Service or Endpoints yet (is the platform installed?)"},
		"no ready endpoints":            {code: 503, body: status(503, `no endpoints available for service \"authapi:http\"`), transient: true, is: ErrNotInstalled, contains: "no endpoints available"},
		"proxy cannot dial":             {code: 503, body: status(503, "error trying to reach service: dial tcp 192.0.2.2:1: connect: connection refused"), transient: true, contains: "error trying to reach service"},
		"API server overloaded":         {code: 429, body: status(429, "too many requests"), transient: true},
		"proxy forbidden":               {code: 403, body: status(403, `services \"authapi:http\" is forbidden`), contains: "HTTP 403 for Service kubeopera/authapi:http: services"},
		"authapi refuses the key":       {code: 401, body: `{"error":"invalid internal API key"}`, is: ErrRefused, contains: "authapi refused the internal API key from authapi-secrets (HTTP 401): invalid internal API key"},
		"authapi forbids":               {code: 403, body: `forbidden`, is: ErrRefused},
		"authapi rejects the account":   {code: 422, body: `{"message":"username taken"}`, contains: "authapi refused the super-admin account (HTTP 422): username taken"},
		"authapi not found is terminal": {code: 404, body: `404 page not found`, contains: "HTTP 404): 404 page not found"},
		"authapi down":                  {code: 500, body: `{"error":"db unavailable"}`, transient: true, contains: "authapi answered HTTP 500: db unavailable"},
		"authapi unavailable":           {code: 503, body: ``, transient: true, contains: "authapi answered HTTP 503"},
		"secrets echoed are redacted":   {code: 400, body: `{"error":"password ` + password + ` or key ` + key + ` invalid"}`, contains: "password [redacted] or key [redacted] invalid"},
		"long answers are bounded":      {code: 400, body: strings.Repeat("z", 5000)},
	}
	redact := strings.NewReplacer(password, "[redacted]", key, "[redacted]").Replace
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := answerError(DefaultOptions(), tt.code, []byte(tt.body), redact)
			if err.StatusCode != tt.code || IsTransient(err) != tt.transient || reconcile.IsTerminal(err) == tt.transient {
				t.Errorf("err = %+v, want status %d transient %v", err, tt.code, tt.transient)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("err = %q, want it to contain %q", err, tt.contains)
			}
			if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), key) || len(err.Error()) > 1000 {
				t.Errorf("err = %q carries a secret or is unbounded", err)
			}
		})
	}
}
