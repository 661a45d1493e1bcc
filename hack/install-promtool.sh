#!/usr/bin/env bash
# Installs Debian's promtool (package prometheus), which `make test` runs on
# deploy/monitoring/prometheusrule_test.yaml (`promtool test rules`). Does
# nothing when it is there already. CI runs as root on a fresh machine;
# elsewhere run it with sudo.
set -euo pipefail

if command -v promtool >/dev/null; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "hack/install-promtool.sh: promtool is missing; run as root (apt-get install prometheus)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet: update and try again.
if ! apt-get install -y --no-install-recommends prometheus; then
	apt-get update
	apt-get install -y --no-install-recommends prometheus
fi
promtool --version
