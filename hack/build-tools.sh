#!/usr/bin/env bash
# Builds the pinned tools the project needs from the Go module proxy into _tools/bin, skipping
# those already built for the pinned version. Usage: hack/build-tools.sh [tool...]
# Tools: kcp kcp-front-proxy cache-server apigen kube-apiserver kube-controller-manager kubectl etcd
# controller-gen source-controller kustomize-controller gotestsum flux-chart terraform
# vcluster kine vcluster-chart crossplane function-patch-and-transform crossplane-files
# helm-controller sealed-secrets-controller sealed-secrets-chart (default: all).
#   flux-chart assembles the local Flux chart into _tools/charts/flux2: the project's templates
#   (charts/flux2) plus Flux's own CRDs, copied from the Go modules of the controllers
#   (source-controller, kustomize-controller and helm-controller).
#   helm-controller is Flux's helm-controller v1.4.3 (a tools module of its own: it is built on
#   Kubernetes 0.34, source-/kustomize-controller v1.9.6 on 0.36). sealed-secrets-controller is
#   the sealed-secrets controller (cmd/controller of github.com/bitnami-labs/sealed-secrets);
#   sealed-secrets-chart copies that module's real chart (helm/sealed-secrets) into
#   _tools/charts/sealed-secrets, which the tests serve from a local chart repository.
#   vcluster-chart copies vCluster's own chart from the vcluster tools module's chart/ directory
#   into _tools/charts/vcluster: the real chart the tests install through the Helm SDK.
#   crossplane is Crossplane core (`crossplane core init|start`), function-patch-and-transform
#   the composition function config/crossplane's Compositions run; crossplane-files copies, from
#   their modules, Crossplane's CRDs (cluster/crds) into _tools/crossplane/crds, which
#   `crossplane core init` installs (--crds-path, as in its image), and the function's package
#   metadata (package/: crossplane.yaml and its input's CRD) into
#   _tools/crossplane/function-patch-and-transform (its version beside it, .version), from which
#   tests and `make run` build the Function package Crossplane installs.
#
# The tools of one tools module (hack/tools/<module>) that need building are built by ONE
# `go build -o <dir>/ pkg...`: the packages they share are compiled once and the binaries are
# linked while the rest compiles, so both cores stay busy. While the first module builds, the
# later ones' modules are downloaded in the background (`go list -deps`), so the network waits
# overlap the compiling.
#
# Link flags, one set per module: `-s -w` (no symbol table, no DWARF: nothing here debugs or
# inspects these binaries, and linking without DWARF is faster and the binaries smaller) and the
# version stamps of the module's release builds (below). -trimpath is left out on purpose: it
# changes the build cache key of every package, so the standard library compiled here could no
# longer serve `go vet` and `go test` of the project (it would be compiled twice, about a minute
# on 2 cores), and it makes no link faster.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/_tools/bin"
# KUBEOPERA_TOOLS_CHARTS moves the charts elsewhere (the tests read it too: framework.ToolsCharts).
CHARTS="${KUBEOPERA_TOOLS_CHARTS:-${ROOT}/_tools/charts}"
CROSSPLANE_FILES="${ROOT}/_tools/crossplane"
mkdir -p "${BIN}"

# tool -> "tools-module package"
declare -A PKG=(
  [kcp]="kcp github.com/kcp-dev/kcp/cmd/kcp"
  [kcp-front-proxy]="kcp github.com/kcp-dev/kcp/cmd/kcp-front-proxy"
  [cache-server]="kcp github.com/kcp-dev/kcp/cmd/cache-server"
  [apigen]="kcp github.com/kcp-dev/sdk/cmd/apigen"
  [kube-apiserver]="kube k8s.io/kubernetes/cmd/kube-apiserver"
  [kube-controller-manager]="kube k8s.io/kubernetes/cmd/kube-controller-manager"
  [kubectl]="kube k8s.io/kubernetes/cmd/kubectl"
  [etcd]="kube go.etcd.io/etcd/server/v3"
  [controller-gen]="kube sigs.k8s.io/controller-tools/cmd/controller-gen"
  [source-controller]="flux github.com/fluxcd/source-controller"
  [kustomize-controller]="flux github.com/fluxcd/kustomize-controller"
  [helm-controller]="helm-controller github.com/fluxcd/helm-controller"
  [sealed-secrets-controller]="sealed-secrets github.com/bitnami-labs/sealed-secrets/cmd/controller"
  [gotestsum]="gotestsum gotest.tools/gotestsum"
  [vcluster]="vcluster github.com/loft-sh/vcluster/cmd/vcluster"
  [kine]="kine github.com/k3s-io/kine"
  [crossplane]="crossplane github.com/crossplane/crossplane/v2/cmd/crossplane"
  [function-patch-and-transform]="function-patch-and-transform github.com/crossplane-contrib/function-patch-and-transform"
)
ALL_TOOLS=(kcp kcp-front-proxy cache-server apigen kube-apiserver kube-controller-manager kubectl etcd
  controller-gen source-controller kustomize-controller gotestsum flux-chart terraform
  vcluster kine vcluster-chart crossplane function-patch-and-transform crossplane-files
  helm-controller sealed-secrets-controller sealed-secrets-chart)

