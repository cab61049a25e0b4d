#!/usr/bin/env bash
# bench-wear.sh measures flash wear and acknowledgement latency (BenchmarkWear in
# store/wear_test.go): a producer paced at 100, 1,000 and 10,000 msgs/s of 100 bytes, in sync
# flush mode with several Linger values and in async mode with several flush intervals, and
# for each the bytes the kernel asked the device to write per message (/proc/diskstats of the
# device under the data dir), its cache flushes per message, and the ack latency p50/p99.
# Each round runs every cell once, so a busy moment of a shared machine hits all of them;
# compare medians across rounds. By default the data dirs are on a fresh ext4 image on a loop
# device (root, losetup, mkfs.ext4), whose counters see nothing but the store.
#
# Environment:
#   ROUNDS               rounds (default 3)
#   EDGEMQ_WEAR_SECONDS  seconds per cell (default 5; a round of every rate takes ~2 min)
#   EDGEMQ_WEAR_ONLY     comma-separated rates to run (default all)
#   EDGEMQ_WEAR_DIR      parent of the data dirs instead of a loop device
#   EDGEMQ_WEAR_THROTTLE BYTES_PER_SECOND:WRITES_PER_SECOND: cap the loop device's writes
#                        (cgroup v1 blkio throttle), e.g. 10485760:500 for a slow SD card;
#                        not with EDGEMQ_WEAR_DIR
#   EDGEMQ_WEAR_ZERO_AHEAD the store's zero_ahead in bytes (-1: off; default the store's)
#   OUT                  raw output file (default wear.out)
#   GO                   go command (default: go)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-wear.out}

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
"$GO" test -c -o "$bin/store.test" ./store
run=()
if [ "$(id -u)" -ne 0 ] && [ -z "${EDGEMQ_WEAR_DIR:-}" ]; then
	run=(sudo -E)
fi
{
	echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $("$GO" version), load $(cut -d' ' -f1-3 /proc/loadavg)"
	for r in $(seq "$ROUNDS"); do
		echo "# round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
		(cd "$bin" && "${run[@]}" ./store.test -test.run='^$' -test.bench='^BenchmarkWear$' -test.benchtime=1x -test.count=1 -test.v)
	done
	echo "# end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | grep -v '^=== RUN' | tee "$OUT"
