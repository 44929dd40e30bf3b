#!/usr/bin/env bash
# Prints the hub install (config/default) with IMAGE as the manager's image:
#   hack/render.sh IMAGE | kubectl apply --server-side -f -
# kustomize wants an overlay for that, and an overlay may not name its base by
# an absolute path, so this one lives in a temporary directory and points back.
set -euo pipefail
img=${1:?usage: hack/render.sh IMAGE}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/kustomization.yaml" <<EOF
resources:
- $(realpath --relative-to="$tmp" "$root/config/default")
patches:
- target: {kind: Deployment, name: widgethub}
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/image
      value: "$img"
EOF
kubectl kustomize "$tmp"