# Flux modules whose CRDs (config/crd/bases) go into the local chart's crds/, each as
# "<tools module> <module>": the version is the one that tools module pins.
FLUX_CRD_MODULES=("flux github.com/fluxcd/source-controller" "flux github.com/fluxcd/kustomize-controller"
  "helm-controller github.com/fluxcd/helm-controller")

tools=("$@")
if [ ${#tools[@]} -eq 0 ]; then
  tools=("${ALL_TOOLS[@]}")
fi

# stamp_of prints a short hash of the given files, so a pin or content change rebuilds.
stamp_of() {
  cat "$@" | sha256sum | cut -c1-16
}

# required_version prints the version a go.mod requires of a module, in a require block or on a
# one-line require.
required_version() {
  awk -v m="$1" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$2"
}

# ldflags_of prints the link flags of every tool of a tools module.
ldflags_of() {
  local mod="$1" moddir="${ROOT}/hack/tools/$1" flags="-s -w"
  local kver kminor kcpver kcpkube kmajor gitver pkgvar
  case "${mod}" in
  kube)
    # Kubernetes' release builds stamp the version (hack/lib/version.sh); without it the API
    # server reports v0.0.0-master, which is what a connected cluster's inventory would show.
    # etcd and controller-gen do not link k8s.io/component-base/version, so the flags leave
    # them as they are.
    kver="$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "${moddir}/go.mod")"
    kminor="$(echo "${kver}" | cut -d. -f2)"
    flags="${flags} -X k8s.io/component-base/version.gitVersion=${kver} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kminor} -X k8s.io/component-base/version.gitTreeState=clean"
    ;;
  kcp)
    # kcp's release builds stamp "<Kubernetes version>+kcp-<kcp version>" (kcp's Makefile:
    # GIT_VERSION into k8s.io/component-base/version and k8s.io/client-go/pkg/version, for
    # every command it builds, the sdk's apigen included); /version reports it, and the manager
    # refuses a kcp whose release it cannot tell. The Kubernetes version is the one kcp's go.mod
    # requires (only its go.mod is read: the module need not be downloaded for apigen alone).
    kcpver="$(awk '$1 == "github.com/kcp-dev/kcp" { print $2; exit }' "${moddir}/go.mod")"
    kcpkube="$(cd "${moddir}" && go list -m -f '{{.GoMod}}' github.com/kcp-dev/kcp | xargs awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }')"
    if [ -z "${kcpver}" ] || [ -z "${kcpkube}" ]; then
      echo "cannot tell kcp's version (kcp '${kcpver}', its Kubernetes '${kcpkube}')" >&2
      exit 1
    fi
    kmajor="$(echo "${kcpkube}" | sed 's/^v\([0-9]*\).*/\1/')"
    kminor="$(echo "${kcpkube}" | cut -d. -f2)"
    gitver="${kcpkube}+kcp-${kcpver}"
    for pkgvar in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      flags="${flags} -X ${pkgvar}.gitVersion=${gitver} -X ${pkgvar}.gitMajor=${kmajor} -X ${pkgvar}.gitMinor=${kminor} -X ${pkgvar}.gitTreeState=clean"
    done
    ;;
  vcluster)
    # vCluster's release builds (.goreleaser.yaml in its module) stamp SyncerVersion with the
    # tag without its "v"; the telemetry key is left out (telemetry is off in every values file
    # the project renders, and nothing here may send it).
    kver="$(required_version github.com/loft-sh/vcluster "${moddir}/go.mod")"
    flags="${flags} -X github.com/loft-sh/vcluster/pkg/telemetry.SyncerVersion=${kver#v}"
    ;;
  kine)
    # kine's scripts/build stamps the release tag into pkg/version.
    kver="$(required_version github.com/k3s-io/kine "${moddir}/go.mod")"
    flags="${flags} -X github.com/k3s-io/kine/pkg/version.Version=${kver}"
    ;;
  sealed-secrets)
    # sealed-secrets' Makefile stamps the release tag (GO_LD_FLAGS = -X main.VERSION=$(VERSION));
    # the controller logs it at start and serves it on /healthz's version header.
    kver="$(required_version github.com/bitnami-labs/sealed-secrets "${moddir}/go.mod")"
    flags="${flags} -X main.VERSION=${kver}"
    ;;
  crossplane)
    # Crossplane's release builds stamp its version (nix/build.nix: internal/version.version);
    # without it `crossplane version` is empty and package dependency constraints on
    # Crossplane's version cannot be checked.
    kver="$(awk '$1 == "require" && $2 == "github.com/crossplane/crossplane/v2" { print $3; exit }
      $1 == "github.com/crossplane/crossplane/v2" { print $2; exit }' "${moddir}/go.mod")"
    if [ -z "${kver}" ]; then
      echo "cannot read Crossplane's version from ${moddir}/go.mod" >&2
      exit 1
    fi
    flags="${flags} -X github.com/crossplane/crossplane/v2/internal/version.version=${kver}"
    ;;
  esac
  echo "${flags}"
}

