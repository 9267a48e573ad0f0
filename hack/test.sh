#!/usr/bin/env bash
# Runs `go test -json <args>` through gotestsum (_tools/bin, hack/build-tools.sh) for make test:
# one line per package as it finishes and the output of each failing test; then gotestsum's
# summary (every skipped test with its reason, every failure, build errors); the 15 slowest
# tests; and, last, gotestsum's closing line again ("DONE N tests, M skipped, K failures in Ts").
# Every event is kept in $KUBEOPERA_TEST_ARTIFACTS/go-test.json (default _artifacts/go-test.json).
# The exit code is go test's. Usage: hack/test.sh [go test flags] [packages]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOTESTSUM="${ROOT}/_tools/bin/gotestsum"
ARTIFACTS="${KUBEOPERA_TEST_ARTIFACTS:-${ROOT}/_artifacts}"
JSON="${ARTIFACTS}/go-test.json"

if [ ! -x "${GOTESTSUM}" ]; then
  echo "no ${GOTESTSUM}: run hack/build-tools.sh gotestsum (make test builds it)" >&2
  exit 1
fi
mkdir -p "${ARTIFACTS}"

rc=0
"${GOTESTSUM}" --format pkgname-and-test-fails --format-icons text --jsonfile "${JSON}" -- "$@" || rc=$?

echo
echo "=== The 15 slowest tests (package, test, time)"
"${GOTESTSUM}" tool slowest --jsonfile "${JSON}" --num 15 || true

# gotestsum's closing line once more, read back from the file, so it stays the log's last line.
"${GOTESTSUM}" --format none --hide-summary all --raw-command -- cat "${JSON}" || true
exit "${rc}"
