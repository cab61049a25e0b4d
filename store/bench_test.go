package store

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
	"github.com/edgemq/edgemq/store/vfs"
)

// Benchmarks of the store's performance targets, each beside the ceiling it is judged
// against: the same bytes written to a plain file with the same fsync cadence, or the
// fdatasyncs per second the disk does. BENCHMARKS.md at the root has the targets, the
// numbers and the exact commands (scripts/bench-store.sh runs them all). They measure; none
// asserts a time.
//
// Messages are those of an edge gateway: topic "Telemetry", one tag, spread over 4 queues.

const (
	benchTopic   = "Telemetry"
	benchTag     = "TagA"
	benchQueues  = 4
	benchSegSize = 64 << 20 // the default segment size

	// The async flusher's cadence (commitlog.DefaultOptions), copied by the ceiling.
	ceilingFlushInterval = 500 * time.Millisecond
	ceilingFlushBytes    = 4 << 20
)

// benchOptions returns store options for benchmarks: 64 MiB segments, and no retention by
// disk usage (a benchmark must not delete its own data because the shared disk is fairly full).
func benchOptions(o Options) Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = benchSegSize
	}
	o.MaxUsedRatio = -1
	return o
}

// benchStore opens a store in b.TempDir() and closes it when the benchmark ends.
func benchStore(b *testing.B, o Options) *Store {
	b.Helper()
	o = benchOptions(o)
	s, err := Open(b.TempDir(), &o)
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			b.Errorf("Close: %v", err)
		}
	})
	return s
}

// benchBody returns a body of n printable bytes.
func benchBody(n int) []byte {
	body := make([]byte, n)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	return body
}

// benchBatches returns one batch of n messages per queue of topic: RocketMQ sends a batch to
// one queue. Append sets the store's fields on each call, so the batches can be reused.
func benchBatches(topic string, queues, n, bodySize int) [][]*Message {
	body := benchBody(bodySize)
	out := make([][]*Message, queues)
	for q := range out {
		for range n {
			out[q] = append(out[q], &Message{Topic: topic, QueueID: int32(q), Tags: benchTag, Body: body})
		}
	}
	return out
}

// recordSize returns the commitlog bytes of one benchmark message of bodySize bytes, as the
// store writes it (frame included), for the ceilings to write the same bytes.
func recordSize(b *testing.B, bodySize int) int {
	b.Helper()
	o := benchOptions(Options{Flush: commitlog.FlushAsync})
	s, err := Open(b.TempDir(), &o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := benchBatches(benchTopic, 1, 1, bodySize)[0]
	if err := s.Append(m); err != nil {
		b.Fatal(err)
	}
	return int(m[0].Size)
}

// reportRate reports n things per second of timed run as unit.
func reportRate(b *testing.B, n int, unit string) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), unit)
}

// Target a: async append of 1 KiB bodies, one message per Append, from one goroutine, at no
// less than 70 % of BenchmarkCeilingAsyncWrite/1KiB. The closing flush of the commitlog is
// timed, so the rate is of durable records, as the ceiling's. (Not Store.Flush: it races with
// the dispatcher's own checkpoint write, see BENCHMARKS.md.)
func BenchmarkAppendAsync1KiB(b *testing.B) {
	benchAppendAsync1KiB(b, Options{Flush: commitlog.FlushAsync})
}

// BenchmarkAppendAsync1KiBBuffered is BenchmarkAppendAsync1KiB with a 1 MiB write buffer
// (Options.WriteBuffer): records gathered in memory and written to the segment file in
// large writes instead of through its mapping.
func BenchmarkAppendAsync1KiBBuffered(b *testing.B) {
	benchAppendAsync1KiB(b, Options{Flush: commitlog.FlushAsync, WriteBuffer: 1 << 20})
}

