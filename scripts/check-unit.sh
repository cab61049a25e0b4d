#!/usr/bin/env bash
# check-unit.sh checks configs/edgemq.service with "systemd-analyze verify" (Debian's and
# Ubuntu's systemd package has it; this script installs nothing). It fails on any problem
# verify reports about the unit, warnings included (verify itself exits 0 on an unknown key
# or a value it cannot parse, which systemd would ignore).
#
# verify wants ExecStart's binary at its path and the units a service depends on, so it runs
# against a temporary root holding the system's units, the unit, and edgemq at the unit's
# ExecStart path: EDGEMQ_BIN if set, else bin/edgemq if built, else one built here.
#
# Environment:
#   EDGEMQ_BIN  the edgemq binary to check with (default: bin/edgemq, else go build)
#   GO          go command (default: go)
set -euo pipefail
cd "$(dirname "$0")/.."

unit=configs/edgemq.service
GO=${GO:-go}
if ! command -v systemd-analyze >/dev/null; then
	echo "check-unit.sh: systemd-analyze not found: install systemd (apt-get install systemd)" >&2
	exit 1
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
exe=$(sed -n 's/^ExecStart=[-@:+!]*\([^ ]*\).*/\1/p' "$unit")
if [ -z "$exe" ]; then
	echo "check-unit.sh: $unit has no ExecStart" >&2
	exit 1
fi
mkdir -p "$root$(dirname "$exe")" "$root/etc/systemd/system" "$root/usr/lib/systemd"
bin=${EDGEMQ_BIN:-bin/edgemq}
if [ -x "$bin" ]; then
	cp "$bin" "$root$exe"
else
	"$GO" build -o "$root$exe" ./cmd/edgemq
fi
for d in /usr/lib/systemd/system /lib/systemd/system; do
	if [ -d "$d" ]; then
		cp -r "$d" "$root/usr/lib/systemd/"
		break
	fi
done
cp "$unit" "$root/etc/systemd/system/edgemq.service"

status=0
out=$(systemd-analyze verify --root="$root" edgemq.service 2>&1) || status=$?
out=${out//$root/}
if [ "$status" -ne 0 ] || grep -q 'edgemq\.service' <<<"$out"; then
	printf '%s\n' "$out" >&2
	echo "check-unit.sh: $unit: systemd-analyze verify failed (exit $status)" >&2
	exit 1
fi
if [ -n "$out" ]; then
	printf '%s\n' "$out" # about other units, not ours
fi
echo "check-unit.sh: $unit verifies ($(systemd-analyze --version | head -1))"
