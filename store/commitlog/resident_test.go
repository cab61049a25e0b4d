package commitlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgemq/edgemq/store/internal/smaps"
)

// TestResidentWindow writes 24 MiB of records (24 × ResidentBytes, over two segment rolls)
// in async mode with no flush on the way, and reads them all back from the start. With a
// 1 MiB window the log's mappings stay near the window while writing (pages go before
// they are flushed) and while reading old segments; keeping every page, they hold all 24
// MiB. After Close the log reopens with every record: dropped pages that were never
// synced were not lost.
func TestResidentWindow(t *testing.T) {
	const (
		window = 1 << 20
		total  = 24 * window
		// Writer: the window, a step (window/4) between drops, and the folio the writer
		// is in (up to a region ahead). Reader: the two regions it entered last.
		writeBound = window + window/4 + regionSize
		readBound  = writeBound + 2*regionSize
	)
	run := func(t *testing.T, resident int64) (written, read int64) {
		dir := t.TempDir()
		o := Options{SegmentSize: 8 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 40, ResidentBytes: resident}
		l := openTest(t, dir, o)
		want, at := appendWindowTest(t, l, total)
		written = mappedRss(t, dir)
		// Read, not Next: a scan drops behind itself (TestScanDropsBehind); readers that
		// read by position leave it to sweeps.
		r := l.NewReader()
		for i, pos := range at {
			rec, err := r.Read(pos)
			if err != nil {
				t.Fatalf("Read(%d): %v", pos, err)
			}
			if !bytes.Equal(rec.Payload, want[i]) {
				t.Fatalf("record %d = %.20q..., want %.20q...", i, rec.Payload, want[i])
			}
		}
		r.Close()
		read = mappedRss(t, dir)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openTest(t, dir, o)
		defer l.Close()
		got, _ := readAll(t, l)
		if len(got) != len(want) {
			t.Fatalf("after reopening: %d records, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("after reopening: record %d = %.20q..., want %.20q...", i, got[i], want[i])
			}
		}
		return written, read
	}
	keptW, keptR := run(t, -1)
	t.Logf("keeping every page: %d KiB resident after writing, %d KiB after reading", keptW>>10, keptR>>10)
	if keptW < total*3/4 {
		t.Skipf("keeping every page left only %d KiB resident: this kernel does not count them", keptW>>10)
	}
	w, r := run(t, window)
	t.Logf("1 MiB window: %d KiB resident after writing, %d KiB after reading", w>>10, r>>10)
	if w > writeBound {
		t.Errorf("after writing %d MiB: %d KiB resident, want at most %d KiB", total>>20, w>>10, writeBound>>10)
	}
	if r > readBound {
		t.Errorf("after reading %d MiB: %d KiB resident, want at most %d KiB", total>>20, r>>10, readBound>>10)
	}
}

// appendWindowTest appends records of 1,000 bytes until the log holds total bytes, with no
// flush on the way, and returns them and their positions.
func appendWindowTest(t *testing.T, l *Log, total int64) (want [][]byte, at []int64) {
	t.Helper()
	p := bytes.Repeat([]byte("w"), 1000)
	pos := make([]int64, 1)
	for l.Written() < total {
		b := append(p[:990:990], strconv.Itoa(len(want))...)
		if _, err := l.Append(1, [][]byte{b}, pos); err != nil {
			t.Fatal(err)
		}
		want = append(want, b)
		at = append(at, pos[0])
	}
	if d := l.Durable(); d > HeaderSize {
		t.Fatalf("durable position %d: something flushed while writing", d)
	}
	return want, at
}

