#!/usr/bin/env bash
# Builds the pinned tools the project needs from the Go module proxy into _tools/bin, skipping
# those already built for the pinned version. Usage: hack/build-tools.sh [tool...]
# Tools: kcp apigen kube-apiserver etcd kube-controller-manager controller-gen source-controller
# kustomize-controller flux-chart terraform kcp-front-proxy cache-server (default: all).
#   flux-chart assembles the local Flux chart into _tools/charts/flux2: the project's templates
#   (charts/flux2) plus Flux's own CRDs, copied from the Go modules of the controllers.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/_tools/bin"
CHARTS="${ROOT}/_tools/charts"
mkdir -p "${BIN}"

# tool -> "tools-module package"
declare -A PKG=(
  [kcp]="kcp github.com/kcp-dev/kcp/cmd/kcp"
  [apigen]="kcp github.com/kcp-dev/sdk/cmd/apigen"
  [kcp-front-proxy]="kcp github.com/kcp-dev/kcp/cmd/kcp-front-proxy"
  [cache-server]="kcp github.com/kcp-dev/kcp/cmd/cache-server"
  [kube-apiserver]="kube k8s.io/kubernetes/cmd/kube-apiserver"
  [etcd]="kube go.etcd.io/etcd/server/v3"
  [controller-gen]="kube sigs.k8s.io/controller-tools/cmd/controller-gen"
  [kube-controller-manager]="kube k8s.io/kubernetes/cmd/kube-controller-manager"
  [source-controller]="flux github.com/fluxcd/source-controller"
  [kustomize-controller]="flux github.com/fluxcd/kustomize-controller"
)

# Flux modules whose CRDs (config/crd/bases) go into the local chart's crds/.
FLUX_CRD_MODULES=(github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller)

