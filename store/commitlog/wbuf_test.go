package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/internal/vfstest"
	"github.com/edgemq/edgemq/store/vfs"
)

// wbufPayload is record i of the write buffer tests: mostly small, every 37th larger than
// the buffer, so that batches that do not fit an empty buffer are written too.
func wbufPayload(i int) []byte {
	if i%37 == 36 {
		return bytes.Repeat([]byte{byte('A' + i%26)}, 5000+i%100)
	}
	return payload(i)
}

// TestWriteBufferReadsEveryRecord: with a write buffer, a reader that follows the writer
// reads every record below Written, those still in the buffer included, across rolls; and
// after Close the log holds them all, as read without the buffer.
func TestWriteBufferReadsEveryRecord(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode FlushMode) {
		const n = 2000
		dir := t.TempDir()
		o := Options{Flush: mode, WriteBuffer: 4096, FlushInterval: time.Hour, FlushBytes: 1 << 30}
		l := openTest(t, dir, o)
		var wg sync.WaitGroup
		errc := make(chan error, 1)
		var appended atomic.Bool
		wg.Go(func() {
			r := l.NewReader()
			defer r.Close()
			p := l.MinPos()
			for i := 0; i < n; {
				rec, err := r.Next(p)
				if errors.Is(err, ErrNoRecord) {
					if appended.Load() {
						if _, err := r.Next(p); errors.Is(err, ErrNoRecord) {
							errc <- fmt.Errorf("record %d at %d: not found below Written %d", i, p, l.Written())
							return
						}
					}
					runtime.Gosched() // caught up with the writer
					continue
				}
				if err != nil {
					errc <- err
					return
				}
				if want := wbufPayload(i); !bytes.Equal(rec.Payload, want) {
					errc <- fmt.Errorf("record %d at %d: %.20q, want %.20q", i, p, rec.Payload, want)
					return
				}
				i++
				p = rec.Next
			}
		})
		for i := range n {
			end, err := l.Append(int64(i), [][]byte{wbufPayload(i)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if mode == FlushSync && i%100 == 0 {
				if err := l.WaitDurable(end); err != nil {
					t.Fatal(err)
				}
			}
		}
		appended.Store(true)
		wg.Wait()
		select {
		case err := <-errc:
			t.Fatal(err)
		default:
		}
		if segs := len(*l.segs.Load()); segs < 3 {
			t.Fatalf("%d segments: the test wants rolls", segs)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openTest(t, dir, Options{})
		defer l.Close()
		got, _ := readAll(t, l)
		if len(got) != n {
			t.Fatalf("%d records after reopening, want %d", len(got), n)
		}
		for i, p := range got {
			if !bytes.Equal(p, wbufPayload(i)) {
				t.Fatalf("record %d after reopening differs", i)
			}
		}
	})
}

// TestWriteBufferPowerCut: an fsync covers the records still in the write buffer when it
// starts (they are written out first), so a power cut after Flush keeps every one of them,
// and loses only what came after.
func TestWriteBufferPowerCut(t *testing.T) {
	fs := vfstest.NewCrashFS()
	dir := t.TempDir()
	l := openTest(t, dir, Options{FS: fs, Flush: FlushAsync, WriteBuffer: 1 << 20, FlushInterval: time.Hour, FlushBytes: 1 << 30})
	defer func() { l.Close() }()
	for i := range 50 {
		if _, err := l.Append(1, [][]byte{payload(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 50; i < 60; i++ {
		if _, err := l.Append(1, [][]byte{payload(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	cut := fs.CutClean()
	l.Close()
	l = openTest(t, dir, Options{FS: cut})
	got, _ := readAll(t, l)
	if len(got) != 50 {
		t.Fatalf("%d records after a power cut that followed the flush of 50, want 50", len(got))
	}
	for i, p := range got {
		if !bytes.Equal(p, payload(i)) {
			t.Fatalf("record %d differs after the cut", i)
		}
	}
}

// TestWriteBufferDefaultAndLazyAppends: a sync-mode log gathers records in a write buffer by
// default (DefaultWriteBuffer), an async one and one with a negative WriteBuffer write
// through the mapping; and with FlushSync, AfterAppendLazy writes the buffer out, so that
// a lazy append's records, acknowledged before any fsync, are in the file (and survive the
// process) when it returns.
func TestWriteBufferDefaultAndLazyAppends(t *testing.T) {
	inFile := func(t *testing.T, dir string, p []byte) bool {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, segmentName(0)))
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Contains(b, p)
	}
	for _, c := range []struct {
		name     string
		mode     FlushMode
		wbuf     int64
		want     int64 // WriteBuffer in effect
		buffered bool  // an append's record is not in the file before AfterAppend
	}{
		{"sync", FlushSync, 0, DefaultWriteBuffer, true},
		{"sync-mapped", FlushSync, -1, -1, false},
		{"async", FlushAsync, 0, 0, false},
		{"async-buffered", FlushAsync, 64 << 10, 64 << 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTest(t, dir, Options{Flush: c.mode, WriteBuffer: c.wbuf, FlushInterval: time.Hour, FlushBytes: 1 << 30})
			if l.opts.WriteBuffer != c.want {
				t.Fatalf("WriteBuffer %d in effect, want %d", l.opts.WriteBuffer, c.want)
			}
			for i := range 3 {
				p := []byte(fmt.Sprintf("lazy-record-%d-%s", i, c.name))
				end, err := l.AppendDeferred(1, [][]byte{p}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := inFile(t, dir, p); got == c.buffered {
					t.Fatalf("record %d in the file before AfterAppendLazy: %v, want %v", i, got, !c.buffered)
				}
				l.AfterAppendLazy(end)
				// With FlushAsync a buffered record stays in the buffer: its loss on a
				// crash of the process is what the option documents.
				if got, want := inFile(t, dir, p), c.mode == FlushSync || !c.buffered; got != want {
					t.Fatalf("record %d in the file after AfterAppendLazy: %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestWriteBufferReaderStalls: a reader that stalls while the writer writes the buffer out
// and appends more still reads the record it asked for: stalled before it took its
// reference, it finds the buffer reused further on and reads the file; stalled after it
// saw the buffer live, it holds it, so the writer makes a new one instead of reusing it.
func TestWriteBufferReaderStalls(t *testing.T) {
	for _, stage := range []int{0, 1} {
		t.Run(fmt.Sprintf("stage %d", stage), func(t *testing.T) {
			l := openTest(t, t.TempDir(), Options{Flush: FlushAsync, WriteBuffer: 4096, FlushInterval: time.Hour, FlushBytes: 1 << 30})
			defer l.Close()
			first := bytes.Repeat([]byte("first "), 50)
			var pos [1]int64
			if _, err := l.Append(1, [][]byte{first}, pos[:]); err != nil {
				t.Fatal(err)
			}
			stalled, resume := make(chan struct{}), make(chan struct{})
			var once sync.Once
			testHookReadBuffered = func(s int) {
				if s == stage {
					once.Do(func() {
						close(stalled)
						<-resume
					})
				}
			}
			defer func() { testHookReadBuffered = nil }()
			type result struct {
				rec Record
				err error
			}
			got := make(chan result, 1)
			go func() {
				r := l.NewReader()
				defer r.Close()
				rec, err := r.Next(pos[0])
				got <- result{rec, err}
			}()
			select {
			case <-stalled:
			case <-time.After(10 * time.Second):
				t.Fatal("the reader did not read from the buffer")
			}
			// The buffer goes to the file, and the next appends fill a buffer from the same
			// offset on: the reused one's bytes, unless the reader holds it.
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			for i := range 8 {
				if _, err := l.Append(2, [][]byte{bytes.Repeat([]byte{byte('a' + i)}, 300)}, nil); err != nil {
					t.Fatal(err)
				}
			}
			close(resume)
			r := <-got
			if r.err != nil || !bytes.Equal(r.rec.Payload, first) {
				t.Fatalf("record at %d = %.30q, %v; want %.30q", pos[0], r.rec.Payload, r.err, first)
			}
		})
	}
}

// writeLogFS records the WriteAt calls on segment files: per file, the end of the bytes
// written that were not all zeros (the records), and the zeros written ahead, so that
// TestZeroAhead can check each zero write against the records written before it.
type writeLogFS struct {
	vfs.FS
	mu     sync.Mutex
	files  []*writeLog // one for each file opened
	overwr []string    // zero writes over record bytes: the bug
}

type writeLog struct {
	name      string // as opened (a segment's temporary name)
	recEnd    int64  // end of the furthest record bytes written
	zeroedTo  int64  // end of the furthest zeros written
	zeroBytes int64
	recWrites int // record writes
	inZeroed  int // record writes that fell wholly within zeros written before
}

func (w *writeLogFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := w.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) == checkpointName {
		return f, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wl := &writeLog{name: name}
	w.files = append(w.files, wl)
	return writeLogFile{f, w, wl}, nil
}

type writeLogFile struct {
	vfs.File
	fs  *writeLogFS
	log *writeLog
}

func (f writeLogFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	wl, end := f.log, off+int64(len(b))
	if bytes.Count(b, []byte{0}) == len(b) {
		if off < wl.recEnd {
			f.fs.overwr = append(f.fs.overwr, fmt.Sprintf("%s: zeros at [%d, %d) over records written to %d", wl.name, off, end, wl.recEnd))
		}
		wl.zeroedTo = max(wl.zeroedTo, end)
		wl.zeroBytes += int64(len(b))
	} else {
		wl.recWrites++
		if end <= wl.zeroedTo {
			wl.inZeroed++
		}
		wl.recEnd = max(wl.recEnd, end)
	}
	f.fs.mu.Unlock()
	return f.File.WriteAt(b, off)
}

// TestZeroAhead: with sync flush and a write buffer, the log writes zeros ahead of its
// records into the segment file (Options.ZeroAhead), so that later records land on blocks
// written before, and never over a record: concurrent appenders across rolls, every record
// read back before and after a reopen. Appends smaller than half of ZeroAhead land in
// zeros written before, but for the first write of each segment.
func TestZeroAhead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		appenders int
	}{{"one appender", 1}, {"8 appenders", 8}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &writeLogFS{FS: vfs.OS}
			dir := t.TempDir()
			const za = 16 << 10
			l := openTest(t, dir, Options{FS: fs, Flush: FlushSync, ZeroAhead: za})
			var wg sync.WaitGroup
			var next atomic.Int64
			const n = 2000 // frames of payload(i) average about 130 bytes: 4 segments of 64 KiB
			for range tc.appenders {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
						end, err := l.Append(1, [][]byte{payload(int(i))}, nil)
						if err == nil {
							err = l.WaitDurable(end)
						}
						if err != nil {
							t.Errorf("Append: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			check := func(l *Log) {
				t.Helper()
				got, _ := readAll(t, l)
				if len(got) != n {
					t.Fatalf("%d records read, want %d", len(got), n)
				}
				seen := make(map[string]bool, n)
				for _, p := range got {
					seen[string(p)] = true
				}
				for i := range n {
					if !seen[string(payload(i))] {
						t.Fatalf("record %d not read back", i)
					}
				}
			}
			check(l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			fs.mu.Lock()
			if len(fs.overwr) > 0 {
				t.Errorf("%d zero writes over records, the first: %s", len(fs.overwr), fs.overwr[0])
			}
			segs := 0
			for _, wl := range fs.files {
				if wl.recWrites == 0 {
					continue // the segment prepared last, or a file not written by a drain
				}
				segs++
				if wl.zeroBytes < za {
					t.Errorf("%s: %d bytes of zeros written ahead, want at least %d", wl.name, wl.zeroBytes, za)
				}
				if tc.appenders == 1 && wl.inZeroed < wl.recWrites-1 {
					t.Errorf("%s: %d of %d record writes landed on zeros written before, want all but the first", wl.name, wl.inZeroed, wl.recWrites)
				}
			}
			fs.mu.Unlock()
			if segs < 3 {
				t.Fatalf("%d segments written, want at least 3", segs)
			}
			l = openTest(t, dir, Options{Flush: FlushSync})
			defer l.Close()
			check(l)
		})
	}
}

// TestZeroAheadHuge: a ZeroAhead past the segment's size zeros the whole segment at the
// first write-out (end+ZeroAhead must not overflow into an empty range).
func TestZeroAheadHuge(t *testing.T) {
	for _, za := range []int64{math.MaxInt64, math.MaxInt64 / 2, 1 << 40} {
		fs := &writeLogFS{FS: vfs.OS}
		l := openTest(t, t.TempDir(), Options{FS: fs, Flush: FlushSync, ZeroAhead: za})
		for i := range 10 {
			appendOne(t, l, 1, payload(i))
		}
		size := l.opts.SegmentSize
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if len(fs.overwr) > 0 {
			t.Errorf("ZeroAhead %d: zero writes over records: %s", za, fs.overwr[0])
		}
		if len(fs.files) == 0 {
			t.Fatalf("ZeroAhead %d: no segment file opened", za)
		}
		if got := fs.files[0].zeroedTo; got != size {
			t.Errorf("ZeroAhead %d: zeros written to %d, want the whole first segment (%d bytes)", za, got, size)
		}
	}
}

// TestZeroAheadOff: ZeroAhead negative, and async flush, write no zeros.
func TestZeroAheadOff(t *testing.T) {
	for _, o := range []Options{{Flush: FlushSync, ZeroAhead: -1}, {Flush: FlushAsync, WriteBuffer: 4 << 10}} {
		fs := &writeLogFS{FS: vfs.OS}
		o.FS = fs
		l := openTest(t, t.TempDir(), o)
		for i := range 500 {
			appendOne(t, l, 1, payload(i))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, wl := range fs.files {
			if wl.zeroBytes > 0 {
				t.Errorf("%+v: %s: %d bytes of zeros written", o, wl.name, wl.zeroBytes)
			}
		}
	}
}
