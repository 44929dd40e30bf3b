# `make e2e`: widgethub end to end on kind clusters (e2e/README.md). Included
# from the top-level Makefile after e2e/nodeimage/nodeimage.mk.

# The node image of the clusters; another (e.g. kindest/node:v1.36.x on a
# machine that can pull it) skips building ours.
E2E_NODE_IMAGE ?= $(KIND_NODE_IMAGE)
E2E_TIMEOUT ?= 40m
E2E_FLAGS ?= -v
E2E_KEEP ?=

.PHONY: e2e
# Through hack/gotest, as make test: a skipped test fails the run in CI.
e2e: $(if $(filter $(KIND_NODE_IMAGE),$(E2E_NODE_IMAGE)),kind-node-image) kind-host $(KIND) helm $(GOTEST) ## Hub + two members on kind, operator deployed (config/default, then the Helm chart), full scenario (E2E_KEEP=1 keeps the clusters).
	E2E_NODE_IMAGE=$(E2E_NODE_IMAGE) E2E_KEEP=$(E2E_KEEP) HELM="$(HELM)" PATH="$(BIN):$$PATH" \
	  $(GOTEST) -- -tags e2e -count=1 -timeout $(E2E_TIMEOUT) $(E2E_FLAGS) ./e2e/...
