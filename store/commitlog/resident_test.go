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
		p := bytes.Repeat([]byte("w"), 1000)
		var want [][]byte
		for l.Written() < total {
			b := append(p[:990:990], strconv.Itoa(len(want))...)
			if _, err := l.Append(1, [][]byte{b}, nil); err != nil {
				t.Fatal(err)
			}
			want = append(want, b)
		}
		if d := l.Durable(); d > HeaderSize {
			t.Fatalf("durable position %d: something flushed while writing", d)
		}
		written = mappedRss(t, dir)
		got, _ := readAll(t, l)
		read = mappedRss(t, dir)
		if len(got) != len(want) {
			t.Fatalf("read %d records, want %d", len(got), len(want))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openTest(t, dir, o)
		defer l.Close()
		got, _ = readAll(t, l)
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
