#!/usr/bin/env bash
# bench-store.sh runs the store's target benchmarks (BENCHMARKS.md) in interleaved rounds:
# each round runs every ceiling next to the store benchmark judged against it, so that a slow
# or busy moment of a shared disk hits both. It writes the raw output to OUT and prints a
# benchstat summary of it.
#
# Environment:
#   ROUNDS         rounds of the short benchmarks (default 6: benchstat wants 6 samples)
#   REOPEN_ROUNDS  rounds of BenchmarkReopenAfterCrash1GiB, 4 fills of 1 GiB each (default 6;
#                  0 skips it)
#   OUT            raw output file (default bench.out, as `make bench`; git ignores it)
#   BENCHSTAT      benchstat command (default: go run golang.org/x/perf/cmd/benchstat@latest)
#   GO             go command (default: go)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
ROUNDS=${ROUNDS:-6}
REOPEN_ROUNDS=${REOPEN_ROUNDS:-6}
OUT=${OUT:-bench.out}
BENCHSTAT=${BENCHSTAT:-"$GO run golang.org/x/perf/cmd/benchstat@latest"}

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
"$GO" test -c -o "$bin/store.test" ./store
"$GO" test -c -o "$bin/commitlog.test" ./store/commitlog

# dd_seq: the disk's sequential write, 1 GiB in 1 MiB blocks and one fdatasync (where the
# benchmarks put their data dirs: TMPDIR), printed as a benchmark line for benchstat.
dd_seq() {
	local dir out
	dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-store-dd.XXXXXX")
	out=$(LC_ALL=C dd if=/dev/zero of="$dir/seq" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1)
	rm -rf "$dir"
	# "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 2.89901 s, 370 MB/s"
	awk -v line="$out" 'BEGIN {
		n = split(line, f, ", "); split(f[n-1], t, " "); secs = t[1]
		printf "BenchmarkDiskDD/1MiB-fdatasync \t1024\t%.0f ns/op\t%.2f MB/s\n", secs * 1e9 / 1024, 1073741824 / secs / 1e6
	}'
}

# run BINARY BENCH BENCHTIME: one pass of the benchmarks matching BENCH.
run() {
	"$bin/$1" -test.run='^$' -test.bench="$2" -test.benchtime="$3" -test.benchmem -test.count=1
}

{
	echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $("$GO" version)"
	for r in $(seq "$ROUNDS"); do
		echo "# round $r"
		# a: 1 KiB bodies, async; the same ~1 GiB for ceiling and store, and for the
		# disk's sequential write (dd, and the same in Go).
		dd_seq
		run store.test '^BenchmarkCeilingSeqWrite$' 1024x
		run store.test '^BenchmarkCeilingAsyncWrite$/^1KiB$' 1000000x
		run store.test '^BenchmarkAppendAsync1KiB$' 1000000x
		# a″: the same with a 1 MiB write buffer (store.write_buffer): large pwrites.
		run store.test '^BenchmarkAppendAsync1KiBBuffered$' 1000000x
		# b: 100-byte bodies in batches of 32, async; 3.2 million records each.
		run store.test '^BenchmarkCeilingAsyncWrite$/^100Bx32$' 100000x
		run store.test '^BenchmarkAppendAsyncBatch32$' 100000x
		# c: sync, 64 appenders, and the disk's fdatasyncs per second.
		run store.test '^BenchmarkCeilingFdatasync$' 3s
		run store.test '^BenchmarkAppendSync64$' 3s
		# d: GetMessages of 32 and what the layers under it cost.
		run store.test '^BenchmarkGetMessagesCeiling$' 3s
		run store.test '^BenchmarkGetMessages32$' 3s
		# f: bytes per message (1,000,000 messages per iteration).
		run store.test '^BenchmarkBytesPerMessage$' 1x
		# The commitlog alone, for attribution.
		run commitlog.test . 2s
	done
	for r in $(seq "$REOPEN_ROUNDS"); do
		echo "# reopen round $r"
		# e: each iteration fills 1 GiB in a child process, kills it and times Open.
		run store.test '^BenchmarkReopenAfterCrash1GiB$' 1x
	done
} 2>&1 | tee "$OUT"

$BENCHSTAT "$OUT"
