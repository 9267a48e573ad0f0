package scaffolder

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// SlugFromPath derives the slug the scaffolder is asked for from spec.gitOpsPath: its last
// non-empty element, which must be a DNS label (RFC 1123: at most 63 lower-case letters, digits
// and '-', starting and ending with a letter or digit), since the generated tree names
// namespaces, releases and hostnames after it. "fluxcd/clusters/my-cluster" -> "my-cluster".
func SlugFromPath(gitOpsPath string) (string, error) {
	elems := strings.FieldsFunc(gitOpsPath, func(r rune) bool { return r == '/' })
	if len(elems) == 0 {
		return "", fmt.Errorf("gitOpsPath %q has no element to name the cluster's tree after (e.g. fluxcd/clusters/my-cluster)", gitOpsPath)
	}
	slug := elems[len(elems)-1]
	if err := validateSlug(slug); err != nil {
		return "", fmt.Errorf("the last element of gitOpsPath %q, %q, cannot be the cluster's slug: %w", gitOpsPath, slug, err)
	}
	return slug, nil
}

// validateSlug checks that slug is a DNS label.
func validateSlug(slug string) error {
	if msgs := validation.IsDNS1123Label(slug); len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}
