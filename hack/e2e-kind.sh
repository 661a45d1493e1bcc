#!/usr/bin/env bash
# Runs the e2e suite against Kontinue deployed in a kind cluster, the way
# users install it: the image is built from the Dockerfile, loaded into kind,
# deploy/install.yaml (regenerated for that image) is applied, and the suite
# runs from this machine with KONTINUE_E2E_EXTERNAL_CONTROLLER=true (it then
# does not start Kontinue itself).
#
#   hack/e2e-kind.sh                       (make e2e-kind)
#   IMAGE=kontinue:dev hack/e2e-kind.sh    image tag to build and load
#   KIND_CLUSTER=name                      cluster name (default kontinue-e2e)
#   KIND_NODE_IMAGE=kindest/node:v1.32.5   node image (default: kind's)
#   E2E_RUN='TestFoo'                      go test -run filter
#   KEEP=1                                 keep the cluster afterwards
#
# Needs docker, kind, kubectl and go. Not runnable on machines without
# Docker (the project's own CI machine among them): `make test` covers the
# same suite on a local control plane.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "e2e-kind: $*" >&2; exit 1; }
for tool in docker kind kubectl go; do
  command -v "$tool" >/dev/null || die "$tool is not on PATH"
done
docker info >/dev/null 2>&1 || die "cannot reach the Docker daemon"

cluster=${KIND_CLUSTER:-kontinue-e2e}
image=${IMAGE:-kontinue:e2e}
work="$root/_output/e2e-kind"
mkdir -p "$work"
kubeconfig="$work/kubeconfig"
created=""

dump_logs() {
  echo "e2e-kind: Kontinue's logs in $work/kontinue-*.log" >&2
  for pod in $(kubectl --kubeconfig "$kubeconfig" -n kontinue-system get pods -l app.kubernetes.io/name=kontinue -o name 2>/dev/null); do
    kubectl --kubeconfig "$kubeconfig" -n kontinue-system logs "$pod" --all-containers >"$work/kontinue-${pod#pod/}.log" 2>&1 || true
  done
  kubectl --kubeconfig "$kubeconfig" -n kontinue-system get deploy,pods,lease -o wide >&2 || true
}

cleanup() {
  if [[ -n $created && -z ${KEEP:-} ]]; then
    kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
  elif [[ -n ${KEEP:-} ]]; then
    echo "e2e-kind: cluster kept: export KUBECONFIG=$kubeconfig (kind delete cluster --name $cluster)" >&2
  fi
}
trap cleanup EXIT

if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
  echo "e2e-kind: reusing kind cluster $cluster" >&2
else
  echo "e2e-kind: creating kind cluster $cluster" >&2
  kind create cluster --name "$cluster" ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 120s
  created=1
fi
kind get kubeconfig --name "$cluster" >"$kubeconfig"
export KUBECONFIG=$kubeconfig

echo "e2e-kind: building $image" >&2
docker build -t "$image" "$root"
kind load docker-image "$image" --name "$cluster"

# install.yaml for this image (the committed one names the release of version/VERSION, by tag).
go run -C "$root" ./hack/installyaml -image "$image" -o "$work/install.yaml"
kubectl apply --server-side --field-manager=e2e-kind --force-conflicts -f "$root/deploy/crds.yaml"
kubectl apply --server-side --field-manager=e2e-kind --force-conflicts -f "$work/install.yaml"
kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null
if [[ -z $created ]]; then
  # A reused cluster may run an older build under the same tag.
  kubectl -n kontinue-system rollout restart deployment/kontinue >/dev/null
fi
if ! kubectl -n kontinue-system rollout status deployment/kontinue --timeout=180s; then
  dump_logs
  die "the Deployment did not become available"
fi
# One replica leads (holds the Lease); the suite needs it reconciling.
for _ in $(seq 1 60); do
  holder=$(kubectl -n kontinue-system get lease kontinue-leader -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  [[ -n $holder ]] && break
  sleep 1
done
[[ -n ${holder:-} ]] || { dump_logs; die "no replica took the Lease kontinue-system/kontinue-leader"; }
echo "e2e-kind: leader is $holder" >&2

rc=0
( cd "$root" && KUBECONFIG=$kubeconfig KONTINUE_E2E_EXTERNAL_CONTROLLER=true \
    go test -count=1 -timeout "${E2E_TIMEOUT:-40m}" ./e2e/ ${E2E_RUN:+-run "$E2E_RUN"} ) || rc=$?
if [[ $rc -ne 0 ]]; then
  dump_logs
  echo "e2e-kind: FAIL" >&2
else
  echo "e2e-kind: PASS" >&2
fi
exit $rc
