#!/usr/bin/env bash
# Runs the e2e suite with Kontinue holding exactly the permissions of
# deploy/install.yaml: on a fresh local control plane, install.yaml is
# applied, Kontinue runs as the ServiceAccount kontinue-system/kontinue (with
# a real token, so that its own `impersonate` right is checked whenever it
# stamps as an owner's service account) and with leader election (its Lease
# Role), and the suite runs with KONTINUE_E2E_EXTERNAL_CONTROLLER=true.
# Fails if a test fails or if the API server refused Kontinue anything.
#
#   hack/e2e-rbac.sh              (make e2e-rbac)
#   E2E_RUN='TestFoo|TestBar' hack/e2e-rbac.sh
#   KEEP=1 hack/e2e-rbac.sh       leave the cluster running afterwards
#
# Needs go and kubectl.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "e2e-rbac: $*" >&2; exit 1; }
command -v kubectl >/dev/null || die "kubectl is not on PATH"
command -v go >/dev/null || die "go is not on PATH"

work="$root/_output/e2e-rbac"
cluster_dir="$work/cluster"
mkdir -p "$work"
kontinue_log="$work/kontinue.log"
kontinue_pid=""

cleanup() {
  if [[ -n $kontinue_pid ]] && kill -0 "$kontinue_pid" 2>/dev/null; then
    kill -TERM "$kontinue_pid" 2>/dev/null || true
    wait "$kontinue_pid" 2>/dev/null || true
  fi
  if [[ -z ${KEEP:-} ]]; then
    LOCAL_CLUSTER_DIR="$cluster_dir" "$root/hack/local-cluster.sh" stop >/dev/null 2>&1 || true
  else
    echo "e2e-rbac: cluster left running: export KUBECONFIG=$cluster_dir/kubeconfig" >&2
  fi
}
trap cleanup EXIT

echo "e2e-rbac: starting a local control plane in $cluster_dir" >&2
eval "$(LOCAL_CLUSTER_DIR="$cluster_dir" "$root/hack/local-cluster.sh" start)"
admin_kubeconfig=$KUBECONFIG

go build -C "$root" -o "$root/_output/bin/kontinue" . || die "go build failed"

# The whole install (CRDs, namespace, RBAC, Deployment). The Deployment stays
# inert: this control plane has no scheduler and no kubelet.
kubectl apply --server-side --field-manager=e2e-rbac -f "$root/deploy/crds.yaml" >/dev/null
kubectl apply --server-side --field-manager=e2e-rbac -f "$root/deploy/install.yaml" >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd --all >/dev/null

# A kubeconfig with a token of the ServiceAccount, as the pod would have.
token=$(kubectl create token kontinue -n kontinue-system --duration=6h)
server=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
sa_kubeconfig="$work/kontinue-sa.kubeconfig"
umask 077
cat >"$sa_kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$server", certificate-authority-data: "$ca"}
users:
- name: kontinue
  user: {token: "$token"}
contexts:
- name: kontinue
  context: {cluster: local, user: kontinue}
current-context: kontinue
EOF
umask 022
[[ $(KUBECONFIG=$sa_kubeconfig kubectl auth whoami -o jsonpath='{.status.userInfo.username}') == system:serviceaccount:kontinue-system:kontinue ]] \
  || die "the token does not authenticate as the kontinue service account"

echo "e2e-rbac: Kontinue runs as system:serviceaccount:kontinue-system:kontinue; logs in $kontinue_log" >&2
"$root/_output/bin/kontinue" controller --kubeconfig="$sa_kubeconfig" \
  --leader-elect --leader-election-namespace=kontinue-system --leader-election-id=kontinue-leader \
  --metrics-bind-address=0 --health-probe-bind-address=0 --log-format=json --log-level=2 \
  >"$kontinue_log" 2>&1 &
kontinue_pid=$!
for _ in $(seq 1 120); do
  grep -q '"caches synced; starting controllers"' "$kontinue_log" && break
  kill -0 "$kontinue_pid" 2>/dev/null || { tail -20 "$kontinue_log" >&2; die "Kontinue exited"; }
  sleep 0.5
done
grep -q '"caches synced; starting controllers"' "$kontinue_log" || { tail -20 "$kontinue_log" >&2; die "Kontinue did not lead and sync in 60s"; }

rc=0
( cd "$root" && KUBECONFIG=$admin_kubeconfig KONTINUE_E2E_EXTERNAL_CONTROLLER=true \
    go test -count=1 -timeout "${E2E_TIMEOUT:-40m}" ./e2e/ ${E2E_RUN:+-run "$E2E_RUN"} ) || rc=$?

kill -0 "$kontinue_pid" 2>/dev/null || { echo "e2e-rbac: Kontinue died during the suite:" >&2; tail -20 "$kontinue_log" >&2; rc=1; }
# Kontinue's own identity refused anything (events, status, watches, leases,
# impersonation)? Refusals of an impersonated owner account are expected in
# tests and name that account instead.
denied=$(grep -i 'forbidden' "$kontinue_log" | grep -F 'system:serviceaccount:kontinue-system:kontinue' || true)
if [[ -n $denied ]]; then
  echo "e2e-rbac: the API server refused Kontinue's own requests ($(wc -l <<<"$denied") log lines), e.g.:" >&2
  head -5 <<<"$denied" >&2
  rc=1
fi
if [[ $rc -eq 0 ]]; then
  echo "e2e-rbac: PASS: the suite passed with Kontinue holding only deploy/'s permissions" >&2
else
  echo "e2e-rbac: FAIL (Kontinue's log: $kontinue_log)" >&2
fi
exit $rc
