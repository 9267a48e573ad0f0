package jobservice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type body struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Ref   struct {
		Namespace string `json:"namespace"`
	} `json:"ref"`
}

func TestDecodeJSON(t *testing.T) {
	tests := map[string]struct {
		body, contentType string
		status            int
		field, message    string
	}{
		"valid":                 {body: `{"name":"a","count":1}`, status: 0},
		"no content type":       {body: `{"name":"a"}`, contentType: "-", status: 0},
		"json with charset":     {body: `{"name":"a"}`, contentType: "application/json; charset=utf-8", status: 0},
		"empty":                 {body: ``, status: 400, message: "empty"},
		"truncated":             {body: `{"name":"a"`, status: 400, message: "truncated"},
		"not json":              {body: `name=a`, status: 400, message: "not valid JSON"},
		"an array":              {body: `[1]`, status: 400, message: "must be a JSON object"},
		"unknown field":         {body: `{"name":"a","nmae":"b"}`, status: 400, field: "nmae", message: "unknown field"},
		"wrong type":            {body: `{"count":"1"}`, status: 400, field: "count", message: "must be a JSON number, not string"},
		"wrong type, nested":    {body: `{"ref":{"namespace":1}}`, status: 400, field: "ref.namespace", message: "must be a JSON string"},
		"two objects":           {body: `{"name":"a"}{"name":"b"}`, status: 400, message: "exactly one JSON object"},
		"too large":             {body: `{"name":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, status: 413, message: "larger than"},
		"another content type":  {body: `{"name":"a"}`, contentType: "text/plain", status: 415, message: "application/json"},
		"a broken content type": {body: `{"name":"a"}`, contentType: "application/", status: 415},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			switch tc.contentType {
			case "":
				r.Header.Set("Content-Type", "application/json")
			case "-":
			default:
				r.Header.Set("Content-Type", tc.contentType)
			}
			var v body
			err := DecodeJSON(httptest.NewRecorder(), r, &v)
			if tc.status == 0 {
				if err != nil || v.Name != "a" {
					t.Fatalf("got %v, %+v", err, v)
				}
				return
			}
			if err == nil || err.Status != tc.status || err.Field != tc.field || !strings.Contains(err.Message, tc.message) {
				t.Fatalf("got %+v, want %d on %q saying %q", err, tc.status, tc.field, tc.message)
			}
			w := httptest.NewRecorder()
			err.Write(w)
			var got struct{ Error, Field string }
			if w.Code != tc.status || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.Error != err.Message || got.Field != tc.field {
				t.Errorf("answer %d %s", w.Code, w.Body)
			}
		})
	}
}

func TestKeyCheckAndAccessLog(t *testing.T) {
	const key = "the-shared-key-0123"
	if _, err := NewKeyCheck("X-Api-Key", ""); err == nil {
		t.Error("an empty key is accepted")
	}
	keys, err := NewKeyCheck("X-Api-Key", key)
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", Health)
	mux.Handle("POST /runs/{id}", keys.Wrap(func(w http.ResponseWriter, r *http.Request) {
		SetRun(r, r.PathValue("id"))
		WriteJSON(w, http.StatusAccepted, map[string]string{"id": r.PathValue("id")})
	}))
	h := AccessLog(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), mux)
	for name, tc := range map[string]struct {
		key    string
		status int
	}{
		"no key":      {"", http.StatusUnauthorized},
		"wrong key":   {"the-shared-key-0124", http.StatusUnauthorized},
		"a prefix":    {"the-shared-key", http.StatusUnauthorized},
		"the key":     {key, http.StatusAccepted},
		"key + space": {key + " ", http.StatusUnauthorized},
	} {
		r := httptest.NewRequest(http.MethodPost, "/runs/abcdefghij", strings.NewReader(`{"secret":"body-value-0123"}`))
		if tc.key != "" {
			r.Header.Set("X-Api-Key", tc.key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %v", name, w.Code, w.Header())
		}
		if tc.status == http.StatusUnauthorized && strings.TrimSpace(w.Body.String()) != `{"error":"unauthorized"}` {
			t.Errorf("%s: the refusal says %s", name, w.Body)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health", nil))
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"status":"ok"}` {
		t.Errorf("health: %d %s", w.Code, w.Body)
	}
	log := logs.String()
	for _, v := range []string{key, "body-value-0123", "X-Api-Key"} {
		if strings.Contains(log, v) {
			t.Errorf("the access log carries %q:\n%s", v, log)
		}
	}
	if !strings.Contains(log, `"run":"abcdefghij"`) || !strings.Contains(log, `"route":"POST /runs/{id}"`) || !strings.Contains(log, `"status":202`) {
		t.Errorf("the access log lacks the run, route or status:\n%s", log)
	}
}

// sweeps counts sweeps.
type sweeps struct{ n atomic.Int32 }

func (s *sweeps) Sweep(_ context.Context, retention time.Duration) (int, error) {
	if retention != time.Hour {
		return 0, errors.New("wrong retention")
	}
	s.n.Add(1)
	return 1, nil
}

func TestServiceSweepsAndStops(t *testing.T) {
	runs := &sweeps{}
	cfg := Config[*sweeps]{APIKey: "k", Runs: runs, Retention: time.Hour, SweepInterval: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	s, err := NewService("test", "X-Api-Key", cfg, time.Minute, func(*http.ServeMux, *KeyCheck) {})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /health: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runs.n.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runs.n.Load(); n < 3 {
		t.Errorf("%d sweeps, want at least 3", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after its context ended: %v", err)
	}
	cfg.Retention = 0
	noRetention, err := NewService("test", "X-Api-Key", cfg, time.Minute, func(*http.ServeMux, *KeyCheck) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := noRetention.Serve(t.Context(), must(net.Listen("tcp", "127.0.0.1:0"))); err == nil {
		t.Error("Serve without a retention started")
	}
	if _, err := NewService("test", "X-Api-Key", Config[*sweeps]{APIKey: "k"}, time.Minute, func(*http.ServeMux, *KeyCheck) {}); err == nil {
		t.Error("NewService without Runs")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestEnv(t *testing.T) {
	vars := map[string]string{"A": " a ", "NS": "Bad_NS", "D": "30s", "SHORT": "1s", "L": "debug"}
	e := NewEnv(func(k string) string { return vars[k] })
	if e.Or("A", "x") != "a" || e.Or("MISSING", "x") != "x" || e.Get("A") != " a " {
		t.Error("Or/Get")
	}
	if e.Duration("D", "1m", time.Second) != 30*time.Second || e.LogLevel("L") != slog.LevelDebug {
		t.Error("Duration/LogLevel")
	}
	if e.Err() != nil {
		t.Fatalf("no error yet: %v", e.Err())
	}
	e.Required("MISSING")
	e.Namespace("NS", "default")
	e.Duration("SHORT", "1m", time.Minute)
	err := e.Err()
	for _, want := range []string{"MISSING is required", "NS \"Bad_NS\" is not a namespace name", "SHORT \"1s\" must be a duration of at least 1m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Err() = %v, want %q", err, want)
		}
	}
}
