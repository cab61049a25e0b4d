package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemq/edgemq/store/vfs"
)

// Benchmarks of the log alone, under the message store. The store's targets and the
// ceilings they are judged against are in store/bench_test.go; these say how much of the
// store's time the log itself takes. BENCHMARKS.md at the root has the numbers and the
// commands. They measure; none asserts a time.

const benchSegSize = 64 << 20 // the store's default segment size

// benchLog opens a log in b.TempDir() with 64 MiB segments. Retention by disk usage is off: a
// benchmark must not delete its own data because the shared disk is fairly full.
func benchLog(b *testing.B, o Options) *Log {
	b.Helper()
	o.SegmentSize = benchSegSize
	o.MaxUsedRatio = -1
	l := openTest(b, b.TempDir(), o)
	b.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			b.Errorf("Close: %v", err)
		}
	})
	return l
}

// reportRate reports n things per second of timed run as unit.
func reportRate(b *testing.B, n int, unit string) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), unit)
}

// BenchmarkAppendAsync appends in async mode from one goroutine: one 1 KiB record per
// Append (target a of the store) and batches of 32 100-byte records (target b). The final
// Flush is timed, so the rate is of durable bytes.
func BenchmarkAppendAsync(b *testing.B) {
	for _, bc := range []struct {
		name        string
		size, batch int
	}{
		{"1KiB", 1024, 1},
		{"100Bx32", 100, 32},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := benchLog(b, Options{Flush: FlushAsync})
			payloads := make([][]byte, bc.batch)
			for i := range payloads {
				payloads[i] = bytes.Repeat([]byte{'a' + byte(i%26)}, bc.size)
			}
			start := l.Written()
			b.SetBytes(int64(bc.size * bc.batch))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := l.Append(time.Now().UnixMilli(), payloads, nil); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Flush(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportRate(b, b.N*bc.batch, "rec/s")
			b.ReportMetric(float64(l.Written()-start)/float64(b.N*bc.batch), "B/rec")
		})
	}
}

