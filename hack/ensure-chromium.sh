#!/usr/bin/env bash
# Installs Debian's chromium package when `chromium` is not on PATH: the browser tests
# (test/framework/browser) drive it with chromedp. make test runs this once before go test, so
# no test installs anything (test binaries run in parallel and would contend for dpkg's lock).
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
echo ">> chromium is not on PATH: installing Debian's chromium package with apt-get (the browser tests drive it)"
sudo=()
if [ "$(id -u)" != 0 ]; then
  sudo=(sudo)
fi
# Wait for a dpkg or apt run already under way instead of failing at once.
apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
"${apt[@]}" update
"${apt[@]}" install -y --no-install-recommends chromium
if ! command -v chromium >/dev/null 2>&1; then
  echo "apt-get installed chromium, but there is still no chromium on PATH" >&2
  exit 1
fi
echo ">> installed $(chromium --version 2>/dev/null || echo chromium)"