# goenv_of prints the environment a tools module builds with, one NAME=value a line.
goenv_of() {
  case "$1" in
  kine)
    # kine's sqlite driver is cgo (pkg/drivers/sqlite/sqlite.go, build tag cgo); its
    # scripts/build compiles sqlite with these options (dbstat answers kine's size query).
    printf '%s\n' CGO_ENABLED=1 "CGO_CFLAGS=-DSQLITE_ENABLE_DBSTAT_VTAB=1 -DSQLITE_USE_ALLOCA=1"
    ;;
  esac
}

# exe_name prints the file name `go build -o <dir>/` gives a package's binary: its last path
# element, or the one before a major version suffix (go.etcd.io/etcd/server/v3 -> server).
exe_name() {
  local base="${1##*/}" rest="${1%/*}"
  if [[ "${base}" =~ ^v[0-9]+$ ]]; then
    base="${rest##*/}"
  fi
  echo "${base}"
}

# flux_chart assembles _tools/charts/flux2 from charts/flux2 and the Flux modules' CRDs.
flux_chart() {
  local src="${ROOT}/charts/flux2" dest="${CHARTS}/flux2"
  local stamp="${CHARTS}/.flux2.stamp" want
  want="$(cd "${ROOT}" && find charts/flux2 hack/tools/flux/go.mod hack/tools/flux/go.sum \
    hack/tools/helm-controller/go.mod hack/tools/helm-controller/go.sum -type f | LC_ALL=C sort |
    while read -r f; do echo "${f}"; cat "${f}"; done | sha256sum | cut -c1-16)"
  if [ -f "${dest}/Chart.yaml" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ]; then
    return
  fi
  echo ">> assembling the local Flux chart into ${dest}"
  rm -rf "${dest}" "${stamp}"
  mkdir -p "${dest}/crds"
  cp -R "${src}/." "${dest}/"
  local entry tools mod dir
  for entry in "${FLUX_CRD_MODULES[@]}"; do
    read -r tools mod <<<"${entry}"
    dir="$(cd "${ROOT}/hack/tools/${tools}" && go mod download "${mod}" && go list -m -f '{{.Dir}}' "${mod}")"
    if [ -z "${dir}" ] || ! ls "${dir}"/config/crd/bases/*.yaml >/dev/null 2>&1; then
      echo "no CRDs found for ${mod} (module dir '${dir}')" >&2
      exit 1
    fi
    cp "${dir}"/config/crd/bases/*.yaml "${dest}/crds/"
  done
  chmod -R u+w "${dest}" # the module cache is read-only
  echo "${want}" >"${stamp}"
}

# vcluster_chart copies vCluster's own chart (the chart/ directory of the module the vcluster
# tools module pins) into _tools/charts/vcluster. The module's Chart.yaml carries the placeholder
# `version: 0.0.1 # version is auto-generated by release pipeline` (vCluster's release pipeline
# writes the tag there before it packages the chart), and the chart uses .Chart.Version as its
# default image tag: version and appVersion are set to the module's version, as the published
# chart of that release has them.
vcluster_chart() {
  local dest="${CHARTS}/vcluster" moddir="${ROOT}/hack/tools/vcluster"
  local stamp="${CHARTS}/.vcluster.stamp" want mod=github.com/loft-sh/vcluster ver dir
  want="$( (
    declare -f vcluster_chart # a change to this copy step copies again
    cat "${moddir}/go.mod" "${moddir}/go.sum"
  ) | sha256sum | cut -c1-16)"
  if [ -f "${dest}/Chart.yaml" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ]; then
    return
  fi
  echo ">> copying vCluster's chart into _tools/charts/vcluster"
  ver="$(required_version "${mod}" "${moddir}/go.mod")"
  dir="$(cd "${moddir}" && go mod download "${mod}" && go list -m -f '{{.Dir}}' "${mod}")"
  if [ -z "${ver}" ] || [ -z "${dir}" ] || [ ! -f "${dir}/chart/Chart.yaml" ]; then
    echo "no chart found for ${mod} '${ver}' (module dir '${dir}')" >&2
    exit 1
  fi
  rm -rf "${dest}" "${stamp}"
  mkdir -p "${CHARTS}"
  cp -R "${dir}/chart" "${dest}"
  chmod -R u+w "${dest}" # the module cache is read-only
  sed -i -e "s/^version: .*/version: ${ver#v}/" "${dest}/Chart.yaml"
  if grep -q '^appVersion:' "${dest}/Chart.yaml"; then
    sed -i -e "s/^appVersion: .*/appVersion: ${ver#v}/" "${dest}/Chart.yaml"
  else
    echo "appVersion: ${ver#v}" >>"${dest}/Chart.yaml"
  fi
  echo "${want}" >"${stamp}"
}

