#!/usr/bin/env bash
# Builds the pinned tools the project needs from the Go module proxy into _tools/bin, skipping
# those already built for the pinned version. Usage: hack/build-tools.sh [tool...]
# Tools: kcp apigen kube-apiserver etcd kube-controller-manager controller-gen (default: all).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/_tools/bin"
mkdir -p "${BIN}"

# tool -> "tools-module package"
declare -A PKG=(
  [kcp]="kcp github.com/kcp-dev/kcp/cmd/kcp"
  [apigen]="kcp github.com/kcp-dev/sdk/cmd/apigen"
  [kube-apiserver]="kube k8s.io/kubernetes/cmd/kube-apiserver"
  [etcd]="kube go.etcd.io/etcd/server/v3"
  [controller-gen]="kube sigs.k8s.io/controller-tools/cmd/controller-gen"
  [kube-controller-manager]="kube k8s.io/kubernetes/cmd/kube-controller-manager"
)

tools=("$@")
if [ ${#tools[@]} -eq 0 ]; then
  tools=(kcp apigen kube-apiserver etcd kube-controller-manager controller-gen)
fi

for tool in "${tools[@]}"; do
  read -r mod pkg <<<"${PKG[$tool]}"
  moddir="${ROOT}/hack/tools/${mod}"
  # The stamp records the tools module's go.sum hash, so a pin change rebuilds.
  stamp="${BIN}/.${tool}.stamp"
  want="$(cat "${moddir}/go.mod" "${moddir}/go.sum" | sha256sum | cut -c1-16)"
  if [ -x "${BIN}/${tool}" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ]; then
    continue
  fi
  echo ">> building ${tool} (${pkg}) into _tools/bin; the first build takes minutes"
  (cd "${moddir}" && go build -o "${BIN}/${tool}" "${pkg}")
  echo "${want}" >"${stamp}"
done
