#!/usr/bin/env bash
# test-ext4.sh cuts the power of a real file system under the store: TestExt4PowerCut
# (store/ext4_test.go) makes an ext4 image on a loop device, runs a child process that appends
# in sync and then in async flush mode, shuts the file system down at random moments (and
# right after segment rolls, retention deletes and queue-file rolls) with EXT4_IOC_SHUTDOWN
# and EXT4_GOING_FLAGS_NOLOGFLUSH, kills the child, remounts, reopens the store and checks
# every acknowledged message. It needs root (it runs the test with sudo otherwise), a free
# loop device and mkfs.ext4; the test skips, saying why, without them.
#
# Usage: scripts/test-ext4.sh [CUTS]
#   CUTS         power cuts per flush mode (default 50; about a second each)
# Environment:
#   EDGEMQ_SEED  seed of the cut moments (default: the clock's; the test logs it)
#   RACE         1 builds the test binary with -race
#   GO           go command (default: go)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
CUTS=${1:-50}

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
flags=()
if [ "${RACE:-0}" = 1 ]; then
	flags+=(-race)
fi
"$GO" test -c "${flags[@]}" -o "$bin/store.test" ./store

run=()
if [ "$(id -u)" -ne 0 ]; then
	run=(sudo)
fi
"${run[@]}" env EDGEMQ_EXT4_CUTS="$CUTS" ${EDGEMQ_SEED:+EDGEMQ_SEED="$EDGEMQ_SEED"} \
	"$bin/store.test" -test.run='^TestExt4PowerCut$' -test.v -test.count=1 -test.timeout=3h
