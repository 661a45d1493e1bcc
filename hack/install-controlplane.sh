#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module
# proxy into a cache folder outside the repository, once per version.
# Prints the folder that holds the binaries.
set -euo pipefail

K8S_VERSION=v1.32.5
ETCD_VERSION=v3.5.16
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KONTINUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kontinue}
bin="$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"

log() { echo "install-controlplane: $*" >&2; }

if [[ -x "$bin/kube-apiserver" && -x "$bin/kube-controller-manager" && -x "$bin/etcd" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { log "go is not on PATH; install Go first"; exit 1; }
mkdir -p "$bin.tmp"

ver="k8s.io/component-base/version"
cgo=${CGO_ENABLED:-0}
ldflags="-s -w -X $ver.gitVersion=$K8S_VERSION -X $ver.gitMajor=1 -X $ver.gitMinor=32 -X $ver.gitTreeState=clean"
start=$(date +%s)
log "building etcd $ETCD_VERSION (about 1 minute cold)"
(cd "$here/controlplane/etcd" && CGO_ENABLED=$cgo go build -mod=mod -trimpath -ldflags "-s -w" -o "$bin.tmp/etcd" .) \
  || { log "etcd build failed (see the go output above)"; exit 1; }
log "building kube-apiserver and kube-controller-manager $K8S_VERSION (about 5 minutes cold, seconds when cached)"
for cmd in kube-apiserver kube-controller-manager; do
  (cd "$here/controlplane/kube" && CGO_ENABLED=$cgo go build -mod=mod -trimpath -ldflags "$ldflags" -o "$bin.tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd") \
    || { log "$cmd build failed (see the go output above)"; exit 1; }
done
rm -rf "$bin" && mv "$bin.tmp" "$bin"
log "built in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