// TestScanDropsBehind writes 24 MiB of records (over two segment rolls) with a 1 MiB window
// and scans them with Next, as the store's dispatcher does when it falls behind: all the way
// the log's mappings must hold no more than after writing plus the region the scan is in and
// a step, the scan dropping what it read (with region sweeps alone they held the last two
// regions entered too, and more; with neither, all it read).
func TestScanDropsBehind(t *testing.T) {
	const (
		window     = 1 << 20
		total      = 24 * window
		writeBound = window + window/4 + regionSize
	)
	dir := t.TempDir()
	o := Options{SegmentSize: 8 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 40, ResidentBytes: window}
	l := openTest(t, dir, o)
	defer l.Close()
	want, _ := appendWindowTest(t, l, total)
	w := mappedRss(t, dir)
	if w > writeBound {
		t.Skipf("after writing: %d KiB resident, over the writer's bound of %d KiB (TestResidentWindow fails)", w>>10, writeBound>>10)
	}
	scanBound := w + regionSize + window/4
	r := l.NewReader()
	defer r.Close()
	var most, sampled int64
	n := 0
	for p := l.MinPos(); ; {
		rec, err := r.Next(p)
		if errors.Is(err, ErrNoRecord) {
			break
		}
		if err != nil {
			t.Fatalf("Next(%d): %v", p, err)
		}
		if n >= len(want) || !bytes.Equal(rec.Payload, want[n]) {
			t.Fatalf("record %d at %d does not match", n, rec.Pos)
		}
		n++
		p = rec.Next
		if p-sampled >= 256<<10 {
			sampled = p
			most = max(most, mappedRss(t, dir))
		}
	}
	if n != len(want) {
		t.Fatalf("scanned %d records, want %d", n, len(want))
	}
	t.Logf("scanning %d MiB: at most %d KiB resident", total>>20, most>>10)
	if most > scanBound {
		t.Errorf("scanning %d MiB: %d KiB resident, want at most %d KiB", total>>20, most>>10, scanBound>>10)
	}
}

// TestResidentDropsUnderConcurrentReaders appends while readers read the tail and random
// older records, with a 64 KiB window so that drops and sweeps run all the time, and
// retention deletes segments under them. Every record read must be the one appended
// there.
func TestResidentDropsUnderConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, Options{SegmentSize: 256 << 10, Flush: FlushAsync, ResidentBytes: 64 << 10, MaxBytes: 2 << 20, MaxUsedRatio: -1})
	defer l.Close()
	const n = 40000
	pos := make([]int64, n)
	var published atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	fail := make(chan error, 4)
	reader := func(tail bool, seed uint64) {
		defer wg.Done()
		r := l.NewReader()
		defer r.Close()
		rng := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			k := published.Load()
			if k == 0 {
				continue
			}
			i := rng.Int64N(k)
			if tail {
				i = k - 1
			}
			rec, err := r.Read(pos[i])
			if errors.Is(err, ErrPositionGone) {
				continue
			}
			if err != nil {
				fail <- err
				return
			}
			if want := payload(int(i)); !bytes.Equal(rec.Payload, want) {
				fail <- errors.New("record " + strconv.FormatInt(i, 10) + " read back wrong")
				return
			}
		}
	}
	for i := range 3 {
		wg.Add(1)
		go reader(i == 0, uint64(i))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				l.Retain()
			}
		}
	}()
	var p [1]int64
	for i := range n {
		if _, err := l.Append(1, [][]byte{payload(i)}, p[:]); err != nil {
			t.Fatal(err)
		}
		pos[i] = p[0]
		published.Store(int64(i + 1))
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-fail:
		t.Fatal(err)
	default:
	}
}

// peakRSS returns VmHWM from /proc/self/status, in bytes, after resetting it if reset.
func peakRSS(t *testing.T, reset bool) int64 {
	t.Helper()
	if reset {
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			t.Skipf("cannot reset the peak RSS: %v", err)
		}
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("status line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmHWM in /proc/self/status")
	return 0
}

