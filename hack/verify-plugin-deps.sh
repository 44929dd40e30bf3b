#!/usr/bin/env bash
# Fails when kubectl widgethub, a tool for laptops, links the hub: the engine
# and the sources (providers/...), the hub's per-member type (clusters), the
# reconcilers, the test fleet (internal/...), multicluster-runtime or
# controller-runtime (but the scheme builder the API types register with),
# or client-go's typed clientsets, informers, listers and discovery, which
# link every API group of k8s.io/api through client-go's scheme. The plugin
# reads and writes through client-go's dynamic client (its kube type) the
# few API groups its own scheme names. It shares with the hub only the
# registration contract (api/registration), the API types (api/v1alpha1),
# the member manifests (config) and the checks of a kubeconfig
# (clusters/connect). Only non-test dependencies count (go list -deps
# without -test).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

module=$($GO list -m)
plugin=./cmd/kubectl-widgethub
forbidden="^(${module}/(providers|reconcilers|internal)(/|$)|${module}/clusters$|sigs\.k8s\.io/multicluster-runtime(/|$)|sigs\.k8s\.io/controller-runtime(/|$)|k8s\.io/client-go/(kubernetes|informers|listers|discovery)(/|$))"
allowed='^sigs\.k8s\.io/controller-runtime/pkg/scheme$'

status=0
contract=${module}/api/registration
imports=$($GO list -f '{{join .Imports "\n"}}' "$contract" | grep -Ev '^k8s\.io/(api|apimachinery)/' || true)
if [[ -n $imports ]]; then
	echo "$contract must import only k8s.io/api and k8s.io/apimachinery; it imports:" >&2
	sed 's/^/  /' <<<"$imports" >&2
	status=1
fi

deps=$($GO list -deps "$plugin")
linked=$(grep -E "$forbidden" <<<"$deps" | grep -Ev "$allowed" || true)
if [[ -n $linked ]]; then
	echo "$plugin links what only the hub needs:" >&2
	sed 's/^/  /' <<<"$linked" >&2
	echo "share it through ${contract} (or a package below the engine), and read and write through the plugin's kube client, instead" >&2
	status=1
fi
exit $status
