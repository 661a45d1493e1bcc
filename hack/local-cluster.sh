#!/usr/bin/env bash
# Local Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager on 127.0.0.1) for development and tests.
#
#   hack/local-cluster.sh install   build the binaries (hack/install-controlplane.sh)
#   hack/local-cluster.sh start     start a detached cluster; prints "export KUBECONFIG=..."
#                                   (eval "$(hack/local-cluster.sh start)")
#   hack/local-cluster.sh env       print the export line if the cluster runs
#   hack/local-cluster.sh status    processes and apiserver readiness
#   hack/local-cluster.sh stop      stop the cluster (logs stay in the state folder)
#
# Flags after the command go to the Go command: -dir (env LOCAL_CLUSTER_DIR,
# default _output/local-cluster) and -bin-dir (env LOCAL_CLUSTER_BIN_DIR);
# start -workloads adds the workload controllers, kube-scheduler and kwok's
# fake nodes (Pods run), start -tekton also Tekton (docs/testing.md).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "local-cluster.sh: $*" >&2; exit 1; }
usage() { sed -n '2,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

cmd=${1:-}
case "$cmd" in
  install)
    shift
    "$root/hack/install-controlplane.sh" "$@" || die "building the control plane failed (see above)"
    exit 0
    ;;
  start|stop|env|status) ;;
  help|-h|--help) usage; exit 0 ;;
  "") usage >&2; die "missing command" ;;
  *) usage >&2; die "unknown command '$cmd'" ;;
esac

command -v go >/dev/null || die "go is not on PATH"
bin="$root/_output/bin/local-cluster"
# Built (incrementally: instant when unchanged) rather than `go run`, so that
# the detached components are not children of a temporary executable.
go build -C "$root" -o "$bin" ./hack/localcluster/cmd/local-cluster \
  || die "building hack/localcluster/cmd/local-cluster failed (see above)"

rc=0
"$bin" "$@" || rc=$?
if [[ $rc -ne 0 && ( $cmd == start || $cmd == stop ) ]]; then
  die "'$cmd' failed (exit $rc, see above)"
fi
exit $rc
