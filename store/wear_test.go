//go:build linux

package store

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Flash wear and acknowledgement latency (BenchmarkWear).
//
// A paced producer appends 100-byte telemetry messages at a fixed rate, one AppendAsync at
// a time (so a slow acknowledgement does not slow the schedule), and the benchmark reads
// /proc/diskstats for the block device under the data dir before and after: what the kernel
// actually wrote (data pages, the journal, queue files and checkpoints) per message, and the
// cache flushes it sent. By default the data dir is on a fresh ext4 image on a loop device
// (root, losetup, mkfs.ext4), whose counters see the store's writes only; EDGEMQ_WEAR_DIR
// names another dir (then other writers to its device count too). EDGEMQ_WEAR_THROTTLE
// ("BYTES_PER_SECOND:WRITES_PER_SECOND", e.g. "10485760:500", a slow SD card) caps the
// image's writes with the kernel's block throttle (cgroup v1 blkio, root cgroup), to see
// what a slow flash device does to the same settings. EDGEMQ_WEAR_ZERO_AHEAD sets the
// store's ZeroAhead for the sync cells (bytes; -1: no zeros written ahead).

// diskStats are the counters of one block device in /proc/diskstats.
type diskStats struct {
	sectorsWritten int64 // 512-byte units, whatever the device's sector size
	writes         int64 // write requests completed
	flushes        int64 // cache flush requests completed (kernel 5.5 and later)
}

// readDiskStats returns the counters of the device holding dir, and its name.
func readDiskStats(tb testing.TB, dir string) (diskStats, string) {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		tb.Fatal(err)
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	f, err := os.Open("/proc/diskstats")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 14 || fs[0] != strconv.FormatUint(uint64(major), 10) || fs[1] != strconv.FormatUint(uint64(minor), 10) {
			continue
		}
		num := func(i int) int64 {
			if 3+i >= len(fs) {
				return 0
			}
			n, _ := strconv.ParseInt(fs[3+i], 10, 64)
			return n
		}
		return diskStats{sectorsWritten: num(6), writes: num(4), flushes: num(15)}, fs[2]
	}
	tb.Fatalf("device %d:%d of %s not in /proc/diskstats", major, minor, dir)
	return diskStats{}, ""
}

// wearDir returns the parent of the benchmark's data dirs.
func wearDir(b *testing.B) string {
	if d := os.Getenv("EDGEMQ_WEAR_DIR"); d != "" {
		if os.Getenv("EDGEMQ_WEAR_THROTTLE") != "" {
			// Throttling a shared device would slow every other writer on the machine.
			b.Fatal("EDGEMQ_WEAR_THROTTLE caps the benchmark's own loop device: not with EDGEMQ_WEAR_DIR")
		}
		return d
	}
	im := newExt4Image(b, 4<<30)
	if t := os.Getenv("EDGEMQ_WEAR_THROTTLE"); t != "" {
		throttleDevice(b, im.mnt, t)
	}
	return im.mnt
}

// blkioDir is the root of cgroup v1's blkio hierarchy, whose throttle limits apply to
// every write to a device, whoever issues it (writeback included).
const blkioDir = "/sys/fs/cgroup/blkio"

