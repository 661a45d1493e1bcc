#!/usr/bin/env bash
# Builds kubectl-kuttl (the runner of Cartographer's kuttl suite) from the Go
# module proxy into the same cache folder as the control plane, once per
# version. Prints the binary's path.
#
# kuttl v0.22.0's pkg/test/utils implements testing's internal testDeps, which
# grew methods in Go 1.25, so it is built with the Go 1.24 toolchain (itself
# fetched from the module proxy by the go command).
set -euo pipefail

KUTTL_VERSION=v0.22.0
KUTTL_TOOLCHAIN=go1.24.6
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KONTINUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kontinue}
bin="$cache/kuttl-$KUTTL_VERSION/kubectl-kuttl"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { echo "install-kuttl: go is not on PATH" >&2; exit 1; }
mkdir -p "$(dirname "$bin")"
echo "install-kuttl: building kubectl-kuttl $KUTTL_VERSION with $KUTTL_TOOLCHAIN (about a minute cold)" >&2
(cd "$here/kuttl" && GOTOOLCHAIN=$KUTTL_TOOLCHAIN GOFLAGS=-mod=mod CGO_ENABLED=0 \
  go build -trimpath -ldflags "-s -w" -o "$bin.tmp" github.com/kudobuilder/kuttl/cmd/kubectl-kuttl) \
  || { echo "install-kuttl: build failed (see the go output above)" >&2; exit 1; }
mv "$bin.tmp" "$bin"
echo "$bin"
