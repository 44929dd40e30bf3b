#!/usr/bin/env bash
# Builds the Helm CLI from its Go module (hack/tools/helm) into a cache
# outside the checkout, once, and prints the binary's path:
#   helm=$(hack/helm.sh) && "$helm" lint charts/widgethub
# The binary is rebuilt when hack/tools/helm's go.mod or go.sum changes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=$here/tools/helm
version=$(cd "$dir" && go list -m -f '{{.Version}}' helm.sh/helm/v3)
cache=${WIDGETHUB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/widgethub}
dest=$cache/helm/$version
stamp=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)
mkdir -p "$dest"
# One build at a time (see hack/control-plane.sh).
exec 9>"$dest/.lock"
flock 9

if [ ! -x "$dest/helm" ] || [ "$(cat "$dest/.helm.stamp" 2>/dev/null)" != "$stamp" ]; then
  mkdir -p "$dest"
  echo "building helm $version from source (first time takes minutes)..." >&2
  start=$SECONDS
  # Helm's own Makefile sets these: its version, and the Kubernetes version
  # that lint and template assume (that of the client-go it is built with).
  kube=$(cd "$dir" && go list -m -f '{{.Version}}' k8s.io/client-go)
  kube_minor=$(echo "$kube" | cut -d. -f2)
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
  ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kube_minor"
  done
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dest/helm.tmp" helm.sh/helm/v3/cmd/helm)
  mv "$dest/helm.tmp" "$dest/helm"
  echo "$stamp" > "$dest/.helm.stamp"
  echo "built helm in $((SECONDS - start))s" >&2
fi
echo "$dest/helm"