// throttleDevice caps the writes to the device under dir at spec, "BPS:IOPS" (either may
// be 0: no cap), until the benchmark ends.
func throttleDevice(b *testing.B, dir, spec string) {
	bps, iops, ok := strings.Cut(spec, ":")
	nb, err1 := strconv.ParseUint(bps, 10, 64)
	ni, err2 := strconv.ParseUint(iops, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		b.Fatalf("EDGEMQ_WEAR_THROTTLE=%q: want BYTES_PER_SECOND:WRITES_PER_SECOND, e.g. 10485760:500", spec)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		b.Fatal(err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	limits := []struct {
		file string
		v    uint64
	}{{"blkio.throttle.write_bps_device", nb}, {"blkio.throttle.write_iops_device", ni}}
	set := func(file string, v uint64) error {
		return os.WriteFile(blkioDir+"/"+file, fmt.Appendf(nil, "%s %d", dev, v), 0)
	}
	b.Cleanup(func() { // before the image's own cleanup detaches the device
		for _, l := range limits {
			if err := set(l.file, 0); err != nil {
				b.Errorf("lifting the throttle of %s: %v", dev, err)
			}
		}
	})
	for _, l := range limits {
		if err := set(l.file, l.v); err != nil {
			b.Fatalf("EDGEMQ_WEAR_THROTTLE needs cgroup v1's blkio throttle: %v", err)
		}
	}
	b.Logf("writes to %s capped at %d bytes and %d requests a second", dev, nb, ni)
}

// wearSeconds is how long each paced run lasts: EDGEMQ_WEAR_SECONDS, default 5.
func wearSeconds() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("EDGEMQ_WEAR_SECONDS")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 5 * time.Second
}

// BenchmarkWear measures device bytes per message and acknowledgement latency of a paced
// stream of 100-byte messages to a store with the sync flush policy, for rates × Linger, and
// for messages of an async topic (DurabilityAsync) with a few flush intervals (the loss
// bound). It reports devB/msg (bytes the device was asked to
// write, per message), flush/msg (device cache flushes per message) and the latency of the
// acknowledgement from the AppendAsync call, p50 and p99 in µs. The fdatasync sub-benchmark
// is the ceiling in the same minutes: a 100-byte write into a preallocated file and its
// fdatasync, paced at 100/s. Run it with -benchtime=1x (each run lasts
// EDGEMQ_WEAR_SECONDS); scripts/bench-wear.sh does, and interleaves rounds.
func BenchmarkWear(b *testing.B) {
	parent := wearDir(b)
	_, dev := readDiskStats(b, parent)
	b.Logf("data dirs under %s, device %s", parent, dev)
	type cell struct {
		name   string
		rate   int
		dur    Durability // of every message, in a store with the sync flush policy
		linger time.Duration
		every  time.Duration // async flush interval
		qflush time.Duration // QueueFlushInterval
	}
	var cells []cell
	for _, rate := range []int{100, 1000, 10000} {
		for _, l := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 9 * time.Millisecond} {
			cells = append(cells, cell{fmt.Sprintf("rate=%d/sync/linger=%v", rate, l), rate, DurabilityDefault, l, 0, 0})
		}
		for _, e := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond} {
			cells = append(cells, cell{fmt.Sprintf("rate=%d/async-topic/every=%v", rate, e), rate, DurabilityAsync, 0, e, 0})
		}
		if rate == 100 { // what the queue syncs cost: the old default against the new
			for _, q := range []time.Duration{time.Second, 10 * time.Second} {
				cells = append(cells, cell{fmt.Sprintf("rate=%d/async-topic/every=500ms/qflush=%v", rate, q), rate, DurabilityAsync, 0, 500 * time.Millisecond, q})
			}
		}
	}
	if only := os.Getenv("EDGEMQ_WEAR_ONLY"); only != "" { // a comma-separated list of rates
		cells = slices.DeleteFunc(cells, func(c cell) bool {
			return !slices.Contains(strings.Split(only, ","), strconv.Itoa(c.rate))
		})
	}
	var za int64 // the store's ZeroAhead: EDGEMQ_WEAR_ZERO_AHEAD, default the store's
	if v := os.Getenv("EDGEMQ_WEAR_ZERO_AHEAD"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("EDGEMQ_WEAR_ZERO_AHEAD=%q: want bytes (negative: off)", v)
		}
		za = n
	}
	b.Run("fdatasync", func(b *testing.B) {
		for range b.N {
			wearFdatasync(b, parent, 100)
		}
	})
	for _, c := range cells {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				dir, err := os.MkdirTemp(parent, "wear")
				if err != nil {
					b.Fatal(err)
				}
				wearRun(b, dir, c.rate, c.dur, &Options{Linger: c.linger, FlushInterval: c.every, QueueFlushInterval: c.qflush, ZeroAhead: za})
				os.RemoveAll(dir)
			}
		})
	}
}

// wearRun appends 100-byte messages to a store in dir at rate msgs/s for wearSeconds and
// reports what the device wrote per message and the acknowledgement latency.
func wearRun(b *testing.B, dir string, rate int, dur Durability, o *Options) {
	s, err := Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 100)
	msg := func() *Message { return &Message{Topic: "telemetry", Body: body, Durability: dur} }
	for range 100 { // warm up: the queue and its file exist
		if err := s.Append([]*Message{msg()}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	unix.Sync()
	n := int(int64(rate) * int64(wearSeconds()) / int64(time.Second))
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	wg.Add(n)
	before, _ := readDiskStats(b, dir)
	period := time.Second / time.Duration(rate)
	start := time.Now()
	b.ResetTimer()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * period)); d > 0 {
			time.Sleep(d)
		}
		t0 := time.Now()
		err := s.AppendAsync([]*Message{msg()}, func(err error) {
			if err != nil {
				b.Error(err)
			}
			lat[i] = time.Since(t0)
			wg.Done()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, _ := readDiskStats(b, dir)
	b.StopTimer()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(after.sectorsWritten-before.sectorsWritten)*512/float64(n), "devB/msg")
	b.ReportMetric(float64(after.flushes-before.flushes)/float64(n), "flush/msg")
	b.ReportMetric(float64(lat[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[n*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
}

// wearFdatasync writes 100 bytes into a preallocated file and fdatasyncs it, rate times a
// second for wearSeconds, and reports the fdatasync latency and the device bytes per write.
func wearFdatasync(b *testing.B, parent string, rate int) {
	f, err := os.CreateTemp(parent, "fdatasync")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 64<<20); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	n := int(int64(rate) * int64(wearSeconds()) / int64(time.Second))
	lat := make([]time.Duration, n)
	buf := make([]byte, 100)
	before, _ := readDiskStats(b, parent)
	period := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * period)); d > 0 {
			time.Sleep(d)
		}
		if _, err := f.WriteAt(buf, int64(i)*100); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	after, _ := readDiskStats(b, parent)
	slices.Sort(lat)
	b.ReportMetric(float64(after.sectorsWritten-before.sectorsWritten)*512/float64(n), "devB/msg")
	b.ReportMetric(float64(after.flushes-before.flushes)/float64(n), "flush/msg")
	b.ReportMetric(float64(lat[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[n*99/100].Microseconds()), "p99-µs")
}
