package api

import (
	"strings"
	"testing"
)

func TestJobBelongsTo(t *testing.T) {
	const ws, uid = "1bg4baqdjkcw9lz4", "6f1c2b8e-3d4a-4c5b-9e7f-0a1b2c3d4e5f"
	for name, tc := range map[string]struct {
		job  Scaffold
		want bool
	}{
		"its own":                       {Scaffold{ID: "j", Workspace: ws, OwnerUID: uid}, true},
		"another workspace's":           {Scaffold{ID: "j", Workspace: "2cd5ebrekldx0ma5", OwnerUID: uid}, false},
		"another object's":              {Scaffold{ID: "j", Workspace: ws, OwnerUID: "0a1b2c3d-0000-4000-8000-000000000000"}, false},
		"a job that says nobody's":      {Scaffold{ID: "j"}, false},
		"a job with the workspace only": {Scaffold{ID: "j", Workspace: ws}, false},
	} {
		if got := tc.job.BelongsTo(ws, uid); got != tc.want {
			t.Errorf("%s: BelongsTo = %t, want %t", name, got, tc.want)
		}
	}
	if (Scaffold{}).BelongsTo("", "") {
		t.Error("a job without owner belongs to an empty owner")
	}
}

func TestSlugFromPath(t *testing.T) {
	tests := []struct {
		path, slug string
		ok         bool
	}{
		{"fluxcd/clusters/my-cluster", "my-cluster", true},
		{"fluxcd/clusters/my-cluster/", "my-cluster", true},
		{"/clusters//prod-1", "prod-1", true},
		{"edge", "edge", true},
		{"", "", false},
		{"///", "", false},
		{"fluxcd/clusters/My_Cluster", "", false},
		{"fluxcd/clusters/-x", "", false},
		{"fluxcd/clusters/..", "", false},
		{"fluxcd/clusters/" + strings.Repeat("a", 64), "", false},
	}
	for _, tt := range tests {
		slug, err := SlugFromPath(tt.path)
		if (err == nil) != tt.ok || slug != tt.slug {
			t.Errorf("SlugFromPath(%q) = %q, %v; want %q ok=%v", tt.path, slug, err, tt.slug, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "gitOpsPath") {
			t.Errorf("SlugFromPath(%q): error %q should name gitOpsPath", tt.path, err)
		}
	}
}
