#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and etcd
# from the Go module proxy into a cache folder outside the repository, once
# per version (a binary already there is not built again). Prints the folder
# that holds the binaries.
#
# kube-scheduler is used only by the cluster with real workload controllers
# (hack/install-kwok.sh and hack/install-tekton.sh build the rest of it).
set -euo pipefail

K8S_VERSION=v1.32.5
ETCD_VERSION=v3.5.16
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KONTINUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kontinue}
bin="$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
kube_cmds=(kube-apiserver kube-controller-manager kube-scheduler)

log() { echo "install-controlplane: $*" >&2; }

missing=()
for cmd in etcd "${kube_cmds[@]}"; do
  [[ -x "$bin/$cmd" ]] || missing+=("$cmd")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { log "go is not on PATH; install Go first"; exit 1; }
mkdir -p "$bin"

ver="k8s.io/component-base/version"
cgo=${CGO_ENABLED:-0}
ldflags="-s -w -X $ver.gitVersion=$K8S_VERSION -X $ver.gitMajor=1 -X $ver.gitMinor=32 -X $ver.gitTreeState=clean"
start=$(date +%s)
# Each binary is built to a temporary folder and moved in place, so that a
# concurrent run or an interrupted build never leaves a half-written binary.
# The kube commands are built by one `go build` (shared packages compiled
# once, links side by side) while etcd, a module of its own, builds beside
# it: on a cold machine one's downloads overlap the other's compiles.
tmp="$bin/.tmp.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
kube=() etcd=
for cmd in "${missing[@]}"; do
  if [[ $cmd == etcd ]]; then etcd=1; else kube+=("k8s.io/kubernetes/cmd/$cmd"); fi
done
etcd_pid=
if [[ -n $etcd ]]; then
  log "building etcd $ETCD_VERSION (about 1 minute cold)"
  (cd "$here/controlplane/etcd" && CGO_ENABLED=$cgo go build -mod=mod -trimpath -ldflags "-s -w" -o "$tmp/etcd" .) &
  etcd_pid=$!
fi
if [[ ${#kube[@]} -gt 0 ]]; then
  log "building ${kube[*]##*/} $K8S_VERSION (about 5 minutes cold, seconds when cached)"
  (cd "$here/controlplane/kube" && CGO_ENABLED=$cgo go build -mod=mod -trimpath -ldflags "$ldflags" -o "$tmp/" "${kube[@]}") \
    || { [[ -z $etcd_pid ]] || wait "$etcd_pid" || true; log "kube build failed (see the go output above)"; exit 1; }
fi
if [[ -n $etcd_pid ]]; then
  wait "$etcd_pid" || { log "etcd build failed (see the go output above)"; exit 1; }
fi
for cmd in "${missing[@]}"; do mv "$tmp/$cmd" "$bin/$cmd"; done
log "built ${missing[*]} in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
