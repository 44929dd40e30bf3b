#!/usr/bin/env bash
# Writes a release's artifacts (make release VERSION=v1.2.3):
#   DIST/install.yaml                         config/default, image pinned to IMAGE_REPO:VERSION
#   DIST/widgethub-X.Y.Z.tgz                  the Helm chart, version X.Y.Z, appVersion VERSION
#   DIST/kubectl-widgethub_VERSION_OS_ARCH.tar.gz   the plugin (linux, darwin; amd64, arm64)
#   DIST/checksums.txt                        sha256 of each of those
#   PLUGINS/widgethub.yaml                    the krew manifest, from plugins/widgethub.yaml.tmpl
# Usage: hack/release.sh VERSION [DIST [PLUGINS]]
# (defaults dist/ and plugins/; IMAGE_REPO and RELEASE_URL may be set).
set -euo pipefail

version=${1:?usage: hack/release.sh VERSION [DIST [PLUGINS]]}
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "VERSION must be a semantic version with a v, e.g. v0.2.0 (got $version)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
dist=$(mkdir -p "${2:-$root/dist}" && cd "${2:-$root/dist}" && pwd)
plugins=$(mkdir -p "${3:-$root/plugins}" && cd "${3:-$root/plugins}" && pwd)
image_repo=${IMAGE_REPO:-widgethub/widgethub}
release_url=${RELEASE_URL:-https://github.com/widgethub/widgethub/releases/download/$version}
platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)

rm -f "$dist"/install.yaml "$dist"/widgethub-*.tgz "$dist"/kubectl-widgethub_*.tar.gz "$dist"/checksums.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$root/hack/render.sh" "$image_repo:$version" > "$dist/install.yaml"

helm=$("$root/hack/helm.sh")
HELM_CONFIG_HOME=$work/helm HELM_CACHE_HOME=$work/helm HELM_DATA_HOME=$work/helm \
  "$helm" package "$root/charts/widgethub" --version "${version#v}" --app-version "$version" \
  --destination "$dist" >/dev/null

# Archives built the same way every time: sorted, no owners, no times.
platform_yaml=""
for p in "${platforms[@]}"; do
  os=${p%/*} arch=${p#*/}
  dir=$work/$os-$arch
  mkdir -p "$dir"
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w" \
    -o "$dir/kubectl-widgethub" ./cmd/kubectl-widgethub)
  files=(kubectl-widgethub)
  if [ -f "$root/LICENSE" ]; then cp "$root/LICENSE" "$dir/"; files+=(LICENSE); fi
  archive=kubectl-widgethub_${version}_${os}_${arch}.tar.gz
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir" -cf - "${files[@]}" \
    | gzip -n -9 > "$dist/$archive"
  sum=$(sha256sum "$dist/$archive" | cut -d' ' -f1)
  platform_yaml+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $release_url/$archive
    sha256: $sum
    bin: kubectl-widgethub
    files:
$(for f in "${files[@]}"; do printf '    - from: %s\n      to: .\n' "$f"; done)
"
done

(cd "$dist" && sha256sum install.yaml widgethub-*.tgz kubectl-widgethub_*.tar.gz > checksums.txt)

awk -v version="$version" -v platforms="${platform_yaml%$'\n'}" '
  /^# / && !body { next }        # the template'"'"'s own comment
  { body = 1 }
  /@PLATFORMS@/ { print platforms; next }
  { gsub(/@VERSION@/, version); print }
' "$root/plugins/widgethub.yaml.tmpl" > "$plugins/widgethub.yaml"

echo "release $version: $dist, krew manifest $plugins/widgethub.yaml" >&2
