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
# Each binary is built to a temporary name and moved in place, so that a
# concurrent run or an interrupted build never leaves a half-written binary.
for cmd in "${missing[@]}"; do
  tmp="$bin/.$cmd.tmp.$$"
  if [[ $cmd == etcd ]]; then
    log "building etcd $ETCD_VERSION (about 1 minute cold)"
    (cd "$here/controlplane/etcd" && CGO_ENABLED=$cgo go build -mod=mod -trimpath -ldflags "-s -w" -o "$tmp" .) \
      || { rm -f "$tmp"; log "etcd build failed (see the go output above)"; exit 1; }
  else
    log "building $cmd $K8S_VERSION (the first of them about 5 minutes cold, seconds when cached)"
    (cd "$here/controlplane/kube" && CGO_ENABLED=$cgo go build -mod=mod -trimpath -ldflags "$ldflags" -o "$tmp" "k8s.io/kubernetes/cmd/$cmd") \
      || { rm -f "$tmp"; log "$cmd build failed (see the go output above)"; exit 1; }
  fi
  mv "$tmp" "$bin/$cmd"
done
log "built ${missing[*]} in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