# sealed_secrets_chart copies the sealed-secrets chart (helm/sealed-secrets of the module the
# sealed-secrets tools module pins) into _tools/charts/sealed-secrets: the real chart the tests
# serve from a local chart repository and install with Flux's helm-controller. The chart is
# copied as it is (its Chart.yaml carries the chart's own version and appVersion: 2.17.6 and
# 0.32.1 in module v0.32.2, which is what the published chart of that release says).
sealed_secrets_chart() {
  local dest="${CHARTS}/sealed-secrets" stamp="${CHARTS}/.sealed-secrets.stamp" want dir
  want="$( (
    declare -f sealed_secrets_chart # a change to this copy step copies again
    cat "${ROOT}"/hack/tools/sealed-secrets/go.{mod,sum}
  ) | sha256sum | cut -c1-16)"
  if [ -f "${dest}/Chart.yaml" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ]; then
    return
  fi
  echo ">> copying the sealed-secrets chart into ${dest}"
  dir="$(module_dir sealed-secrets github.com/bitnami-labs/sealed-secrets helm/sealed-secrets/Chart.yaml)"
  rm -rf "${dest}" "${stamp}"
  mkdir -p "${CHARTS}"
  cp -R "${dir}/helm/sealed-secrets" "${dest}"
  chmod -R u+w "${dest}" # the module cache is read-only
  echo "${want}" >"${stamp}"
}

# crossplane_files copies Crossplane core's CRDs (cluster/crds of the module hack/tools/crossplane
# pins) into _tools/crossplane/crds and function-patch-and-transform's package metadata (package/
# of the module hack/tools/function-patch-and-transform pins) into
# _tools/crossplane/function-patch-and-transform.
crossplane_files() {
  local stamp="${CROSSPLANE_FILES}/.stamp" want dir
  want="$(stamp_of "${ROOT}"/hack/tools/crossplane/go.{mod,sum} "${ROOT}"/hack/tools/function-patch-and-transform/go.{mod,sum})"
  if [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ]; then
    return
  fi
  echo ">> copying Crossplane's CRDs and function-patch-and-transform's package into _tools/crossplane"
  rm -rf "${CROSSPLANE_FILES}"
  mkdir -p "${CROSSPLANE_FILES}"
  dir="$(module_dir crossplane github.com/crossplane/crossplane/v2 cluster/crds)"
  cp -R "${dir}/cluster/crds" "${CROSSPLANE_FILES}/crds"
  dir="$(module_dir function-patch-and-transform github.com/crossplane-contrib/function-patch-and-transform package/crossplane.yaml)"
  cp -R "${dir}/package" "${CROSSPLANE_FILES}/function-patch-and-transform"
  # The tag of the package built from it.
  (cd "${ROOT}/hack/tools/function-patch-and-transform" && go list -m -f '{{.Version}}' github.com/crossplane-contrib/function-patch-and-transform) \
    >"${CROSSPLANE_FILES}/function-patch-and-transform.version"
  chmod -R u+w "${CROSSPLANE_FILES}" # the module cache is read-only
  echo "${want}" >"${stamp}"
}

