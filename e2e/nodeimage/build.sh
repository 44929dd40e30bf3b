#!/usr/bin/env bash
# Builds the kind node image widgethub/kind-node:v1.36.3 offline: a Debian
# root filesystem from Debian's packages, Kubernetes built from its Go
# modules, and the control-plane images made locally and preloaded into the
# node's containerd. Rebuilds only when an input changed (the hash of the
# inputs is stored as an image label); FORCE=1 rebuilds anyway.
#
#   e2e/nodeimage/build.sh          (or: make kind-node-image)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

KUBE_VERSION=v1.36.3
ETCD_TAG=3.6.8-0          # kubeadm v1.36's etcd image tag
PAUSE_TAGS=(3.10 3.10.2)  # containerd's sandbox image and kubeadm's default
CRICTL_VERSION=1.36.0
COREDNS_TAG=v1.14.2       # kubeadm v1.36's CoreDNS image tag
SUITE=bookworm
IMAGE=${NODE_IMAGE:-widgethub/kind-node:$KUBE_VERSION}
LABEL=io.widgethub.nodeimage.inputs
cache=${WIDGETHUB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/widgethub}/nodeimage
mkdir -p "$cache"
export DOCKER_BUILDKIT=0

say() { echo "nodeimage: $*" >&2; }
hash_of() { sha256sum | cut -c1-16; }

# The Debian mirror apt is configured with on this machine (one-line or
# deb822 sources), unless DEBIAN_MIRROR is set.
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v s="$SUITE" '$1 == "deb" { for (i = 2; i < NF; i++) if ($(i+1) == s && $i !~ /^\[/) { print $i; exit } }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$SUITE" '
      /^URIs:/   { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) found = uri }
      END        { if (found) print found }' "$f"
  done
}

# --- binaries ---------------------------------------------------------------

# kubelet & co. and etcd, cached by hack/control-plane.sh.
bindir=$("$root/hack/control-plane.sh" kubelet kubeadm kubectl \
  kube-controller-manager kube-scheduler kube-proxy | tail -n 1)

# crictl from hack/tools/crictl, stamped like control-plane.sh's binaries.
crictl_stamp=$(cat "$root/hack/tools/crictl/go.mod" "$root/hack/tools/crictl/go.sum" | hash_of)
if [ "$(cat "$bindir/.crictl.stamp" 2>/dev/null)" != "$crictl_stamp" ] || [ ! -x "$bindir/crictl" ]; then
  say "building crictl"
  (cd "$root/hack/tools/crictl" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    -o "$bindir/crictl" sigs.k8s.io/cri-tools/cmd/crictl)
  echo "$crictl_stamp" >"$bindir/.crictl.stamp"
fi

# CoreDNS from hack/tools/coredns (kubeadm deploys it; pods resolve through it).
coredns_stamp=$(cat "$root/hack/tools/coredns/go.mod" "$root/hack/tools/coredns/go.sum" | hash_of)
if [ "$(cat "$bindir/.coredns.stamp" 2>/dev/null)" != "$coredns_stamp" ] || [ ! -x "$bindir/coredns" ]; then
  say "building coredns (takes minutes the first time)"
  (cd "$root/hack/tools/coredns" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
    -o "$bindir/coredns" github.com/coredns/coredns)
  echo "$coredns_stamp" >"$bindir/.coredns.stamp"
fi

