#!/usr/bin/env bash
# Builds kwok (sigs.k8s.io/kwok, cmd/kwok; the module pinned by
# hack/kwok/go.sum) from the Go module proxy into the same cache folder as the
# control plane, once per version. Prints the binary's path. kwok plays the
# kubelet of the fake nodes of the cluster with real workload controllers
# (hack/localcluster, Options.Workloads).
set -euo pipefail

KWOK_VERSION=v0.6.1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KONTINUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kontinue}
bin="$cache/kwok-$KWOK_VERSION/kwok"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { echo "install-kwok: go is not on PATH" >&2; exit 1; }
mkdir -p "$(dirname "$bin")"
echo "install-kwok: building kwok $KWOK_VERSION (about 1 minute cold)" >&2
start=$(date +%s)
tmp="$bin.tmp.$$"
(cd "$here/kwok" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp" sigs.k8s.io/kwok/cmd/kwok) \
  || { rm -f "$tmp"; echo "install-kwok: build failed (see the go output above)" >&2; exit 1; }
mv "$tmp" "$bin"
echo "install-kwok: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
