#!/usr/bin/env bash
# Builds Cartographer v0.8.11's controller from the Go module proxy (the
# module pinned by hack/cartographer/go.sum) into the same cache folder as the
# control plane, once. Prints the binary's path. Used to run Cartographer's
# suite against Cartographer itself (`make conformance-cartographer`), the
# reference Kontinue's conformance is read against.
set -euo pipefail

CARTOGRAPHER_VERSION=v0.8.11
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KONTINUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kontinue}
bin="$cache/cartographer-$CARTOGRAPHER_VERSION/cartographer"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || { echo "install-cartographer: go is not on PATH" >&2; exit 1; }
mkdir -p "$(dirname "$bin")"
echo "install-cartographer: building cartographer $CARTOGRAPHER_VERSION (a few minutes cold)" >&2
(cd "$here/cartographer" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" \
  github.com/vmware-tanzu/cartographer/cmd/cartographer) \
  || { echo "install-cartographer: build failed (see the go output above)" >&2; exit 1; }
mv "$bin.tmp" "$bin"
echo "$bin"
