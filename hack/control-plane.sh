#!/usr/bin/env bash
# Builds kube-apiserver and etcd from Go modules into a cache outside the
# checkout and prints the directory (for KUBEBUILDER_ASSETS). A cache entry is
# reused while the tools modules that produced it are unchanged.
#
#   hack/control-plane.sh            ensure the binaries, print their directory
#   hack/control-plane.sh BIN...     also build other Kubernetes commands
#                                    (kubelet, kubeadm, ...) into the same place
set -euo pipefail

KUBE_VERSION=v1.36.3  # etcd's version is hack/tools/etcd/go.mod's
here=$(cd "$(dirname "$0")" && pwd)
cache=${WIDGETHUB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/widgethub}
dest=$cache/k8s/$KUBE_VERSION
mkdir -p "$dest"
# One build at a time: make test, a bench and a second shell may all ask at
# once, and two builds into the same .tmp file fail each other.
exec 9>"$dest/.lock"
flock 9

# A binary's stamp is the hash of what makes it: the tools module it is
# built from, its link flags, this script and the Go toolchain; a change in
# any rebuilds it.
stamp_of() { # stamp_of MODULE_DIR LDFLAGS
  { cat "$1"/go.mod "$1"/go.sum "$here/control-plane.sh"; echo "$2"; (cd "$1" && go version); } | sha256sum | cut -c1-16
}

kube_ldflags() {
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local x
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    x+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=widgethub"
    x+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "-s -w$x"
}

build() { # build NAME MODULE_DIR PACKAGE [LDFLAGS]
  local name=$1 dir=$2 pkg=$3 ldflags=${4:--s -w}
  local stamp; stamp=$(stamp_of "$dir" "$ldflags")
  if [ -x "$dest/$name" ] && [ "$(cat "$dest/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  echo "building $name $pkg from source (first time takes minutes)..." >&2
  local start=$SECONDS
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dest/$name.tmp" "$pkg")
  mv "$dest/$name.tmp" "$dest/$name"
  echo "$stamp" > "$dest/.$name.stamp"
  echo "built $name in $((SECONDS - start))s" >&2
}

# kube-apiserver reports the version it was built as: one that says another
# fails here, not in the tests.
check_version() {
  local got; got=$("$dest/kube-apiserver" --version 2>/dev/null || true)
  [ "$got" = "Kubernetes $KUBE_VERSION" ] || { echo "kube-apiserver --version says '$got', want 'Kubernetes $KUBE_VERSION'" >&2; return 1; }
}

build etcd "$here/tools/etcd" go.etcd.io/etcd/server/v3 \
  "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=widgethub"
build kube-apiserver "$here/tools/kubernetes" k8s.io/kubernetes/cmd/kube-apiserver "$(kube_ldflags)"
check_version
for extra in "$@"; do
  build "$extra" "$here/tools/kubernetes" "k8s.io/kubernetes/cmd/$extra" "$(kube_ldflags)"
done
echo "$dest"
