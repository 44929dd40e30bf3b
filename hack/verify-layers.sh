#!/usr/bin/env bash
# Fails when a package imports one above it in the data flow
# (docs/code-walkthrough.md): the layers below are listed from the top, and a
# package may import (directly; tests aside) only packages of a lower layer.
# The commands, hack/, e2e/ and internal/ (test fleet and kits, which
# verify-internal-imports.sh keeps out of the operator) sit on top and are
# not checked; every other package of the module must be in a layer, so that
# a new one is placed on purpose.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
module=$($GO list -m)

layers=(
  "providers/kubeconfig providers/clusterprofile" # the registration sources
  "providers/members"                             # the engine
  "providers/sharding"                            # ownership through Leases
  "clusters"                                      # one member's cache and client
  "clusters/connect"                              # how to reach a member, untrusted
  "reconcilers/controller"                        # the multi-cluster controller
  "reconcilers/controller/fairqueue"              # the shared fair queue
  "reconcilers/widget"                            # Widget -> Deployment
  "api/registration api/v1alpha1 config"          # the contract, the API, the manifests
)
declare -A rank
for i in "${!layers[@]}"; do
  for pkg in ${layers[$i]}; do rank[$module/$pkg]=$i; done
done

status=0
while read -r pkg imports; do
  rel=${pkg#"$module"/}
  case $rel in cmd/* | hack/* | e2e* | internal/* | charts | plugins | config/prometheus) continue ;; esac
  if [[ -z ${rank[$pkg]+set} ]]; then
    echo "$rel is in no layer of hack/verify-layers.sh: place it there"
    status=1
    continue
  fi
  for imp in $imports; do
    [[ $imp == "$module"/* ]] || continue
    if [[ -z ${rank[$imp]+set} ]] || ((rank[$imp] <= rank[$pkg])); then
      echo "$rel imports ${imp#"$module"/}, which is not below it in the data flow"
      status=1
    fi
  done
done < <($GO list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)
exit $status
