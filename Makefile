# KubeOpera on kcp. `make run` starts the local environment; `make test` runs every test.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

TOOLS_BIN := $(CURDIR)/_tools/bin
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen
APIGEN := $(TOOLS_BIN)/apigen
GO_TEST_FLAGS ?= -count=1
# Test packages run four at a time: most of their time is spent waiting on the real servers they
# start (on 2 cores, two at a time kept the machine about half idle).
GO_TEST_PARALLEL ?= 4

.PHONY: all
all: build

.PHONY: tools
tools: ## Build kcp (with its front-proxy, cache server and apigen), kube-apiserver, etcd, kube-controller-manager, kubectl, controller-gen, Flux's source-, kustomize- and helm-controller, the sealed-secrets controller, gotestsum, vCluster, kine, Crossplane core and function-patch-and-transform into _tools/bin, the local Flux chart, vCluster's and sealed-secrets' own charts into _tools/charts, and Crossplane's CRDs and the function's package metadata into _tools/crossplane (skips what is built).
	hack/build-tools.sh

$(CONTROLLER_GEN):
	hack/build-tools.sh controller-gen
$(APIGEN):
	hack/build-tools.sh apigen

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy functions.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...

# The exported groups' CRDs go to config/crd/bases, which apigen turns into APIResourceSchemas;
# platform-only groups (fleet.kubeopera.io: RegisteredCluster) go to config/crd/platform, never
# exported to tenants. A new group is listed in one of the two.
EXPORTED_APIS := {./apis/kubeopera/...,./apis/platform/...}
PLATFORM_APIS := ./apis/fleet/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs into config/crd/bases (exported) and config/crd/platform (platform workspace only).
	$(CONTROLLER_GEN) crd paths="$(EXPORTED_APIS)" output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) crd paths="$(PLATFORM_APIS)" output:crd:artifacts:config=config/crd/platform

.PHONY: apiexports
apiexports: $(APIGEN) manifests ## Generate APIResourceSchemas and APIExports into apiexports/resources; copy the platform workspace's own CRDs into apiexports/catalog and apiexports/platform.
	$(APIGEN) --input-dir config/crd/bases --output-dir apiexports/resources 2>/dev/null
	go run ./hack/gen-apiexports --dir apiexports/resources
	mkdir -p apiexports/catalog && cp config/crd/bases/platform.edgeconnect.eu_providermachineflavors.yaml apiexports/catalog/
	mkdir -p apiexports/platform && cp config/crd/platform/*.yaml apiexports/platform/

.PHONY: verify
verify: generate manifests apiexports lint ## Fail when generated files are stale or code is not gofmt/vet clean.
	@if [ -n "$$(git status --porcelain -- apis config apiexports)" ]; then \
		git status --porcelain -- apis config apiexports; \
		echo "generated files are stale: run 'make generate manifests apiexports' and commit"; exit 1; fi

.PHONY: lint
lint: ## gofmt and go vet.
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

ECHARTS := internal/overview/static/vendor/echarts.min.js

# npm ci only when web/node_modules/echarts is missing or older than the lockfile.
web/node_modules/echarts/package.json: web/package-lock.json web/package.json
	npm ci --prefix web --no-audit --no-fund
	touch $@

$(ECHARTS): web/node_modules/echarts/package.json
	mkdir -p $(@D)
	cp web/node_modules/echarts/dist/echarts.min.js $@

.PHONY: ui
ui: $(ECHARTS) ## Install the fleet overview's chart library (echarts, pinned in web/package-lock.json) into internal/overview/static/vendor.

.PHONY: build
build: ui ## Build the binaries into bin/.
	go build -o bin/ ./cmd/...

.PHONY: chromium
chromium: ## Install Debian's chromium (apt-get) when it is not on PATH: the browser tests drive it.
	hack/ensure-chromium.sh

# go test -json through gotestsum: a line per package, failures' output, then every skipped test
# with its reason, the 15 slowest tests and gotestsum's closing line; events in _artifacts/go-test.json.
# The project's commands (cmd/...), built once in one go build for the whole run into TEST_BIN:
# the e2e suite, the bench and the provisioning suites run them from there ($KUBEOPERA_TEST_BIN,
# test/framework.Command) instead of each test binary building its own.
TEST_BIN := $(CURDIR)/_artifacts/bin

.PHONY: test-bin
test-bin: ui
	go build -o $(TEST_BIN)/ ./cmd/...

# go test starts the packages' test runs in the order it is given them: the longest first, so they
# do not start last (test/e2e, 8 of the run's 14 minutes, used to start as the 60th package).
TEST_FIRST := ./test/e2e ./test/e2e/localenv ./controllers/hostcluster ./controllers/kubernetescluster ./controllers/tenant

.PHONY: test
test: tools ui chromium test-bin ## Run every test, including the e2e suite on real kcp and kube-apiservers.
	KUBEOPERA_TEST_BIN=$(TEST_BIN) hack/test.sh $(GO_TEST_FLAGS) -p $(GO_TEST_PARALLEL) -timeout 30m $(TEST_FIRST) ./...

.PHONY: test-unit
test-unit: ## Only the tests that need no server (go test -short, no e2e): a fast loop; make test runs everything.
	go test -short $(GO_TEST_FLAGS) $$(go list ./... | grep -v /test/e2e)

.PHONY: bench
bench: tools test-bin ## Measure the manager on real kcp at BENCH_WORKSPACES (default 10,100,500) tenant workspaces; writes bench/results/latest.json and latest.png.
	KUBEOPERA_TEST_BIN=$(TEST_BIN) BENCH_WORKSPACES="$${BENCH_WORKSPACES:-10,100,500}" go test -run '^$$' -bench . -benchtime=1x -timeout 120m ./test/bench/

.PHONY: run
run: tools build ## Start kcp, a backend apiserver, the platform and demo workspaces and the manager.
	bin/devenv

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' Makefile | sed 's/:.*## /\t/'
