# widgethub — multi-cluster Widget operator.
# Run `make help` for the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

IMG ?= widgethub/widgethub:dev
GO ?= go
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
# Directory of kube-apiserver and etcd built from source (see hack/control-plane.sh).
ASSETS = $(shell hack/control-plane.sh)
# The Helm CLI built from its Go module (see hack/helm.sh), built once.
HELM = $(shell hack/helm.sh)
# Flags of every test run of make test: the race detector, and -count=1 because
# Go's test cache does not see the files that tests read through a subprocess
# (the chart through helm, config/ through kustomize, hack/*.sh), so a cached
# "ok" could hide a failure. -parallel 8: the tests that call t.Parallel
# mostly wait on the engine's clocks, and go test would run only GOMAXPROCS
# (2 here) of them at a time. TEST_FLAGS adds flags; it cannot drop these.
TEST_FLAGS ?=
GO_TEST_FLAGS = -race -count=1 -timeout 20m -parallel 8 $(TEST_FLAGS)
# Runs go test -json: fails when a test named with -want did not run, or when
# any test skipped while CI=true; prints each package's time (hack/gotest).
GOTEST := $(BIN)/gotest
# The packages whose tests take longest (100-165 s each in a warm make test),
# named first: go test starts packages in the order given, two at a time on 2
# CPUs, and providers/members, last in ./...'s order, ran on alone at the end.
SLOW_TEST_PACKAGES := ./providers/members ./cmd/kubectl-widgethub/plugin ./cmd/widgethub/app ./clusters
# The scenarios, tests that need real time (a token's expiry with the API
# server's leeway, replicas as processes, failover, latency compared without
# the race detector), are in test files tagged `scenarios` (hack/scenarios.sh
# lists them): make test-scenarios runs them, make test does not build them.
# Those that compare latencies run each on their own; the others side by side.
LATENCY_SCENARIOS := ./cmd/widgethub/app ./cmd/widgethub-bench
GOOS ?= linux
GOARCH ?= $(shell $(GO) env GOARCH)
# Flags of cmd/widgethub-bench, e.g. BENCH_FLAGS="-flood 2000 -member-qps 500".
BENCH_FLAGS ?=

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRDs and RBAC under config/ (and copy the CRDs into the chart).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	# The chart's CRDs are copies (Helm installs crds/ as they are).
	rm -f charts/widgethub/crds/*.yaml && cp config/crd/bases/*.yaml charts/widgethub/crds/
	$(CONTROLLER_GEN) rbac:roleName=widgethub paths=./providers/... paths=./cmd/widgethub/app/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=widgethub-member paths=./reconcilers/... paths=./clusters/... output:rbac:artifacts:config=config/member-rbac

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: fmt
fmt: ## go fmt.
	$(GO) fmt ./...

.PHONY: vet
vet: ## go vet, the e2e tests (build tag e2e) included.
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...

.PHONY: lint
lint: vet ## gofmt check and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: verify
verify: generate manifests ## Fail when generated code or manifests (the chart's CRDs too) are stale, a top-level package depends on internal/, kubectl widgethub links the hub, or an import points up the data flow.
	@git diff --exit-code -- api config charts/widgethub/crds || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts/widgethub/crds)" || { git status --porcelain -- api config charts/widgethub/crds; echo "untracked generated files"; exit 1; }
	@GO="$(GO)" hack/verify-internal-imports.sh
	@GO="$(GO)" hack/verify-plugin-deps.sh
	@GO="$(GO)" hack/verify-layers.sh

.PHONY: control-plane
control-plane: ## Build kube-apiserver and etcd from source into the cache (once).
	@hack/control-plane.sh

.PHONY: helm
helm: ## Build the Helm CLI from its Go module into the cache (once) and print its path.
	@hack/helm.sh

.PHONY: test
test: lint verify $(GOTEST) ## Run every test but the scenarios against real API servers built from source.
	@case " $(TEST_FLAGS) " in *race*) echo "TEST_FLAGS may add flags, not change -race"; exit 2;; esac
	@# Built here, not in $$(shell ...), so that a failed build fails the target.
	@assets=$$(hack/control-plane.sh); helm=$$(hack/helm.sh); pkgs=$$($(GO) list $(SLOW_TEST_PACKAGES) ./...); \
	run() { echo "+ $$*"; KUBEBUILDER_ASSETS="$$assets" HELM="$$helm" "$$@"; }; \
	run $(GOTEST) -- $(GO_TEST_FLAGS) $$pkgs; \
	: "The shared queue's Go benchmarks, at a few iterations, so that they keep building and running."; \
	run $(GO) test -count=1 -run '^$$' -bench . -benchtime 100x ./reconcilers/controller/fairqueue/

.PHONY: test-scenarios
test-scenarios: $(GOTEST) ## Run the scenarios (hack/scenarios.sh) without the race detector: the latency ones each on their own, the others side by side.
	@assets=$$(hack/control-plane.sh); helm=$$(hack/helm.sh); scenarios=$$(hack/scenarios.sh); \
	test -n "$$scenarios" || { echo "hack/scenarios.sh found no scenario"; exit 1; }; \
	run() { echo "+ $$*"; KUBEBUILDER_ASSETS="$$assets" HELM="$$helm" "$$@"; }; \
	flags="-tags scenarios -count=1 -timeout 20m $(TEST_FLAGS)"; failed=0; together=(); want=(); \
	while read -r pkg tests; do \
	  case " $(LATENCY_SCENARIOS) " in \
	  *" $$pkg "*) run $(GOTEST) -want "$$tests" -- $$flags "$$pkg" || failed=1 ;; \
	  *) together+=("$$pkg"); want+=("$$tests") ;; \
	  esac; \
	done <<<"$$scenarios"; \
	if [ $${#together[@]} -gt 0 ]; then \
	  run $(GOTEST) -want "$$(IFS=,; echo "$${want[*]}")" -- $$flags "$${together[@]}" || failed=1; \
	fi; \
	exit $$failed

.PHONY: gotest
gotest: $(GOTEST) ## Build hack/gotest, the go test -json runner that make test uses.

$(GOTEST): hack/gotest/main.go
	$(GO) build -o $(GOTEST) ./hack/gotest

##@ Performance

.PHONY: bench
bench: ## Measure widgethub against multicluster-runtime's kubeconfig provider and print one table (BENCH_FLAGS).
	$(GO) build -o $(BIN)/widgethub-bench ./cmd/widgethub-bench
	KUBEBUILDER_ASSETS="$(ASSETS)" $(BIN)/widgethub-bench $(BENCH_FLAGS)

.PHONY: bench-cache
bench-cache: ## Measure the hub's heap per cached Widget and Deployment, whole and trimmed (docs/performance.md).
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -count=1 -run '^$$' -bench MemberCacheHeap -benchtime 1x ./reconcilers/widget/

.PHONY: bench-quick
bench-quick: ## The benchmark at small sizes, both placements, as CI runs it (see docs/performance.md).
	$(MAKE) bench BENCH_FLAGS="-quick $(BENCH_FLAGS)"

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/.
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/widgethub ./cmd/widgethub

.PHONY: build-plugin
build-plugin: ## Build the kubectl plugin into bin/ (put bin/ on PATH for `kubectl widgethub`).
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/kubectl-widgethub ./cmd/kubectl-widgethub

.PHONY: release
release: ## Write release VERSION (e.g. v0.2.0) into dist/: install.yaml, the chart, the plugin archives, checksums.txt; and the krew manifest plugins/widgethub.yaml.
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=v1.2.3 [IMAGE_REPO=...]"; exit 2; }
	hack/release.sh $(VERSION)

.PHONY: run
run: ## Run the manager against the current kubeconfig's hub.
	$(GO) run ./cmd/widgethub

.PHONY: docker-build
docker-build: ## Build the manager image IMG: a static binary FROM scratch, user 65532.
	CGO_ENABLED=0 GOOS=$(GOOS) GOARCH=$(GOARCH) $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/image/widgethub ./cmd/widgethub
	docker build -t $(IMG) -f Dockerfile $(BIN)/image

.PHONY: demo
demo: ## A local hub and two members with the manager, the plugin and sample Widgets (Ctrl+C ends it).
	@assets="$$(hack/control-plane.sh)" && KUBEBUILDER_ASSETS="$$assets" $(GO) run ./hack/demo $(DEMO_FLAGS)

##@ Deployment (current kubeconfig context)

.PHONY: install
install: ## Install the CRDs into the cluster.
	kubectl apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Delete the CRDs, and with them every MemberCluster and Widget of the cluster.
	kubectl delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: ## Install widgethub on the hub with the manager image IMG.
	hack/render.sh $(IMG) | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove widgethub from the hub, registration Secrets and CRDs included.
	hack/render.sh $(IMG) | kubectl delete --ignore-not-found -f -

include e2e/nodeimage/nodeimage.mk
include e2e/e2e.mk

$(CONTROLLER_GEN): hack/tools/codegen/go.mod hack/tools/codegen/go.sum
	cd hack/tools/codegen && GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen
