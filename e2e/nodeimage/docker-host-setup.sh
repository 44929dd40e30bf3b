#!/usr/bin/env bash
# Prepares the local Docker host for kind nodes (needs root). Idempotent.
#
#  1. Raises fs.inotify limits (several kind nodes each run systemd, kubelet
#     and containerd, which exhaust the default 128 inotify instances).
#  2. When this machine's capability bounding set lacks capabilities that
#     Docker hands to --privileged containers (this workplace's VMs drop
#     CAP_SYS_RESOURCE), every privileged container fails in runc with
#     "unable to apply caps: operation not permitted". kind runs its nodes
#     --privileged, so the script installs hack/runc-capfilter as Docker's
#     default runtime: it drops only the capabilities nobody here can hold and
#     then runs the real runc. Docker reloads its runtimes on SIGHUP; running
#     containers are not touched.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
runtime_name=widgethub-runc
wrapper=/usr/local/libexec/widgethub/runc-capfilter
daemon_json=/etc/docker/daemon.json

raise() { # raise SYSCTL MIN
  local cur; cur=$(sysctl -n "$1")
  if [ "$cur" -lt "$2" ]; then sysctl -q -w "$1=$2"; fi
}
raise fs.inotify.max_user_instances 512
raise fs.inotify.max_user_watches 524288

# Is every capability the kernel knows in our bounding set?
last=$(cat /proc/sys/kernel/cap_last_cap)
bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
if [ $((16#$bnd)) -eq $(((1 << (last + 1)) - 1)) ]; then
  exit 0
fi

# Rebuild the wrapper when its source changed; register it once.
if [ ! -x "$wrapper" ] || [ "$root/hack/runc-capfilter/main.go" -nt "$wrapper" ]; then
  mkdir -p "$(dirname "$wrapper")"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$wrapper.tmp" ./hack/runc-capfilter)
  mv "$wrapper.tmp" "$wrapper"
fi
if [ "$(docker info --format '{{.DefaultRuntime}}')" != "$runtime_name" ]; then
  echo "docker: capability bounding set is $bnd; installing $runtime_name as default runtime" >&2
  "$wrapper" --register "$daemon_json" "$runtime_name"
  kill -HUP "$(pidof dockerd)"
  for _ in $(seq 1 50); do
    [ "$(docker info --format '{{.DefaultRuntime}}')" = "$runtime_name" ] && exit 0
    sleep 0.2
  done
  echo "docker did not pick up runtime $runtime_name" >&2
  exit 1
fi
