#!/bin/bash
# Runs inside the build container (base image + recipe files copied in) and
# turns it into a node: systemd units, then the control-plane images
# imported into containerd's namespace k8s.io. build.sh commits the result.
set -euo pipefail

# Units: containerd and kubelet start at boot; what a node container has no
# use for (logins, timers, hardware) is masked.
systemctl enable containerd.service kubelet.service
systemctl mask \
  getty.target console-getty.service getty@tty1.service systemd-logind.service \
  apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
  e2scrub_all.timer e2scrub_reap.service fstrim.timer \
  systemd-binfmt.service systemd-pstore.service remote-fs.target \
  systemd-ask-password-wall.path systemd-ask-password-console.path \
  sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount
# The kernel log belongs to the host.
mkdir -p /etc/systemd/journald.conf.d
printf '[Journal]\nReadKMsg=no\n' >/etc/systemd/journald.conf.d/10-widgethub.conf
# A fresh machine-id is made at every start by the entrypoint.
: >/etc/machine-id

# Import the images with a throwaway containerd: only the content store and
# image metadata are needed (no CRI, no unpacking: the node's containerd
# unpacks each image for its snapshotter on first use).
# Garbage collection right after the import removes the uncompressed layers
# that --compress-blobs replaced.
cat >/tmp/import.toml <<'EOF'
version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[plugins."io.containerd.gc.v1.scheduler"]
  deletion_threshold = 1
  schedule_delay = "0s"
EOF
containerd --config /tmp/import.toml >/tmp/containerd.log 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  ctr version >/dev/null 2>&1 && break
  sleep 0.1
done
# Layers are stored gzipped: half the size in the image and in every node.
ctr --namespace k8s.io images import --no-unpack --compress-blobs /kind/images.tar
ctr --namespace k8s.io images list --quiet
sleep 2 # let the collection run
du -sh /var/lib/containerd/io.containerd.content.v1.content
kill "$pid"
wait "$pid" || true
rm -rf /kind/images.tar /tmp/import.toml /tmp/containerd.log /run/containerd
