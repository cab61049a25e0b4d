package commitlog

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/edgemq/edgemq/store/internal/smaps"
)

type prefaultWake struct {
	busy     bool
	from, to int64
	err      error
}

// openPrefaultTest opens a log in dir whose prefault goroutine reports its wakes on the
// returned channel.
func openPrefaultTest(t *testing.T, dir string, o Options) (*Log, <-chan prefaultWake) {
	wakes := make(chan prefaultWake, 64)
	prefaultHook = func(busy bool, from, to int64, err error) { wakes <- prefaultWake{busy, from, to, err} }
	t.Cleanup(func() { prefaultHook = nil })
	return openTest(t, dir, o), wakes
}

// appendStep appends 1000-byte records to l until it wrote at least n more bytes.
func appendStep(t *testing.T, l *Log, n int64) {
	t.Helper()
	rec := bytes.Repeat([]byte("p"), 1000)
	for end := l.Written() + n; l.Written() < end; {
		if _, err := l.Append(1, [][]byte{rec}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func nextWake(t *testing.T, wakes <-chan prefaultWake) prefaultWake {
	t.Helper()
	select {
	case w := <-wakes:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("the prefault goroutine did not wake")
		return prefaultWake{}
	}
}

// TestPrefault: with async flush, once the writer passes two steps (PrefaultBytes/4) faster
// than PrefaultRate, the pages up to PrefaultBytes past the write position are mapped; the
// records written into them read back after a reopen.
func TestPrefault(t *testing.T) {
	smaps.SkipIfAdviceIgnored(t)
	const ahead = 256 << 10
	dir := t.TempDir()
	o := Options{SegmentSize: 8 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 40, ResidentBytes: -1, PrefaultBytes: ahead, PrefaultRate: 1}
	l, wakes := openPrefaultTest(t, dir, o)
	step := int64(ahead / 4)
	appendStep(t, l, step)
	if w := nextWake(t, wakes); w.busy {
		t.Fatalf("first wake: %+v, want not busy (nothing to measure the rate against)", w)
	}
	appendStep(t, l, step)
	// The appender that passed the second step populates two steps (helpPrefault), the
	// goroutine the rest up to PrefaultBytes past the write position.
	var w prefaultWake
	for w.to < l.Written()+ahead-int64(1)<<pageShift {
		w = nextWake(t, wakes)
		if errors.Is(w.err, errors.ErrUnsupported) {
			t.Skip(w.err) // qemu-user, Linux before 5.14
		}
		if w.err != nil {
			t.Fatal(w.err)
		}
		// A wake may find its range claimed by the other populater (the appender's help,
		// or the goroutine woken twice on a loaded machine): an empty range, from == to.
		if !w.busy || w.to < w.from {
			t.Fatalf("after the second step: %+v, want busy, populating", w)
		}
	}
	if rss := mappedRss(t, dir); rss < w.to-int64(1)<<pageShift {
		t.Errorf("%d KiB of the log resident, want at least the %d KiB up to the prefaulted end", rss>>10, w.to>>10)
	}
	reopenCheck(t, l, dir, o, bytes.Repeat([]byte("p"), 1000))
}

// TestPrefaultHelpedByAppender: while the prefault goroutine is held up, the appender that
// passes a step of a busy log populates the next two steps itself: the pages past the
// write position are resident, and the records written into them read back after a reopen.
func TestPrefaultHelpedByAppender(t *testing.T) {
	smaps.SkipIfAdviceIgnored(t)
	const ahead = 256 << 10
	dir := t.TempDir()
	o := Options{SegmentSize: 8 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 40, ResidentBytes: -1, PrefaultBytes: ahead, PrefaultRate: 1}
	held, release := make(chan struct{}, 1), make(chan struct{})
	prefaultHook = func(busy bool, _, _ int64, _ error) {
		if busy { // the appender's populate
			return
		}
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
	}
	t.Cleanup(func() { prefaultHook = nil })
	l := openTest(t, dir, o)
	step := int64(ahead / 4)
	appendStep(t, l, step) // the goroutine's first wake (not busy) holds it in the hook
	<-held
	appendStep(t, l, step)
	if !l.prefaultOn.Load() {
		close(release)
		l.Close()
		t.Skip("the OS cannot populate a mapping (Linux before 5.14, qemu-user)")
	}
	rss, written := mappedRss(t, dir), l.Written()
	close(release)
	if rss < written+step {
		t.Errorf("%d KiB of the log resident, %d KiB written: want at least a step (%d KiB) populated past it", rss>>10, written>>10, step>>10)
	}
	reopenCheck(t, l, dir, o, bytes.Repeat([]byte("p"), 1000))
}

// reopenCheck closes l, opens dir again with o, and checks that the log ends where l did
// and that every record from its first position on is rec.
func reopenCheck(t *testing.T, l *Log, dir string, o Options, rec []byte) {
	t.Helper()
	end := l.Written()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, o)
	defer l.Close()
	if l.Written() != end {
		t.Fatalf("reopened at %d, wrote up to %d", l.Written(), end)
	}
	r := l.NewReader()
	defer r.Close()
	for pos := l.MinPos(); pos < end; {
		got, err := r.Next(pos)
		if err != nil {
			t.Fatalf("record at %d: %v", pos, err)
		}
		if !bytes.Equal(got.Payload, rec) {
			t.Fatalf("record at %d: %d bytes, not what was written", got.Pos, len(got.Payload))
		}
		pos = got.Next
	}
}

// TestPrefaultOnlyBusyAsync: a log slower than PrefaultRate maps nothing ahead, and with
// sync flush, or PrefaultBytes negative, there is no prefault goroutine at all.
func TestPrefaultOnlyBusyAsync(t *testing.T) {
	dir := t.TempDir()
	l, wakes := openPrefaultTest(t, dir, Options{SegmentSize: 8 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 40, ResidentBytes: -1, PrefaultRate: 1 << 50})
	for i := range 4 {
		appendStep(t, l, DefaultOptions.PrefaultBytes/4)
		if w := nextWake(t, wakes); w.busy {
			t.Fatalf("wake %d: busy at 1 PB/s", i)
		}
	}
	if rss, written := mappedRss(t, dir), l.Written(); rss > written+int64(1)<<pageShift {
		t.Errorf("%d KiB resident for %d KiB written: pages mapped ahead", rss>>10, written>>10)
	}
	l.Close()
	for _, o := range []Options{{Flush: FlushSync}, {Flush: FlushAsync, PrefaultBytes: -1}} {
		l := openTest(t, t.TempDir(), o)
		if l.pkick != nil {
			t.Errorf("%+v: prefault goroutine started", o)
		}
		l.Close()
	}
}

// TestPrefaultThroughRollsAndRetention: a log prefaulted at every step (PrefaultRate 1 B/s)
// while appenders roll small segments and retention deletes the oldest, and a reader reads
// behind the writer: every populate succeeds (one on a mapping gone would fail), nothing
// races, and every record reads back after a reopen.
func TestPrefaultThroughRollsAndRetention(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentSize: testSegSize, Flush: FlushAsync, FlushInterval: time.Millisecond, MaxBytes: 3 * testSegSize,
		MaxAge: -1, MaxUsedRatio: -1, PrefaultBytes: 256 << 10, PrefaultRate: 1}
	var (
		mu        sync.Mutex
		populates int
		failure   error
	)
	prefaultHook = func(busy bool, from, to int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		if busy && to > from {
			populates++
		}
		failure = cmp.Or(failure, err)
	}
	t.Cleanup(func() { prefaultHook = nil })
	l := openTest(t, dir, o)
	const appenders, each = 4, 2000
	rec := bytes.Repeat([]byte("r"), 1000)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { // a reader just behind the writer
		r := l.NewReader()
		defer r.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			pos := max(l.MinPos(), l.Written()-4*int64(len(rec)))
			if got, err := r.Next(pos); err == nil && !bytes.Equal(got.Payload, rec) {
				t.Errorf("record at %d: %d bytes, not what was written", got.Pos, len(got.Payload))
				return
			}
		}
	})
	var appended sync.WaitGroup
	for range appenders {
		appended.Go(func() {
			for range each {
				if _, err := l.Append(1, [][]byte{rec}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	appended.Wait()
	close(stop)
	wg.Wait()
	mu.Lock()
	if errors.Is(failure, errors.ErrUnsupported) {
		t.Skip(failure)
	}
	if failure != nil || populates == 0 {
		t.Fatalf("%d populates; failure: %v", populates, failure)
	}
	mu.Unlock()
	if l.MinPos() < 2*testSegSize {
		t.Fatalf("min position %d: retention deleted nothing", l.MinPos())
	}
	reopenCheck(t, l, dir, o, rec)
}

// TestPopulateBehindWriterDropped: a populate the writer has overtaken maps nothing behind
// the drops. A chunk the writer passed before the populate starts is skipped; one it passes
// while the populate waits (here: the writer goes a window and two steps past it in
// between) is dropped again after it. Either would otherwise stay resident until the
// segment is unmapped: 64 producers of 1 KiB records left 4-8 MiB so.
func TestPopulateBehindWriterDropped(t *testing.T) {
	smaps.SkipIfAdviceIgnored(t)
	const window = 256 << 10
	dir := t.TempDir()
	// No prefault goroutine: the test calls populate itself.
	o := Options{SegmentSize: 8 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 40, ResidentBytes: window, PrefaultBytes: -1}
	l := openTest(t, dir, o)
	defer l.Close()
	appendStep(t, l, 2<<20)
	segs := *l.segs.Load()
	s := segs[len(segs)-1]
	if s.base != 0 {
		t.Fatalf("active segment at %d, want the first", s.base)
	}
	populate := func(from, to int64) {
		t.Helper()
		err := l.populate(s, from, to)
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skip(err) // qemu-user, Linux before 5.14
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	chunks := 0
	populateHook = func(lo, hi int64) { chunks++ }
	t.Cleanup(func() { populateHook = nil })
	populate(512<<10, 1<<20) // long written, and dropped
	if n := residentPages(t, s, 512<<10, 1<<20); n != 0 || chunks != 0 {
		t.Errorf("a populate behind the writer populated %d chunks and left %d pages resident, want none", chunks, n)
	}

	page := int64(1) << pageShift
	from := (l.Written()/page + 1) * page
	to := from + populateChunk
	populateHook = func(lo, hi int64) {
		if lo == from {
			appendStep(t, l, to-from+window+2*l.step)
		}
	}
	populate(from, to)
	if l.Written() < to+window {
		t.Fatalf("the writer is at %d, want past %d", l.Written(), to+window)
	}
	if n := residentPages(t, s, from, to); n != 0 {
		t.Errorf("a populate the writer overtook left %d pages resident, want 0", n)
	}
}

// TestPopulateOutsideSegment: a populate of positions past the segment it was given maps
// nothing and returns. The prefault goroutine takes the active segment, then claims what no
// populate claimed before; when it waits for a CPU in between, the log can roll and an
// appender claim pages of the next segment, and the claim then returns an empty range past
// the end of the segment the goroutine holds, not page-aligned. Rounding its start down to a
// page made it a range of the segment's mapping that does not exist, a slice out of range
// that crashed the process.
func TestPopulateOutsideSegment(t *testing.T) {
	dir := t.TempDir()
	// No prefault goroutine: the test calls populate itself.
	o := Options{SegmentSize: testSegSize, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 40, PrefaultBytes: -1}
	l := openTest(t, dir, o)
	defer l.Close()
	appendStep(t, l, 1000)
	segs := *l.segs.Load()
	s := segs[len(segs)-1]
	page := int64(1) << pageShift
	populateHook = func(lo, hi int64) {
		t.Errorf("populated [%d, %d), outside segment [%d, %d)", lo, hi, s.base, s.base+s.size)
	}
	t.Cleanup(func() { populateHook = nil })
	for _, r := range []struct{ from, to int64 }{
		{s.base + s.size + page + 1000, s.base + s.size + page + 1000}, // an empty claim past the end
		{s.base + s.size + 1000, s.base + s.size + 1000},               // in the next segment's first page
		{s.base + s.size, s.base + s.size + 4*page},                    // the next segment's pages
		{s.base + s.size + 100, s.base + s.size + 4*page},
	} {
		if err := l.populate(s, r.from, r.to); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("populate [%d, %d): %v", r.from, r.to, err)
		}
	}
	// A range that starts in the segment populates the segment's part of it, and no more.
	var got [2]int64
	populateHook = func(lo, hi int64) { got = [2]int64{lo, hi} }
	if err := l.populate(s, s.base+s.size-2*page+100, s.base+s.size+2*page); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		t.Fatal(err)
	}
	if want := [2]int64{s.base + s.size - 2*page, s.base + s.size}; got != want {
		t.Errorf("populated %v, want %v: the segment's last two pages", got, want)
	}
}

// residentPages counts the pages of s's mapping between file offsets lo and hi that are
// mapped in this process (/proc/self/pagemap's present bit).
func residentPages(t *testing.T, s *segment, lo, hi int64) int {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	page := int64(1) << pageShift
	addr := int64(uintptr(unsafe.Pointer(unsafe.SliceData(s.data)))) + lo
	buf := make([]byte, 8*((hi-lo)/page))
	if _, err := f.ReadAt(buf, addr/page*8); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i < len(buf); i += 8 {
		if binary.LittleEndian.Uint64(buf[i:])>>63 == 1 {
			n++
		}
	}
	return n
}
