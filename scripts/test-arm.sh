#!/usr/bin/env bash
# test-arm.sh runs the test suite as linux/arm64 and linux/arm (GOARM=7) binaries under
# qemu-user, so 32-bit and weak-memory-order builds are tested on an x86 machine. It does not
# rely on binfmt_misc: each test binary is started as `qemu-*-static <test binary>` through
# `go test -exec`, and tests that re-execute their own binary as a child (crash tests,
# directory-lock tests) prepend $EDGEMQ_TEST_EXEC_WRAPPER, which is set to the same emulator.
#
# The race detector does not exist for these platforms, so this runs without -race, with
# -short (emulation is 5-20x slower) and a generous timeout. It installs nothing: it fails
# if the emulators are missing (Debian: apt-get install qemu-user-static).
#
# Environment:
#   ARM_PKGS     package patterns to test (default ./store/...)
#   ARM_TARGETS  space-separated GOARCH[/GOARM] list (default: arm64 arm/7)
#   ARM_TIMEOUT  go test -timeout (default 30m)
#   ARM_FLAGS    extra go test flags, e.g. "-v -run TestRecover"
#   GO           go command (default: go)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
ARM_PKGS=${ARM_PKGS:-./store/...}
ARM_TARGETS=${ARM_TARGETS:-arm64 arm/7}
ARM_TIMEOUT=${ARM_TIMEOUT:-30m}
ARM_FLAGS=${ARM_FLAGS:-}

emulator() {
	case $1 in
	arm64) echo qemu-aarch64-static ;;
	arm) echo qemu-arm-static ;;
	*) echo "test-arm: no emulator known for GOARCH=$1" >&2; return 1 ;;
	esac
}

# Check every emulator before running anything.
missing=
for target in $ARM_TARGETS; do
	q=$(emulator "${target%%/*}")
	command -v "$q" >/dev/null || missing="$missing $q"
done
if [ -n "$missing" ]; then
	echo "test-arm: not found in PATH:$missing" >&2
	echo "test-arm: install the qemu-user-static package (Debian/Ubuntu: apt-get install qemu-user-static)" >&2
	exit 1
fi

# Every target runs even when an earlier one fails; the script fails if any did.
failed=
for target in $ARM_TARGETS; do
	IFS=/ read -r goarch goarm <<<"$target"
	q=$(emulator "$goarch")
	name=linux/$goarch${goarm:+ GOARM=$goarm}
	echo "== $name under $q ($("$q" --version | head -n1))"
	start=$SECONDS
	# shellcheck disable=SC2086 # ARM_FLAGS and ARM_PKGS are lists
	if env CGO_ENABLED=0 GOOS=linux GOARCH="$goarch" GOARM="$goarm" EDGEMQ_TEST_EXEC_WRAPPER="$q" \
		"$GO" test -exec "$q" -short -count=1 -timeout "$ARM_TIMEOUT" $ARM_FLAGS $ARM_PKGS; then
		echo "== $name: passed in $((SECONDS - start))s"
	else
		echo "== $name: FAILED after $((SECONDS - start))s"
		failed="$failed [$name]"
	fi
done
if [ -n "$failed" ]; then
	echo "test-arm: failed on$failed" >&2
	exit 1
fi