# module_dir prints the directory of module mod as the tools module hack/tools/<tools> pins it,
# downloading it, and fails unless it holds path.
module_dir() {
  local tools="$1" mod="$2" path="$3" dir
  dir="$(cd "${ROOT}/hack/tools/${tools}" && go mod download "${mod}" && go list -m -f '{{.Dir}}' "${mod}")"
  if [ -z "${dir}" ] || [ ! -e "${dir}/${path}" ]; then
    echo "no ${path} in ${mod} (module dir '${dir}')" >&2
    exit 1
  fi
  echo "${dir}"
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

# Which Go tools need building, by tools module, in the order they were asked for. A tool is
# built when its binary or its stamp is missing, or the stamp (the module's go.mod and go.sum
# and the link flags) differs.
modules=()
declare -A STALE=() LDFLAGS=() GOENV=() WANT=()
others=()
for tool in "${tools[@]}"; do
  case "${tool}" in
  flux-chart | terraform | vcluster-chart | crossplane-files | sealed-secrets-chart)
    others+=("${tool}")
    continue
    ;;
  esac
  if [ -z "${PKG[$tool]+x}" ]; then
    echo "unknown tool ${tool}" >&2
    exit 1
  fi
  read -r mod pkg <<<"${PKG[$tool]}"
  if [ -z "${LDFLAGS[$mod]+x}" ]; then
    moddir="${ROOT}/hack/tools/${mod}"
    LDFLAGS[$mod]="$(ldflags_of "${mod}")"
    GOENV[$mod]="$(goenv_of "${mod}")"
    WANT[$mod]="$(echo "$(stamp_of "${moddir}/go.mod" "${moddir}/go.sum") ${LDFLAGS[$mod]}${GOENV[$mod]:+ ${GOENV[$mod]}}" | sha256sum | cut -c1-16)"
  fi
  stamp="${BIN}/.${tool}.stamp"
  if [ -x "${BIN}/${tool}" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${WANT[$mod]}" ]; then
    continue
  fi
  if [ -z "${STALE[$mod]+x}" ]; then
    modules+=("${mod}")
    STALE[$mod]=""
  fi
  case " ${STALE[$mod]} " in *" ${tool} "*) continue ;; esac
  STALE[$mod]="${STALE[$mod]:+${STALE[$mod]} }${tool}"
done

pkgs_of() {
  local tool mod pkg out=()
  for tool in ${STALE[$1]}; do
    read -r mod pkg <<<"${PKG[$tool]}"
    out+=("${pkg}")
  done
  echo "${out[@]}"
}

# Download the later modules' dependencies while the first one builds.
prefetch_pids=()
stop_prefetch() {
  local pid
  for pid in "${prefetch_pids[@]}"; do
    kill "${pid}" 2>/dev/null || true
  done
}
trap stop_prefetch EXIT
for mod in "${modules[@]:1}"; do
  # shellcheck disable=SC2046 # the package paths are words
  (cd "${ROOT}/hack/tools/${mod}" && exec go list -deps $(pkgs_of "${mod}") >/dev/null 2>&1) &
  prefetch_pids+=($!)
done

for mod in "${modules[@]}"; do
  moddir="${ROOT}/hack/tools/${mod}"
  out="${BIN}/.build-${mod}"
  echo ">> building ${STALE[$mod]} (hack/tools/${mod}) into _tools/bin; the first build takes minutes"
  start=${SECONDS}
  rm -rf "${out}"
  mkdir -p "${out}"
  genv=()
  while IFS= read -r line; do
    if [ -n "${line}" ]; then genv+=("${line}"); fi
  done <<<"${GOENV[$mod]}"
  # shellcheck disable=SC2046 # the package paths are words
  (cd "${moddir}" && env "${genv[@]}" go build -ldflags "${LDFLAGS[$mod]}" -o "${out}/" $(pkgs_of "${mod}"))
  for tool in ${STALE[$mod]}; do
    read -r _ pkg <<<"${PKG[$tool]}"
    mv -f "${out}/$(exe_name "${pkg}")" "${BIN}/${tool}"
    echo "${WANT[$mod]}" >"${BIN}/.${tool}.stamp"
  done
  rmdir "${out}"
  echo ">> built ${STALE[$mod]} in $((SECONDS - start))s"
done

for tool in "${others[@]}"; do
  case "${tool}" in
  flux-chart) flux_chart ;;
  terraform) terraform_tool ;;
  vcluster-chart) vcluster_chart ;;
  crossplane-files) crossplane_files ;;
  sealed-secrets-chart) sealed_secrets_chart ;;
  esac
done