# pause, a static C program shipped in the Kubernetes module.
kube_src=$(cd "$root/hack/tools/kubernetes" && go mod download -json k8s.io/kubernetes |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
pause_c=$kube_src/build/pause/linux/pause.c
pause_stamp=$( (cat "$pause_c"; gcc --version | head -n 1) | hash_of)
if [ "$(cat "$bindir/.pause.stamp" 2>/dev/null)" != "$pause_stamp" ] || [ ! -x "$bindir/pause" ]; then
  say "building pause"
  gcc -Os -Wall -Werror -static -DVERSION="v${PAUSE_TAGS[-1]}-widgethub" -o "$bindir/pause" "$pause_c"
  strip "$bindir/pause"
  echo "$pause_stamp" >"$bindir/.pause.stamp"
fi

# --- base root filesystem ------------------------------------------------------

packages=$(grep -v '^#' "$here/packages" | xargs | tr ' ' ,)

make_base() { # make_base TAG: debootstrap, slim down, docker import
  local tmp=$cache/base-rootfs mirror
  mirror=$(debian_mirror | head -n 1)
  [ -n "$mirror" ] || { say "no Debian mirror for $SUITE in apt's sources; set DEBIAN_MIRROR"; exit 1; }
  command -v debootstrap >/dev/null || apt-get install -y debootstrap >/dev/null
  rm -rf "$tmp"
  say "debootstrap $SUITE with: $packages"
  debootstrap --variant=minbase --include="$packages" "$SUITE" "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  # what a node never reads: package lists and caches, manuals, translations
  rm -rf "$tmp"/var/lib/apt/lists/* "$tmp"/var/cache/apt/* "$tmp"/var/cache/debconf/*-old \
    "$tmp"/usr/share/man/* "$tmp"/usr/share/info/* "$tmp"/usr/share/locale/* "$tmp"/var/log/*
  find "$tmp/usr/share/doc" -type f ! -name copyright -delete
  tar -C "$tmp" --numeric-owner -c . | docker import - "$1" >/dev/null
  rm -rf "$tmp"
}

base_hash=$( (echo "$SUITE $packages"; declare -f make_base) | hash_of)
base=widgethub/kind-node-base:$base_hash
if ! docker image inspect "$base" >/dev/null 2>&1; then
  make_base "$base"
fi

# --- up to date? -------------------------------------------------------------

inputs=$(
  docker image inspect -f '{{.Id}}' "$base"
  # the recipe files that shape the image (not README, probe, make fragment)
  cd "$here" && find build.sh packages kube-proxy-files.sh setup-node.sh rootfs -type f |
    LC_ALL=C sort | xargs sha256sum
  sha256sum <"$root/hack/control-plane.sh" # the content, not the checkout's path
  for b in etcd kube-apiserver kubelet kubeadm kubectl kube-controller-manager \
    kube-scheduler kube-proxy crictl coredns pause; do
    echo "$b $(cat "$bindir/.$b.stamp")"
  done
)
input_hash=$(echo "$inputs" | hash_of)
old_id=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if [ -n "$old_id" ] && [ -z "${FORCE:-}" ] &&
  [ "$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$IMAGE")" = "$input_hash" ]; then
  say "$IMAGE is up to date ($input_hash)"
  exit 0
fi
say "building $IMAGE ($input_hash)"

work=$cache/work
build=widgethub-nodeimage-build-$$
cleanup() { docker rm -f "$build" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work/images" "$work/stage"

# --- control-plane images ----------------------------------------------------

# image NAME:TAG DIR [ENTRYPOINT]: a single-layer image of DIR's tree.
image() {
  local change=()
  if [ -n "${3:-}" ]; then change=(-c "ENTRYPOINT [\"$3\"]"); fi
  tar -C "$2" --owner=0 --group=0 -c . |
    docker import -c 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin' \
      "${change[@]}" - "$1" >/dev/null
  names+=("$1")
}
names=()
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd; do
  d=$work/images/$c
  mkdir -p "$d/usr/local/bin" "$d/tmp" "$d/var/run"
  chmod 1777 "$d/tmp"
  cp "$bindir/$c" "$d/usr/local/bin/"
done
# kube-proxy programs the node's iptables through the iptables commands.
docker run --rm -i --entrypoint bash "$base" -s <"$here/kube-proxy-files.sh" |
  tar -C "$work/images/kube-proxy" -x
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
  image "registry.k8s.io/$c:$KUBE_VERSION" "$work/images/$c"
done
image "registry.k8s.io/etcd:$ETCD_TAG" "$work/images/etcd"
mkdir -p "$work/images/coredns"
cp "$bindir/coredns" "$work/images/coredns/coredns"
image "registry.k8s.io/coredns/coredns:$COREDNS_TAG" "$work/images/coredns" /coredns
mkdir -p "$work/images/pause"
cp "$bindir/pause" "$work/images/pause/pause"
for t in "${PAUSE_TAGS[@]}"; do
  image "registry.k8s.io/pause:$t" "$work/images/pause" /pause
done
docker save -o "$work/stage/images.tar" "${names[@]}"
docker rmi "${names[@]}" >/dev/null

# --- node --------------------------------------------------------------------

stage=$work/stage
mkdir -p "$stage/kind" "$stage/usr/bin" "$stage/usr/local/bin"
mv "$stage/images.tar" "$stage/kind/images.tar"
cp -a "$here/rootfs/." "$stage/"
cp "$bindir/kubelet" "$bindir/kubeadm" "$bindir/kubectl" "$stage/usr/bin/"
cp "$bindir/crictl" "$stage/usr/local/bin/"
cp "$here/setup-node.sh" "$stage/kind/setup-node.sh"
echo "$KUBE_VERSION" >"$stage/kind/version"

# Files go in, setup-node.sh runs, the images tar is deleted again in the same
# container: the committed layer holds only the result.
docker run -d --name "$build" --stop-signal SIGRTMIN+3 --entrypoint sleep "$base" infinity >/dev/null
tar -C "$stage" --owner=0 --group=0 -c . | docker exec -i "$build" tar -C / --keep-directory-symlink -x
docker exec "$build" bash /kind/setup-node.sh
docker exec "$build" rm /kind/setup-node.sh
docker kill "$build" >/dev/null
docker commit \
  -c 'ENV container=docker' \
  -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  -c 'CMD []' \
  -c "LABEL $LABEL=$input_hash" \
  -c "LABEL io.widgethub.nodeimage.kubernetes=$KUBE_VERSION" \
  "$build" "$IMAGE" >/dev/null
if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]; then
  docker rmi "$old_id" >/dev/null 2>&1 || true
fi
say "built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1 / 1e6}'))"
