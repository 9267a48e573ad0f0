package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPrepareWorkDir(t *testing.T) {
	// The rendered module as the kubelet projects the ConfigMap (see projectSecret).
	module := projectSecret(t, map[string]string{"main.tf": "# main", "backend.tf": "# backend"})
	modules := t.TempDir()
	if err := os.MkdirAll(filepath.Join(modules, "vpc"), 0o755); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	dir, err := PrepareWorkDir(parent, module, modules)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"backend.tf", "main.tf", "modules"}; !slices.Equal(names, want) {
		t.Errorf("work dir has %v, want %v", names, want)
	}
	fi, err := os.Lstat(filepath.Join(dir, "main.tf"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o200 == 0 {
		t.Errorf("main.tf is not a writable copy: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.tf")); string(b) != "# main" {
		t.Errorf("main.tf = %q", b)
	}
	if target, err := os.Readlink(filepath.Join(dir, "modules")); err != nil || target != modules {
		t.Errorf("modules -> %q %v", target, err)
	}
	// Terraform writes .terraform into it.
	if err := os.Mkdir(filepath.Join(dir, ".terraform"), 0o755); err != nil {
		t.Error(err)
	}

	for name, tc := range map[string]struct {
		module  map[string]string
		modules string
		err     string
	}{
		"empty module":          {module: map[string]string{}, err: "has no files"},
		"a modules entry":       {module: map[string]string{"main.tf": "", "modules": ""}, modules: modules, err: `has an entry "modules"`},
		"modules missing":       {module: map[string]string{"main.tf": ""}, modules: filepath.Join(modules, "nope"), err: "are not a directory"},
		"no modules, no link":   {module: map[string]string{"main.tf": ""}},
		"modules entry allowed": {module: map[string]string{"main.tf": "", "modules": ""}},
	} {
		t.Run(name, func(t *testing.T) {
			dir, err := PrepareWorkDir(parent, projectSecret(t, tc.module), tc.modules)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if dir != "" {
				t.Errorf("a failed work dir is returned: %s", dir)
			}
		})
	}
	left, _ := os.ReadDir(parent)
	if len(left) != 3 { // the first one and the two without errors; failures are removed
		t.Errorf("%d work dirs left in the parent, want 3", len(left))
	}
}
