#!/usr/bin/env bash
# Smoke test of the node image: a one-node kind cluster reaches a Ready node
# and runs a pod of registry.k8s.io/pause:3.10, kube-proxy and CoreDNS run;
# the cluster is deleted after (KEEP=1 keeps it).
#
#   e2e/nodeimage/probe.sh KIND_BINARY [IMAGE]
set -euo pipefail

kind=$1
image=${2:-widgethub/kind-node:v1.36.3}
name=${PROBE_CLUSTER:-nodeimage-probe}
here=$(cd "$(dirname "$0")" && pwd)
kubeconfig=$(mktemp)
cleanup() {
  rm -f "$kubeconfig"
  [ -n "${KEEP:-}" ] || "$kind" delete cluster --name "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }

"$kind" delete cluster --name "$name" >/dev/null 2>&1 || true
start=$SECONDS
"$kind" create cluster --name "$name" --image "$image" --config "$here/kind-probe.yaml" \
  --kubeconfig "$kubeconfig" --wait 2m
k wait --for=condition=Ready node --all --timeout=2m
k run pause --image=registry.k8s.io/pause:3.10 --restart=Never
k wait --for=condition=Ready pod/pause --timeout=2m
k -n kube-system rollout status daemonset/kube-proxy --timeout=2m
k -n kube-system rollout status deployment/coredns --timeout=2m
k get nodes -o wide
k get pods -A -o wide
echo "probe: node Ready, pause pod Running, kube-proxy and CoreDNS available after $((SECONDS - start))s"