// BenchmarkAppendSync64 runs 64 appenders of one 100-byte record each in sync mode: every
// Append waits for an fsync, which concurrent appenders share (group commit).
func BenchmarkAppendSync64(b *testing.B) {
	fs := &syncCountFS{FS: vfs.OS}
	l := benchLog(b, Options{FS: fs, Flush: FlushSync})
	p := bytes.Repeat([]byte{'s'}, 100)
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((64 + procs - 1) / procs)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	fs.syncs.Store(0)
	b.RunParallel(func(pb *testing.PB) {
		payloads := [][]byte{p}
		for pb.Next() {
			end, err := l.Append(time.Now().UnixMilli(), payloads, nil)
			if err == nil {
				err = l.WaitDurable(end)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	syncs := fs.syncs.Load()
	reportRate(b, b.N, "rec/s")
	reportRate(b, int(syncs), "fsync/s")
	b.ReportMetric(float64(b.N)/float64(max(syncs, 1)), "rec/fsync")
}

// BenchmarkReaderRead reads 100-byte records in log order, as GetMessages does below its
// consume queue: checksum, decode, no copy.
func BenchmarkReaderRead(b *testing.B) {
	l := benchLog(b, Options{Flush: FlushAsync})
	const n = 1 << 20
	payloads := make([][]byte, 32)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{'r'}, 100)
	}
	pos := make([]int64, 0, n)
	batchPos := make([]int64, 32)
	for len(pos) < n {
		if _, err := l.Append(time.Now().UnixMilli(), payloads, batchPos); err != nil {
			b.Fatal(err)
		}
		pos = append(pos, batchPos...)
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	r := l.NewReader()
	defer r.Close()
	b.SetBytes(100)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rec, err := r.Read(pos[i])
		if err != nil || len(rec.Payload) != 100 {
			b.Fatalf("Read(%d): %d bytes, %v", pos[i], len(rec.Payload), err)
		}
		i = (i + 1) % n
	}
	reportRate(b, b.N, "rec/s")
}

// syncCountFS counts the fdatasyncs of segment files (the checkpoint's are not counted).
type syncCountFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (c *syncCountFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) == checkpointName {
		return f, err
	}
	return syncCountFile{f, &c.syncs}, nil
}

type syncCountFile struct {
	vfs.File
	n *atomic.Int64
}

func (f syncCountFile) Sync() error {
	f.n.Add(1)
	return f.File.Sync()
}

// BenchmarkOpenFreshTail opens a log whose active 64 MiB segment holds one record: recovery
// walks the record, then scans the zeros after it back from the end of the segment, the
// work every restart of an idle gateway does.
func BenchmarkOpenFreshTail(b *testing.B) {
	dir := b.TempDir()
	o := Options{SegmentSize: benchSegSize, MaxUsedRatio: -1}
	l := openTest(b, dir, o)
	if _, err := l.Append(time.Now().UnixMilli(), [][]byte{[]byte("one record")}, nil); err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		l := openTest(b, dir, o)
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncAppendDiskWrites measures what the disk writes for each fsynced append of
// 100 bytes, after 27 MB streamed into the log (which lets the kernel's readahead grow the
// page-cache folios of the mapping, were the mapping not advised random; see vfs.File.Map).
// It reports disk-KiB/op from the block device's own counter (/sys/dev/block/M:m/stat,
// sectors written), so anything else writing to the device meanwhile counts too.
func BenchmarkSyncAppendDiskWrites(b *testing.B) {
	dir := b.TempDir()
	written := deviceSectorsWritten(b, dir)
	l := benchLog(b, Options{Flush: FlushSync})
	p := bytes.Repeat([]byte("x"), 100)
	var end int64
	var err error
	for range 200_000 {
		if end, err = l.Append(1, [][]byte{p}, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.WaitDurable(end); err != nil {
		b.Fatal(err)
	}
	s0 := written()
	b.ResetTimer()
	for range b.N {
		end, err := l.Append(1, [][]byte{p}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.WaitDurable(end); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(written()-s0)*512/1024/float64(b.N), "disk-KiB/op")
}

// deviceSectorsWritten returns a reader of the sectors written to the block device holding
// dir, or skips b where it cannot find one.
func deviceSectorsWritten(b *testing.B, dir string) func() int64 {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		b.Skip(err)
	}
	path := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))
	read := func() int64 {
		raw, err := os.ReadFile(path)
		f := strings.Fields(string(raw))
		if err != nil || len(f) < 7 {
			b.Skipf("no block device statistics for %s (%s): %v", dir, path, err)
		}
		n, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			b.Skip(err)
		}
		return n
	}
	read()
	return read
}

// BenchmarkRoll times the append that rolls the log into a new segment: what every sender
// waits for under the append lock once per segment. The log has 1 MiB segments filled with
// 4 KiB records in async mode, and keeps 64 of them (a roll deletes the oldest). Each
// iteration appends until a roll happens and times only the append that rolled, then
// pauses 20 ms untimed: at 64 MiB a segment lasts far longer than the preparer needs to
// ready the next one, and the pause keeps it so here. ns/roll is the metric, roll-max-µs the
// slowest roll. The benchmark's timer runs through whole iterations (ns/op, ~25 ms each), so
// that -benchtime sizes b.N by them: timed by the rolls alone (~200 µs of each iteration), a
// 1 s benchtime asked for a million iterations, hours.
func BenchmarkRoll(b *testing.B) {
	l := openTest(b, b.TempDir(), Options{SegmentSize: 1 << 20, Flush: FlushAsync, MaxUsedRatio: -1, MaxBytes: 64 << 20})
	b.Cleanup(func() { l.Close() })
	rec := [][]byte{make([]byte, 4<<10)}
	var total, slowest time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for base := l.active.base; ; {
			start := time.Now()
			if _, err := l.Append(1, rec, nil); err != nil {
				b.Fatal(err)
			}
			if d := time.Since(start); l.active.base != base {
				total += d
				slowest = max(slowest, d)
				time.Sleep(20 * time.Millisecond)
				break
			}
		}
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/roll")
	b.ReportMetric(float64(slowest.Microseconds()), "roll-max-µs")
}
