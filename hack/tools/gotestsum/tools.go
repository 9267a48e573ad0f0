//go:build tools

// Package tools pins gotestsum, which runs `make test`'s go test (hack/test.sh). See
// hack/build-tools.sh.
package tools

import (
	_ "gotest.tools/gotestsum"
)
