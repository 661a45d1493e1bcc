#!/usr/bin/env bash
# Installs Debian's chromium, which the dashboard's e2e test drives headless
# (e2e/dashboard_test.go). Does nothing when it is there already. CI runs as
# root on a fresh machine; elsewhere run it with sudo.
set -euo pipefail

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "hack/install-chromium.sh: $CHROMIUM is missing; run as root (apt-get install chromium)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet: update and try again.
if ! apt-get install -y --no-install-recommends chromium; then
	apt-get update
	apt-get install -y --no-install-recommends chromium
fi
"$CHROMIUM" --version
