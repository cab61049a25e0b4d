package cqueue

import (
	"testing"

	"github.com/edgemq/edgemq/store/internal/smaps"
)

// TestResidentWindow appends 40,000 entries (800 KB, over 4 × the window) into one file
// without a Sync, then reads them all from the start. With a 64 KiB window the file's
// mapping keeps little more than the window resident, while writing and after reading;
// keeping every page, it holds all 800 KB. Reopened, the queue has every entry: pages
// dropped before they were synced were not lost, and recovery's scan of the file does
// not stay resident.
func TestResidentWindow(t *testing.T) {
	const (
		window = 64 << 10
		n      = 40000
		// Writer: the window plus a step (window/4). Reader: up to the window more between
		// sweeps, and the page-cache folios its faults mapped (a kernel's choice: allow 256
		// KiB).
		writeBound = window + window/4 + 4<<10
		readBound  = writeBound + window + 256<<10
	)
	run := func(t *testing.T, resident int64) (written, read, reopened int64) {
		dir := t.TempDir()
		opts := &Options{SegmentEntries: 1 << 16, ResidentBytes: resident}
		q, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		appendRange(t, q, 0, n)
		written = mappedRss(t, dir)
		buf := make([]Entry, 64)
		for off := int64(0); off < n; {
			k, err := q.Read(off, buf)
			if err != nil || k == 0 {
				t.Fatalf("Read(%d) = %d, %v", off, k, err)
			}
			for i, e := range buf[:k] {
				if e != ent(off+int64(i)) {
					t.Fatalf("Read(%d)[%d] = %+v, want %+v", off, i, e, ent(off+int64(i)))
				}
			}
			off += int64(k)
		}
		read = mappedRss(t, dir)
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		q = openQueue(t, dir, opts)
		reopened = mappedRss(t, dir)
		checkQueue(t, q, 0, n)
		return written, read, reopened
	}
	keptW, keptR, _ := run(t, -1)
	t.Logf("keeping every page: %d KiB resident after appending, %d KiB after reading", keptW>>10, keptR>>10)
	if keptW < n*EntrySize*3/4 {
		t.Skipf("keeping every page left only %d KiB resident: this kernel does not count them", keptW>>10)
	}
	w, r, o := run(t, window)
	t.Logf("64 KiB window: %d KiB resident after appending, %d KiB after reading, %d KiB after reopening", w>>10, r>>10, o>>10)
	if w > writeBound {
		t.Errorf("after appending %d KiB: %d KiB resident, want at most %d KiB", n*EntrySize>>10, w>>10, writeBound>>10)
	}
	if r > readBound {
		t.Errorf("after reading %d KiB: %d KiB resident, want at most %d KiB", n*EntrySize>>10, r>>10, readBound>>10)
	}
	if o > 0 {
		t.Errorf("after reopening: %d KiB resident, want 0", o>>10)
	}
}

// mappedRss returns the resident bytes of this process's mappings of files in dir: the pages
// that count in its RSS, not the page cache.
func mappedRss(t testing.TB, dir string) int64 {
	n, _ := smaps.ForTest(t, smaps.Under(dir))
	return n
}
