package kubeoperaapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPatchCloudSpace(t *testing.T) {
	var got struct {
		method, path, auth, ctype string
		body                      CloudSpaceUpdate
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.method, got.path, got.auth, got.ctype = r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		_ = json.NewDecoder(r.Body).Decode(&got.body)
		if strings.HasSuffix(r.URL.Path, "/missing") {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()

	c := &Client{BaseURL: srv.URL + "/", Token: "t0ken"}
	upd := CloudSpaceUpdate{VClusterID: "vc-alice-default", Namespace: "kcp-x-vc-alice-default", KubeconfigSecret: "tenant-7e9d-kubeconfig", Status: "active"}
	if err := c.PatchCloudSpace(context.Background(), "7e9d", upd); err != nil {
		t.Fatal(err)
	}
	if got.method != http.MethodPatch || got.path != "/api/v1/cloudspaces/7e9d" || got.auth != "Bearer t0ken" || got.ctype != "application/json" {
		t.Errorf("unexpected request: %+v", got)
	}
	if got.body != upd {
		t.Errorf("body = %+v, want %+v", got.body, upd)
	}
	if err := c.PatchCloudSpace(context.Background(), "missing", upd); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("want a 404 error, got %v", err)
	}
	if (&Client{}).Enabled() {
		t.Error("a client without base URL must be disabled")
	}
}