tools=("$@")
if [ ${#tools[@]} -eq 0 ]; then
  tools=(kcp apigen kube-apiserver etcd kube-controller-manager controller-gen source-controller kustomize-controller flux-chart terraform kcp-front-proxy cache-server)
fi

# stamp_of prints a short hash of the given files, so a pin or content change rebuilds.
stamp_of() {
  cat "$@" | sha256sum | cut -c1-16
}

# flux_chart assembles _tools/charts/flux2 from charts/flux2 and the Flux modules' CRDs.
flux_chart() {
  local src="${ROOT}/charts/flux2" dest="${CHARTS}/flux2" moddir="${ROOT}/hack/tools/flux"
  local stamp="${CHARTS}/.flux2.stamp" want
  want="$(cd "${ROOT}" && find charts/flux2 hack/tools/flux/go.mod hack/tools/flux/go.sum -type f | LC_ALL=C sort |
    while read -r f; do echo "${f}"; cat "${f}"; done | sha256sum | cut -c1-16)"
  if [ -f "${dest}/Chart.yaml" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ]; then
    return
  fi
  echo ">> assembling the local Flux chart into _tools/charts/flux2"
  rm -rf "${dest}" "${stamp}"
  mkdir -p "${dest}/crds"
  cp -R "${src}/." "${dest}/"
  local mod dir
  for mod in "${FLUX_CRD_MODULES[@]}"; do
    dir="$(cd "${moddir}" && go mod download "${mod}" && go list -m -f '{{.Dir}}' "${mod}")"
    if [ -z "${dir}" ] || ! ls "${dir}"/config/crd/bases/*.yaml >/dev/null 2>&1; then
      echo "no CRDs found for ${mod} (module dir '${dir}')" >&2
      exit 1
    fi
    cp "${dir}"/config/crd/bases/*.yaml "${dest}/crds/"
  done
  chmod -R u+w "${dest}" # the module cache is read-only
  echo "${want}" >"${stamp}"
}

# terraform_tool puts the pinned Terraform (internal/terraform/runner.TerraformVersion) into
# _tools/bin. hashicorp/terraform cannot be built from the Go module proxy (its go.mod replaces
# nested internal/... modules with local paths, and the module zip leaves nested modules out), so
# the terraform on PATH is linked when it is exactly the pinned version; otherwise this says so and
# the provisioning tests skip.
terraform_tool() {
  local want have path
  want="$(sed -n 's/^const TerraformVersion = "\(.*\)"$/\1/p' "${ROOT}/internal/terraform/runner/config.go")"
  if [ -z "${want}" ]; then
    echo "cannot read TerraformVersion from internal/terraform/runner/config.go" >&2
    exit 1
  fi
  path="$(command -v terraform || true)"
  if [ -n "${path}" ] && [ "$(readlink -f "${path}")" != "$(readlink -f "${BIN}/terraform" 2>/dev/null || true)" ]; then
    have="$("${path}" version -json 2>/dev/null | sed -n 's/.*"terraform_version": *"\([^"]*\)".*/\1/p')"
    if [ "${have}" = "${want}" ]; then
      ln -sf "${path}" "${BIN}/terraform"
      return
    fi
  fi
  if [ -x "${BIN}/terraform" ]; then
    return
  fi
  echo ">> terraform ${want} is not on PATH (found '${path:-none}' ${have:-}); the provisioning tests will skip" >&2
}

for tool in "${tools[@]}"; do
  if [ "${tool}" = flux-chart ]; then
    flux_chart
    continue
  fi
  if [ "${tool}" = terraform ]; then
    terraform_tool
    continue
  fi
  if [ -z "${PKG[$tool]+x}" ]; then
    echo "unknown tool ${tool}" >&2
    exit 1
  fi
  read -r mod pkg <<<"${PKG[$tool]}"
  moddir="${ROOT}/hack/tools/${mod}"
  ldflags=""
  if [ "${mod}" = kube ] && [[ "${tool}" == kube-* ]]; then
    # Kubernetes' release builds stamp the version (hack/lib/version.sh); without it the API server
    # reports v0.0.0-master, which is what a connected cluster's inventory would show.
    kver="$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "${moddir}/go.mod")"
    kminor="$(echo "${kver}" | cut -d. -f2)"
    ldflags="-X k8s.io/component-base/version.gitVersion=${kver} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kminor} -X k8s.io/component-base/version.gitTreeState=clean"
  fi
  if [ "${mod}" = kcp ] && [ "${tool}" != apigen ]; then
    # kcp's release builds stamp "<Kubernetes version>+kcp-<kcp version>" (kcp's Makefile:
    # GIT_VERSION into k8s.io/component-base/version and k8s.io/client-go/pkg/version); /version
    # reports it, and the manager refuses a kcp whose release it cannot tell.
    kcpver="$(awk '$1 == "github.com/kcp-dev/kcp" { print $2; exit }' "${moddir}/go.mod")"
    kcpkube="$(cd "${moddir}" && go mod download -json "github.com/kcp-dev/kcp@${kcpver}" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p' | xargs awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }')"
    kmajor="$(echo "${kcpkube}" | sed 's/^v\([0-9]*\).*/\1/')"
    kminor="$(echo "${kcpkube}" | cut -d. -f2)"
    gitver="${kcpkube}+kcp-${kcpver}"
    for pkgvar in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags="${ldflags} -X ${pkgvar}.gitVersion=${gitver} -X ${pkgvar}.gitMajor=${kmajor} -X ${pkgvar}.gitMinor=${kminor} -X ${pkgvar}.gitTreeState=clean"
    done
  fi
  # The stamp records the tools module's go.sum hash and the link flags, so a pin change rebuilds.
  stamp="${BIN}/.${tool}.stamp"
  want="$(stamp_of "${moddir}/go.mod" "${moddir}/go.sum")"
  if [ -n "${ldflags}" ]; then
    want="$(echo "${want} ${ldflags}" | sha256sum | cut -c1-16)"
  fi
  if [ -x "${BIN}/${tool}" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ]; then
    continue
  fi
  echo ">> building ${tool} (${pkg}) into _tools/bin; the first build takes minutes"
  (cd "${moddir}" && go build -ldflags "${ldflags}" -o "${BIN}/${tool}" "${pkg}")
  echo "${want}" >"${stamp}"
done
