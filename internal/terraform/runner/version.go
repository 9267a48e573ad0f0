package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
)

// PinnedTerraform returns the path of the terraform in PATH if `terraform version -json` says it
// is exactly TerraformVersion, and otherwise an error saying what was found. Tests run Terraform
// only through it.
func PinnedTerraform(ctx context.Context) (string, error) {
	path, err := exec.LookPath("terraform")
	if err != nil {
		return "", fmt.Errorf("no terraform in PATH (the runner needs Terraform %s)", TerraformVersion)
	}
	out, err := exec.CommandContext(ctx, path, "version", "-json").Output()
	if err != nil {
		return "", fmt.Errorf("%s version -json failed: %w", path, err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("%s version -json printed no version: %w", path, err)
	}
	if v.Version != TerraformVersion {
		return "", fmt.Errorf("%s is Terraform %s, not the pinned %s", path, v.Version, TerraformVersion)
	}
	return path, nil
}