// TestRecoveryKeepsPeakLow reopens a log of two 64 MiB segments without its checkpoint, so
// recovery reads every record and scans the zeros after the end of the last segment:
// the peak RSS of the process must not grow by the bytes read (it grew by a whole segment
// when recovery kept what it read).
func TestRecoveryKeepsPeakLow(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 80 MiB")
	}
	dir := t.TempDir()
	o := Options{SegmentSize: 64 << 20, Flush: FlushAsync}
	l := openTest(t, dir, o)
	p := bytes.Repeat([]byte("k"), 64<<10)
	for l.Written() < 80<<20 {
		if _, err := l.Append(1, [][]byte{p}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, checkpointName)); err != nil {
		t.Fatal(err)
	}
	before := peakRSS(t, true)
	l = openTest(t, dir, o)
	grew := peakRSS(t, false) - before
	resident := mappedRss(t, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Open: peak RSS grew by %d KiB; %d KiB of segments resident after it", grew>>10, resident>>10)
	if grew > 16<<20 || resident > 4<<20 {
		t.Errorf("recovery of 80 MiB: peak RSS grew by %d KiB and %d KiB stay resident, want under 16 MiB and 4 MiB", grew>>10, resident>>10)
	}
}

// mappedRss returns the resident bytes of this process's mappings of files in dir: the pages
// that count in its RSS, not the page cache.
func mappedRss(t testing.TB, dir string) int64 {
	n, _ := smaps.ForTest(t, smaps.Under(dir))
	return n
}

// TestScanLeavingSegmentDrops: a scan that leaves a segment in its middle, because the next
// position it is given is in a later segment (the dispatcher skips records handed over to
// it), drops what it left resident of the segment.
func TestScanLeavingSegmentDrops(t *testing.T) {
	const window = 1 << 20
	dir := t.TempDir()
	o := Options{SegmentSize: 8 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushBytes: 1 << 40, ResidentBytes: window}
	l := openTest(t, dir, o)
	defer l.Close()
	_, at := appendWindowTest(t, l, 24*window)
	first := smaps.File(segPath(dir, 0))
	r := l.NewReader()
	defer r.Close()
	i := 0
	for ; at[i] < 3<<20+window/8; i++ { // into segment 0, less than a step past a region
		if _, err := r.Next(at[i]); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := smaps.ForTest(t, first); n == 0 {
		t.Skip("the scan left nothing of segment 0 resident: nothing to test")
	}
	for at[i] < 16<<20 {
		i++
	}
	if _, err := r.Next(at[i]); err != nil {
		t.Fatal(err)
	}
	if n, _ := smaps.ForTest(t, first); n != 0 {
		t.Errorf("after the scan moved on to segment 2: %d KiB of segment 0 resident, want 0", n>>10)
	}
}

// TestAsyncFlushDropsFirst: an async flush drops the whole pages it is about to write back
// from the resident set first, even within ResidentBytes, since writeback would otherwise
// write-protect each mapped page with its own TLB shootdown. A sync flush does not (both
// writing through the mapping: no write buffer).
func TestAsyncFlushDropsFirst(t *testing.T) {
	for _, mode := range []FlushMode{FlushAsync, FlushSync} {
		dir := t.TempDir()
		// Not prefaulted: the pages mapped ahead of the writer stay resident (TestPrefault).
		l := openTest(t, dir, Options{SegmentSize: 8 << 20, Flush: mode, FlushInterval: time.Hour, FlushBytes: 1 << 40, ResidentBytes: 4 << 20, PrefaultBytes: -1, WriteBuffer: -1})
		rec := bytes.Repeat([]byte("f"), 1000)
		for l.Written() < 2<<20 {
			if _, err := l.Append(1, [][]byte{rec}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		rss := mappedRss(t, dir)
		l.Close()
		if mode == FlushAsync && rss > 64<<10 {
			t.Errorf("async: 2 MiB written and flushed, %d KiB still resident, want the flushed pages dropped", rss>>10)
		}
		if mode == FlushSync && rss < 1<<20 {
			t.Errorf("sync: 2 MiB written and flushed, %d KiB resident, want the window kept", rss>>10)
		}
	}
}