func benchAppendAsync1KiB(b *testing.B, o Options) {
	s := benchStore(b, o)
	batches := benchBatches(benchTopic, benchQueues, 1, 1024)
	start := s.log.Written()
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := range b.N {
		if err := s.Append(batches[i%benchQueues]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.log.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu.report(b, b.N, "cpu-ns/rec")
	reportRate(b, b.N, "rec/s")
	b.ReportMetric(float64(s.log.Written()-start)/float64(b.N), "B/rec")
}

// Target b: async append of 100-byte bodies in batches of 32 from one goroutine, at least 2
// million records/s. The closing flush of the commitlog is timed. dispatched-rec/s counts
// until the dispatcher has indexed every record too (when consumers can see them).
func BenchmarkAppendAsyncBatch32(b *testing.B) {
	s := benchStore(b, Options{Flush: commitlog.FlushAsync})
	batches := benchBatches(benchTopic, benchQueues, 32, 100)
	b.SetBytes(32 * 100)
	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	for i := range b.N {
		if err := s.Append(batches[i%benchQueues]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.log.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	waitDispatched(b, s)
	reportRate(b, 32*b.N, "rec/s")
	b.ReportMetric(float64(32*b.N)/time.Since(t0).Seconds(), "dispatched-rec/s")
}

// BenchmarkCeilingAsyncWrite is the ceiling of targets a and b: the bytes the store writes
// for those messages (recordSize each, in the same write calls: one record, or 32 at a time),
// written sequentially into preallocated 64 MiB files with pwrite or through a shared
// mapping, while a flusher goroutine fdatasyncs every 500 ms or 4 MiB, as commitlog's async
// flusher does. The final fdatasync is timed.
func BenchmarkCeilingAsyncWrite(b *testing.B) {
	for _, size := range []struct {
		name        string
		body, batch int
	}{
		{"1KiB", 1024, 1},
		{"100Bx32", 100, 32},
	} {
		rec := recordSize(b, size.body)
		for _, mmap := range []bool{false, true} {
			name := size.name + "/pwrite"
			if mmap {
				name = size.name + "/mmap"
			}
			b.Run(name, func(b *testing.B) {
				w := newCeilingLog(b, mmap)
				chunk := make([]byte, rec*size.batch)
				copy(chunk, benchBody(len(chunk)))
				b.SetBytes(int64(size.body * size.batch))
				b.ReportAllocs()
				b.ResetTimer()
				cpu := startCPU()
				for range b.N {
					w.write(chunk)
				}
				w.flush()
				b.StopTimer()
				cpu.report(b, b.N*size.batch, "cpu-ns/rec")
				w.close()
				reportRate(b, b.N*size.batch, "rec/s")
				b.ReportMetric(float64(rec), "B/rec")
			})
		}
	}
}

// BenchmarkCeilingSeqWrite is the disk's sequential write, as `dd bs=1M conv=fdatasync`
// measures it: 1 MiB writes into a new file, one fdatasync at the end, timed. Target a is
// also read against it: writing 1 KiB records through a mapping costs the kernel a page
// fault per 4 KiB page, which one large write spares. Run it with -benchtime 1024x (1 GiB,
// as much as the 1 KiB benchmarks write).
func BenchmarkCeilingSeqWrite(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "seq"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := benchBody(1 << 20)
	b.SetBytes(1 << 20)
	b.ResetTimer()
	cpu := startCPU()
	for i := range b.N {
		if _, err := f.WriteAt(buf, int64(i)<<20); err != nil {
			b.Fatal(err)
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu.report(b, b.N*256, "cpu-ns/page")
}

// cpuClock reads the process's CPU time (user and system, every thread: the appender's
// and the flusher's, the kernel's work for them included). On a shared machine CPU time
// per record moves less with other load than records per second.
type cpuClock int64

func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func startCPU() cpuClock { return cpuClock(processCPU()) }

// report reports the CPU time since c per n things as unit.
func (c cpuClock) report(b *testing.B, n int, unit string) {
	b.ReportMetric(float64(processCPU()-int64(c))/float64(n), unit)
}

// ceilingLog writes sequentially into preallocated segment files, as plainly as can be.
type ceilingLog struct {
	b    *testing.B
	dir  string
	mmap bool

	mu    sync.Mutex // guards files against the flusher
	files []*os.File

	data []byte // mapping of the last file (mmap mode)
	off  int64  // write offset in the last file

	written, durable atomic.Int64
	kick             chan struct{}
	done             chan struct{}
	wg               sync.WaitGroup
}

func newCeilingLog(b *testing.B, mmap bool) *ceilingLog {
	w := &ceilingLog{b: b, dir: b.TempDir(), mmap: mmap, kick: make(chan struct{}, 1), done: make(chan struct{})}
	w.roll()
	w.wg.Add(1)
	go w.flushLoop()
	return w
}

func (w *ceilingLog) roll() {
	if w.data != nil {
		if err := unix.Munmap(w.data); err != nil {
			w.b.Fatal(err)
		}
		w.data = nil
	}
	f, err := os.OpenFile(filepath.Join(w.dir, fmt.Sprintf("%020d.seg", len(w.files))), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		w.b.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, benchSegSize); err != nil {
		w.b.Fatal(err)
	}
	if w.mmap {
		if w.data, err = unix.Mmap(int(f.Fd()), 0, benchSegSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			w.b.Fatal(err)
		}
	}
	w.mu.Lock()
	w.files = append(w.files, f)
	w.mu.Unlock()
	w.off = 0
}

func (w *ceilingLog) write(p []byte) {
	if w.off+int64(len(p)) > benchSegSize {
		w.roll()
	}
	if w.mmap {
		copy(w.data[w.off:], p)
	} else if _, err := w.files[len(w.files)-1].WriteAt(p, w.off); err != nil {
		w.b.Fatal(err)
	}
	w.off += int64(len(p))
	end := w.written.Add(int64(len(p)))
	if end-w.durable.Load() >= ceilingFlushBytes {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

func (w *ceilingLog) flushLoop() {
	defer w.wg.Done()
	t := time.NewTicker(ceilingFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.kick:
		case <-t.C:
		case <-w.done:
			return
		}
		w.flush()
	}
}

// flush fdatasyncs every file written since the last flush. The flusher and, at the end,
// the writer call it; w.mu serializes them.
func (w *ceilingLog) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	target, from := w.written.Load(), w.durable.Load()
	if target == from {
		return
	}
	// Files hold at most benchSegSize bytes; a file index is a lower bound, so sync from there.
	for _, f := range w.files[min(int(from/benchSegSize), len(w.files)-1):] {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			w.b.Error(err)
		}
	}
	w.durable.Store(target)
}

func (w *ceilingLog) close() {
	close(w.done)
	w.wg.Wait()
	if w.data != nil {
		unix.Munmap(w.data)
	}
	for _, f := range w.files {
		f.Close()
	}
}

// Target c: sync append of 100-byte bodies by 64 concurrent appenders (one message per
// Append), at least 150,000 records/s. fsync/s and rec/fsync count the fdatasyncs of
// commitlog segments: the ceiling is 64 × BenchmarkCeilingFdatasync's fsync/s.
func BenchmarkAppendSync64(b *testing.B) {
	cfs := &syncCountFS{FS: vfs.OS}
	s := benchStore(b, Options{FS: cfs, Flush: commitlog.FlushSync})
	body := benchBody(100)
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((64 + procs - 1) / procs)
	var id atomic.Int32
	b.SetBytes(100)
	b.ReportAllocs()
	b.ResetTimer()
	cfs.syncs.Store(0)
	b.RunParallel(func(pb *testing.PB) {
		q := (id.Add(1) - 1) % benchQueues
		batch := []*Message{{Topic: benchTopic, QueueID: q, Tags: benchTag, Body: body}}
		for pb.Next() {
			if err := s.Append(batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	syncs := cfs.syncs.Load()
	reportRate(b, b.N, "rec/s")
	reportRate(b, int(syncs), "fsync/s")
	b.ReportMetric(float64(b.N)/float64(max(syncs, 1)), "rec/fsync")
	b.ReportMetric(float64(id.Load()), "appenders")
}

// BenchmarkCeilingFdatasync is the ceiling of target c: one goroutine writes 4 KiB and
// fdatasyncs, in a loop. prealloc writes into a fallocated file (as the commitlog's
// segments are: each fdatasync also commits the unwritten-to-written extent change), append
// grows the file, overwrite rewrites blocks already written and synced (no metadata at all).
func BenchmarkCeilingFdatasync(b *testing.B) {
	const size = 4 << 10
	for _, mode := range []string{"prealloc", "append", "overwrite"} {
		b.Run("4KiB/"+mode, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "sync"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const span = 1 << 30 // wrap within 1 GiB
			switch mode {
			case "prealloc":
				err = unix.Fallocate(int(f.Fd()), 0, 0, span)
			case "overwrite":
				_, err = f.WriteAt(make([]byte, 64<<20), 0)
				if err == nil {
					err = f.Sync()
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			buf := benchBody(size)
			off := int64(0)
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
				off += size
				if mode == "overwrite" {
					off %= 64 << 20
				} else {
					off %= span
				}
			}
			b.StopTimer()
			reportRate(b, b.N, "fsync/s")
			reportRate(b, 64*b.N, "ceiling-rec/s")
		})
	}
}

// prefilledQueue returns a store whose queue 0 of benchTopic holds n messages of 100-byte
// bodies, dispatched and flushed.
func prefilledQueue(b *testing.B, n int) *Store {
	b.Helper()
	s := benchStore(b, Options{Flush: commitlog.FlushAsync})
	batch := benchBatches(benchTopic, 1, 32, 100)[0]
	for i := 0; i < n; i += 32 {
		if err := s.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.log.Flush(); err != nil {
		b.Fatal(err)
	}
	waitDispatched(b, s)
	return s
}

const getPrefill = 1 << 20 // 1 Mi messages, about 128 MiB of log: more than the CPU caches

// Target d: sequential GetMessages of 32 messages at a time from one queue, at least 3
// million messages/s.
func BenchmarkGetMessages32(b *testing.B) {
	s := prefilledQueue(b, getPrefill)
	b.SetBytes(32 * 100)
	b.ReportAllocs()
	cpu := startCPU()
	off := int64(0)
	for b.Loop() {
		res, err := s.GetMessages(benchTopic, 0, off, 32, nil)
		if err != nil || len(res.Messages) != 32 {
			b.Fatalf("GetMessages at %d: %d messages, %v, %v", off, len(res.Messages), res.Status, err)
		}
		off = res.NextBeginOffset
		if off+32 > getPrefill {
			off = 0
		}
	}
	cpu.report(b, 32*b.N, "cpu-ns/msg") // the process's: GC and other goroutines included
	reportRate(b, 32*b.N, "msg/s")
}

// BenchmarkGetMessagesCeiling is the ceiling of target d: what GetMessages cannot avoid
// doing, on the same data. It reads 32 consume-queue entries, reads each record from the
// commitlog (checksum included) and copies its payload into one buffer; it neither decodes
// messages nor builds a result.
func BenchmarkGetMessagesCeiling(b *testing.B) {
	s := prefilledQueue(b, getPrefill)
	q, _ := s.queueFor(benchTopic, 0, false)
	r := s.log.NewReader()
	defer r.Close()
	var ents [32]cqueue.Entry
	var buf []byte
	b.SetBytes(32 * 100)
	b.ReportAllocs()
	cpu := startCPU()
	off := int64(0)
	for b.Loop() {
		n, err := q.cq.Read(off, ents[:])
		if err != nil || n != 32 {
			b.Fatalf("Read at %d: %d entries, %v", off, n, err)
		}
		buf = buf[:0]
		for _, e := range ents[:n] {
			rec, err := r.Read(e.Pos)
			if err != nil {
				b.Fatal(err)
			}
			buf = append(buf, rec.Payload...)
		}
		off += 32
		if off+32 > getPrefill {
			off = 0
		}
	}
	cpu.report(b, 32*b.N, "cpu-ns/msg")
	reportRate(b, 32*b.N, "msg/s")
}

// Target e: reopen after a crash of a store holding 1 GiB, at most 1 s. A child process (this
// test binary running TestReopenBenchChild) fills a store (async, 64 MiB segments, 8 queues
// over 2 topics, batches of 32) past 1 GiB of commitlog and is SIGKILLed while still
// appending, so no clean checkpoint is written. The parent then times Open, and Open plus
// the first GetMessages (32 messages at offset 0 of one queue). replay-MB is the commitlog
// that Open re-dispatched: from the dispatch checkpoint the child left to the end. cold drops
// the store's files from the page cache first (fdatasync, then posix_fadvise DONTNEED on each
// file), as after a power cut; warm keeps them, as after a process crash.
//
// ns/op, B/op and allocs/op are overridden to be those of Open alone: the timer also runs
// through the fill, so that the default -benchtime stops at one iteration (each fills 1 GiB).
// It is skipped under -short. EDGEMQ_DEBUG=1 prints the recovery log.
func BenchmarkReopenAfterCrash1GiB(b *testing.B) {
	if testing.Short() {
		b.Skip("fills 1 GiB per iteration")
	}
	for _, bc := range []struct {
		body int
		cold bool
	}{{100, false}, {100, true}, {1024, false}, {1024, true}} {
		name := fmt.Sprintf("body=%d/warm", bc.body)
		if bc.cold {
			name = fmt.Sprintf("body=%d/cold", bc.body)
		}
		b.Run(name, func(b *testing.B) {
			var open, first time.Duration
			var allocs, bytes uint64
			var replay int64
			for range b.N {
				dir := b.TempDir()
				acked := crashFill(b, dir, bc.body, 1<<30)
				if bc.cold {
					dropCache(b, dir)
				}
				ckpt := int64(commitlog.HeaderSize) // no usable dispatch checkpoint: replay from the start
				if raw, err := os.ReadFile(filepath.Join(dir, dispatchName)); err == nil {
					if ck, err := unmarshalCheckpoint(raw); err == nil {
						ckpt = ck.pos
					}
				}
				o := benchOptions(Options{Flush: commitlog.FlushAsync})
				if os.Getenv("EDGEMQ_DEBUG") != "" { // recovery's own account, on stderr
					o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
				}
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				t0 := time.Now()
				s, err := Open(dir, &o)
				t1 := time.Now()
				if err != nil {
					b.Fatalf("Open after kill: %v", err)
				}
				res, err := s.GetMessages(benchTopic, 0, 0, 32, nil)
				t2 := time.Now()
				runtime.ReadMemStats(&m1)
				if err != nil || res.Status != Found || len(res.Messages) != 32 {
					b.Fatalf("first GetMessages: %d messages, %v, %v", len(res.Messages), res.Status, err)
				}
				replay += s.log.Written() - ckpt
				open += t1.Sub(t0)
				first += t2.Sub(t0)
				allocs += m1.Mallocs - m0.Mallocs
				bytes += m1.TotalAlloc - m0.TotalAlloc
				var total int64
				for _, qi := range s.Queues("") {
					total += qi.MaxOffset - qi.MinOffset
				}
				if total < acked {
					b.Fatalf("%d messages after reopen, the child had appended %d before it was killed", total, acked)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(dir)
			}
			n := float64(b.N)
			b.ReportMetric(float64(open.Nanoseconds())/n, "ns/op")
			b.ReportMetric(float64(bytes)/n, "B/op")
			b.ReportMetric(float64(allocs)/n, "allocs/op")
			b.ReportMetric(open.Seconds()*1000/n, "open-ms")
			b.ReportMetric(first.Seconds()*1000/n, "first-get-ms")
			b.ReportMetric(float64(replay)/1e6/n, "replay-MB")
		})
	}
}

// crashFill runs TestReopenBenchChild to fill dir with fill bytes of commitlog, kills it and
// returns how many messages it had appended when it reported the fill.
func crashFill(b *testing.B, dir string, body int, fill int64) int64 {
	b.Helper()
	cmd := childCommand(b, "TestReopenBenchChild", "EDGEMQ_REOPEN_DIR="+dir,
		fmt.Sprintf("EDGEMQ_REOPEN_BODY=%d", body), fmt.Sprintf("EDGEMQ_REOPEN_BYTES=%d", fill))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var acked int64
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "FILLED "); ok {
			acked, _ = strconv.ParseInt(n, 10, 64)
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if acked == 0 {
		b.Fatalf("child did not fill the store")
	}
	return acked
}

// TestReopenBenchChild is the child of BenchmarkReopenAfterCrash1GiB: it appends until the
// commitlog holds EDGEMQ_REOPEN_BYTES, prints "FILLED <messages>", and goes on appending until
// it is killed.
func TestReopenBenchChild(t *testing.T) {
	dir := os.Getenv("EDGEMQ_REOPEN_DIR")
	if dir == "" {
		t.Skip("child process of BenchmarkReopenAfterCrash1GiB")
	}
	body, _ := strconv.Atoi(os.Getenv("EDGEMQ_REOPEN_BODY"))
	fill, _ := strconv.ParseInt(os.Getenv("EDGEMQ_REOPEN_BYTES"), 10, 64)
	o := benchOptions(Options{Flush: commitlog.FlushAsync})
	s, err := Open(dir, &o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	batches := append(benchBatches(benchTopic, benchQueues, 32, body), benchBatches("Events", benchQueues, 32, body)...)
	filled := false
	for i, n := 0, int64(0); ; i++ {
		if err := s.Append(batches[i%len(batches)]); err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			os.Exit(4)
		}
		n += 32
		if !filled && s.log.Written()-s.log.MinPos() >= fill {
			fmt.Printf("FILLED %d\n", n)
			if os.Getenv("EDGEMQ_DEBUG") != "" {
				fmt.Fprintf(os.Stderr, "child: filled: written %d dispatched %d\n", s.log.Written(), s.DispatchedPos())
			}
			filled = true
		}
	}
}

// dropCache makes every file under dir durable, then drops it from the page cache.
func dropCache(b *testing.B, dir string) {
	b.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// Target f: bytes on disk per message, at most 150, for 100-byte bodies with topic
// "Telemetry" and one tag: 1,000,000 messages appended (batches of 32, async) over 4 queues,
// then Close. B/msg counts the bytes in use: commitlog from MinPos to Written plus the first
// segment header (the unused tail of a sealed segment, under one record, is counted too), and
// 20 bytes per consume-queue entry. du-B/msg is what the files occupy on disk (st_blocks,
// meta.db and checkpoints included): preallocated segments and queue files make it larger.
// minimal sets only topic, queue, tag and body; producer also sets BornHost (IPv4) and a
// BornTime 2 ms before the store time, as a RocketMQ producer does.
func BenchmarkBytesPerMessage(b *testing.B) {
	const n = 1_000_000
	for _, producer := range []bool{false, true} {
		name := "minimal"
		if producer {
			name = "producer"
		}
		b.Run(name, func(b *testing.B) {
			var used, logUsed, cqUsed, du int64
			for range b.N {
				dir := b.TempDir()
				o := benchOptions(Options{Flush: commitlog.FlushAsync})
				s, err := Open(dir, &o)
				if err != nil {
					b.Fatal(err)
				}
				batches := benchBatches(benchTopic, benchQueues, 32, 100)
				host := netip.MustParseAddrPort("192.168.1.20:50000")
				for i := 0; i < n; i += 32 {
					batch := batches[(i/32)%benchQueues]
					if producer {
						born := time.Now().UnixMilli() - 2
						for _, m := range batch {
							m.BornHost, m.BornTime = host, born
						}
					}
					if err := s.Append(batch); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.log.Flush(); err != nil {
					b.Fatal(err)
				}
				waitDispatched(b, s)
				lu := s.log.Written() - s.log.MinPos() + commitlog.HeaderSize
				var entries int64
				for _, qi := range s.Queues("") {
					entries += qi.MaxOffset - qi.MinOffset
				}
				if entries != n {
					b.Fatalf("%d queue entries, want %d", entries, n)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				logUsed += lu
				cqUsed += cqueue.EntrySize * entries
				used += lu + cqueue.EntrySize*entries
				du += duBytes(b, dir)
				os.RemoveAll(dir)
			}
			per := float64(b.N) * n
			b.ReportMetric(float64(used)/per, "B/msg")
			b.ReportMetric(float64(logUsed)/per, "log-B/msg")
			b.ReportMetric(float64(cqUsed)/per, "cq-B/msg")
			b.ReportMetric(float64(du)/per, "du-B/msg")
		})
	}
}

// duBytes returns the bytes the files under dir occupy on disk, as du counts them.
func duBytes(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

// syncCountFS counts the fdatasyncs of commitlog segment files.
type syncCountFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (c *syncCountFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(filepath.Dir(name)) != commitlogDir || filepath.Base(name) == "checkpoint" {
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
