#!/usr/bin/env bash
# run.sh is make test-ui: it builds edgemq, installs Debian's chromium with apt-get when no
# Chromium is on the PATH (as root), and runs this module's test, which drives the status
# page of a real edgemq serve in headless Chromium and saves a screenshot (PNG) to
# $ARTIFACTS_DIR/ui/status.png, or out/ui/status.png without ARTIFACTS_DIR. Run time: about
# 15s once Chromium is installed, the build included (the page refreshes every 3s; the test
# waits for one refresh).
#
# Environment:
#   GO             go command (default: go)
#   ARTIFACTS_DIR  where CI keeps files: the screenshot goes to its ui/ (default: out/)
#   CHROMIUM       the browser to drive (default: chromium on the PATH)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GO=${GO:-go}

if [ -z "${CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
	if [ "$(id -u)" != 0 ]; then
		echo "scripts/ui/run.sh: chromium not found: apt-get install chromium" >&2
		exit 1
	fi
	echo "scripts/ui/run.sh: installing Debian's chromium"
	apt-get update -qq </dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium </dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && "$GO" build -o "$tmp/edgemq" ./cmd/edgemq)
out=${ARTIFACTS_DIR:-$root/out}/ui
mkdir -p "$out"
cd "$here"
EDGEMQ_BIN="$tmp/edgemq" UI_OUT="$out" "$GO" test -count=1 -v .
echo "scripts/ui/run.sh: screenshot in $out/status.png"
