# Kind node image built offline (e2e/nodeimage/README.md). Included from the
# top-level Makefile, which defines BIN and GO.

KIND_NODE_IMAGE ?= widgethub/kind-node:v1.36.3
KIND ?= $(BIN)/kind

##@ Kind

.PHONY: kind-node-image
kind-node-image: ## Build the kind node image (only when its inputs changed).
	NODE_IMAGE=$(KIND_NODE_IMAGE) nice -n 10 e2e/nodeimage/build.sh

.PHONY: kind-host
kind-host: ## Prepare this Docker host for kind nodes (root; inotify limits, runc wrapper).
	e2e/nodeimage/docker-host-setup.sh

$(KIND): hack/tools/kind/go.mod hack/tools/kind/go.sum
	cd hack/tools/kind && GOBIN=$(BIN) $(GO) install sigs.k8s.io/kind

.PHONY: kind-probe
kind-probe: kind-node-image kind-host $(KIND) ## Start a one-node cluster from the image, run a pause pod, delete it.
	e2e/nodeimage/probe.sh $(KIND) $(KIND_NODE_IMAGE)
