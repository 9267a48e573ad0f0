package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ModulesLink is the work dir's entry for the project's modules: the rendered root module calls
// them as ./modules/<name>.
const ModulesLink = "modules"

// PrepareWorkDir makes Terraform's working directory in a new temporary directory under parent
// (os.TempDir() when empty): a copy of the rendered root module in moduleDir (mounted read-only,
// where Terraform cannot write .terraform) and, when modulesDir is set, a symlink "modules" to
// it. moduleDir may be a kubelet-projected volume: entries whose names start with ".." (its
// ..data and timestamped directories) are skipped, and symlinks are followed. The caller
// removes the returned directory.
func PrepareWorkDir(parent, moduleDir, modulesDir string) (string, error) {
	entries, err := os.ReadDir(moduleDir)
	if err != nil {
		return "", fmt.Errorf("failed to read the rendered module in %s: %w", moduleDir, err)
	}
	dir, err := os.MkdirTemp(parent, "terraform-")
	if err != nil {
		return "", fmt.Errorf("failed to create the work dir: %w", err)
	}
	fail := func(err error) (string, error) {
		_ = os.RemoveAll(dir)
		return "", err
	}
	files := 0
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") {
			continue
		}
		if name == ModulesLink && modulesDir != "" {
			return fail(fmt.Errorf("the rendered module has an entry %q, which is where the project's modules go", ModulesLink))
		}
		n, err := copyTree(filepath.Join(moduleDir, name), filepath.Join(dir, name))
		if err != nil {
			return fail(err)
		}
		files += n
	}
	if files == 0 {
		return fail(fmt.Errorf("the rendered module in %s has no files", moduleDir))
	}
	if modulesDir != "" {
		abs, err := filepath.Abs(modulesDir)
		if err != nil {
			return fail(err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return fail(fmt.Errorf("the project's Terraform modules %s are not a directory: %v", abs, err))
		}
		if err := os.Symlink(abs, filepath.Join(dir, ModulesLink)); err != nil {
			return fail(fmt.Errorf("failed to link the project's modules into the work dir: %w", err))
		}
	}
	return dir, nil
}

// copyTree copies src (a file or a directory, symlinks followed) to dst and returns the number
// of files copied.
func copyTree(src, dst string) (int, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return 0, fmt.Errorf("failed to read %s: %w", src, err)
	}
	if !fi.IsDir() {
		return 1, copyFile(src, dst)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, e := range entries {
		n, err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("failed to copy %s: %w", src, err)
	}
	return nil
}
