#!/usr/bin/env bash
# Builds Tekton Pipelines' controller and webhook (github.com/tektoncd/pipeline,
# cmd/controller and cmd/webhook; the module pinned by hack/tekton/go.sum)
# from the Go module proxy into the same cache folder as the control plane,
# once per version, and copies next to them what runs them needs from the
# same module: its CRDs (config/300-crds), its config maps
# (config/config-*.yaml) and its webhook configurations
# (config/500-webhooks.yaml). Prints the folder.
set -euo pipefail

TEKTON_VERSION=v0.62.0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KONTINUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kontinue}
dir="$cache/tekton-pipeline-$TEKTON_VERSION"

if [[ -x "$dir/controller" && -x "$dir/webhook" && -f "$dir/config/500-webhooks.yaml" && -d "$dir/config/300-crds" ]]; then
  echo "$dir"
  exit 0
fi
command -v go >/dev/null || { echo "install-tekton: go is not on PATH" >&2; exit 1; }
log() { echo "install-tekton: $*" >&2; }
tmp="$dir.tmp.$$"
rm -rf "$tmp" && mkdir -p "$tmp/config"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
log "building Tekton Pipelines' controller and webhook $TEKTON_VERSION (about 2 minutes cold)"
for cmd in controller webhook; do
  (cd "$here/tekton" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/$cmd" \
    "github.com/tektoncd/pipeline/cmd/$cmd") \
    || { log "build of $cmd failed (see the go output above)"; exit 1; }
done
src=$(cd "$here/tekton" && go list -m -f '{{.Dir}}' github.com/tektoncd/pipeline) \
  || { log "cannot find github.com/tektoncd/pipeline in the module cache"; exit 1; }
cp -r "$src/config/300-crds" "$tmp/config/"
cp "$src"/config/config-*.yaml "$src/config/500-webhooks.yaml" "$tmp/config/"
chmod -R u+w "$tmp/config"   # the module cache is read-only
rm -rf "$dir" && mv "$tmp" "$dir"
log "built in $(( $(date +%s) - start ))s into $dir"
echo "$dir"
