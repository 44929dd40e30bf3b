#!/bin/bash
# Runs inside a container of the node's base image and writes to stdout a tar
# of what kube-proxy's image needs besides kube-proxy itself: the nft-backed
# iptables commands, their extensions, conntrack, and the libraries they load.
set -euo pipefail

out=$(mktemp -d)
chmod 755 "$out"
mkdir -p "$out/usr/sbin" "$out/run" "$out/tmp" "$out/etc"
chmod 1777 "$out/tmp"
# the same merged-/usr links as the base (/lib -> usr/lib, ...), so that
# library paths as ldd prints them land in the right place
for d in bin sbin lib lib64; do
  if [ -L "/$d" ]; then
    mkdir -p "$out/$(readlink -f "/$d")"
    ln -s "$(readlink "/$d")" "$out/$d"
  fi
done

copy() { # copy a file, keeping its path
  mkdir -p "$out$(dirname "$1")"
  cp -a "$1" "$out$1"
}

bins=(/usr/sbin/xtables-nft-multi /usr/sbin/conntrack)
modules=(/usr/lib/x86_64-linux-gnu/xtables/*.so)
for f in "${bins[@]}" "${modules[@]}"; do
  copy "$f"
  # every shared library it links, with the symlinks that name them
  for lib in $(ldd "$f" | grep -o '/[^ ]*'); do
    copy "$lib"
    real=$(readlink -f "$lib")
    if [ "$real" != "$lib" ]; then copy "$real"; fi
  done
done

# iptables and friends dispatch on the name they are called by.
for name in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -s xtables-nft-multi "$out/usr/sbin/$name"
done
cp /etc/protocols /etc/services /etc/ethertypes "$out/etc/" 2>/dev/null || true
tar -C "$out" --numeric-owner -c .
