package cqueue

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgemq/edgemq/store/vfs"
)

func TestAppendReadAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 0, 0)
	appendRange(t, q, 0, 11)
	checkQueue(t, q, 0, 11)
	checkFiles(t, dir, 0, 4, 8)
	if e, ok := q.Last(); !ok || e != ent(10) {
		t.Fatalf("Last() = %+v, %v; want %+v, true", e, ok, ent(10))
	}
	// One Read across all three files.
	buf := make([]Entry, 20)
	if n, err := q.Read(1, buf); n != 10 || err != nil {
		t.Fatalf("Read(1, 20) = %d, %v; want 10, nil", n, err)
	}
	for i, e := range buf[:10] {
		if e != ent(int64(i)+1) {
			t.Fatalf("Read(1)[%d] = %+v, want %+v", i, e, ent(int64(i)+1))
		}
	}
}

func TestAppendErrors(t *testing.T) {
	q := openQueue(t, t.TempDir(), segOpts(4))
	appendRange(t, q, 0, 5)
	tests := []struct {
		name string
		off  int64
		e    Entry
		want error
	}{
		{"rewrite", 4, ent(4), ErrOffsetExists},
		{"far behind", 0, ent(0), ErrOffsetExists},
		{"negative", -1, ent(0), ErrOffsetExists},
		{"gap", 6, ent(6), ErrGap},
		{"zero entry", 5, Entry{}, ErrInvalidEntry},
		{"pos below 64", 5, Entry{Pos: 63, Size: 1}, ErrInvalidEntry},
		{"zero size", 5, Entry{Pos: 64}, ErrInvalidEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := q.Append(tt.off, tt.e); !errors.Is(err, tt.want) {
				t.Fatalf("Append(%d, %+v) = %v, want %v", tt.off, tt.e, err, tt.want)
			}
			checkQueue(t, q, 0, 5)
		})
	}
}

func TestReadErrors(t *testing.T) {
	q := openQueue(t, t.TempDir(), segOpts(4))
	appendRange(t, q, 10, 15)
	tests := []struct {
		name  string
		off   int64
		wantN int
		want  error
	}{
		{"below min", 9, 0, ErrOffsetTooSmall},
		{"negative", -1, 0, ErrOffsetTooSmall},
		{"at max", 15, 0, nil},
		{"past max", 16, 0, ErrOffsetTooLarge},
		{"last", 14, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := q.Read(tt.off, make([]Entry, 4))
			if n != tt.wantN || !errors.Is(err, tt.want) {
				t.Fatalf("Read(%d) = %d, %v; want %d, %v", tt.off, n, err, tt.wantN, tt.want)
			}
		})
	}
	if _, err := q.Get(15); !errors.Is(err, ErrOffsetTooLarge) {
		t.Fatalf("Get(Max) = %v, want ErrOffsetTooLarge", err)
	}
	if _, err := q.Get(9); !errors.Is(err, ErrOffsetTooSmall) {
		t.Fatalf("Get(Min-1) = %v, want ErrOffsetTooSmall", err)
	}
}

func TestReadCorrupt(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	appendRange(t, q, 0, 10)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// Slot 2 of the sealed file 0: Open scans only the last two files, reads must catch it.
	sealed := filepath.Join(dir, fileName(0))
	writeFileAt(t, sealed, []byte{0, 0, 0, 0}, 2*EntrySize+sizeOff)
	q = openQueue(t, dir, segOpts(4))
	active := filepath.Join(dir, fileName(8))
	// Slot 1 of the active file (offset 9), behind the mapping's back.
	writeFileAt(t, active, bytes.Repeat([]byte{0xff}, 8), 1*EntrySize+posOff)

	tests := []struct {
		name     string
		off      int64
		wantN    int
		wantFile string
		wantOff  int64
	}{
		{"sealed", 0, 2, sealed, 2},
		{"active", 8, 1, active, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]Entry, 4)
			n, err := q.Read(tt.off, buf)
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read(%d) = %d, %v; want a *CorruptError", tt.off, n, err)
			}
			if n != tt.wantN || ce.File != tt.wantFile || ce.Offset != tt.wantOff {
				t.Fatalf("Read(%d) = %d, %+v; want %d, {%s %d}", tt.off, n, ce, tt.wantN, tt.wantFile, tt.wantOff)
			}
			for i, e := range buf[:n] {
				if e != ent(tt.off+int64(i)) {
					t.Fatalf("entry %d = %+v, want %+v", i, e, ent(tt.off+int64(i)))
				}
			}
			if _, err := q.Get(tt.wantOff); !errors.As(err, &ce) {
				t.Fatalf("Get(%d) = %v, want *CorruptError", tt.wantOff, err)
			}
		})
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	appendRange(t, q, 0, 10)
	if err := q.Sync(); err != nil {
		t.Fatal(err)
	}
	appendRange(t, q, 10, 13) // not synced: Close must
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 0, 13)
	appendRange(t, q, 13, 17)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 0, 17)
	checkFiles(t, dir, 0, 4, 8, 12, 16)
}

func TestClosed(t *testing.T) {
	q := openQueue(t, t.TempDir(), segOpts(4))
	appendRange(t, q, 0, 3)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Close":        q.Close,
		"Sync":         q.Sync,
		"Append":       func() error { return q.Append(3, ent(3)) },
		"Get":          func() error { _, err := q.Get(0); return err },
		"Read":         func() error { _, err := q.Read(0, make([]Entry, 1)); return err },
		"Search":       func() error { _, err := q.Search(func(Entry) (bool, error) { return false, nil }); return err },
		"TruncateFrom": func() error { return q.TruncateFrom(0) },
		"DeleteBefore": func() error { _, err := q.DeleteBefore(1 << 40); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	if _, ok := q.Last(); ok {
		t.Errorf("Last after Close = _, true; want false")
	}
	if q.Min() != 0 || q.Max() != 3 {
		t.Errorf("Min, Max after Close = %d, %d; want 0, 3", q.Min(), q.Max())
	}
}

// TestFileGolden pins a whole file: its name and its bytes (written by hand from doc.go).
func TestFileGolden(t *testing.T) {
	golden, err := os.ReadFile("testdata/segment.golden")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	for i, e := range []Entry{{Pos: 64, Size: 10, TagHash: 1}, {Pos: 74, Size: 20, TagHash: -1}} {
		if err := q.Append(100+int64(i), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dir, 100)
	got, err := os.ReadFile(filepath.Join(dir, "00000000000000000100.cq"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, golden) {
		t.Fatalf("file = %x\nwant   %x", got, golden)
	}
}

func TestStartAtOffset(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	if err := q.Append(1000, ent(1000)); err != nil {
		t.Fatal(err)
	}
	checkQueue(t, q, 1000, 1001)
	checkFiles(t, dir, 1000)
	if err := q.Append(1002, ent(1002)); !errors.Is(err, ErrGap) {
		t.Fatalf("Append(1002) = %v, want ErrGap", err)
	}
	if err := q.Append(999, ent(999)); !errors.Is(err, ErrOffsetExists) {
		t.Fatalf("Append(999) = %v, want ErrOffsetExists", err)
	}
	appendRange(t, q, 1001, 1010)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 1000, 1010)
	checkFiles(t, dir, 1000, 1004, 1008)

	// Retention empties the queue; it may then restart anywhere at or past Max.
	if _, err := q.DeleteBefore(1 << 50); err != nil {
		t.Fatal(err)
	}
	checkQueue(t, q, 1010, 1010)
	if err := q.Append(1009, ent(1009)); !errors.Is(err, ErrOffsetExists) {
		t.Fatalf("Append(1009) on empty queue = %v, want ErrOffsetExists", err)
	}
	if err := q.Append(5001, ent(5001)); err != nil {
		t.Fatalf("Append(5001) on empty queue: %v", err)
	}
	checkQueue(t, q, 5001, 5002)
	checkFiles(t, dir, 5001)
	appendRange(t, q, 5002, 5006)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 5001, 5006)
	checkFiles(t, dir, 5001, 5005)
}

// TestOpenEmptyFileKeepsStart: a queue restarted at an offset but never written still
// starts there after Open.
func TestOpenEmptyFileKeepsStart(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir, segOpts(4))
	appendRange(t, q, 70, 71)
	if err := q.TruncateFrom(70); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir, segOpts(4))
	checkQueue(t, q, 70, 70)
	if err := q.Append(70, ent(70)); err != nil {
		t.Fatal(err)
	}
	checkQueue(t, q, 70, 71)
}

func TestSearch(t *testing.T) {
	q := openQueue(t, t.TempDir(), segOpts(4))
	if got, err := q.Search(func(Entry) (bool, error) { return true, nil }); got != 0 || err != nil {
		t.Fatalf("Search on empty queue = %d, %v; want 0, nil", got, err)
	}
	appendRange(t, q, 3, 40)
	tests := []struct {
		name   string
		minPos int64
		want   int64
	}{
		{"before all", 0, 3},
		{"first", ent(3).Pos, 3},
		{"exact", ent(17).Pos, 17},
		{"between", ent(17).Pos + 1, 18},
		{"file boundary", ent(8).Pos, 8},
		{"last", ent(39).Pos, 39},
		{"after all", ent(39).Pos + 1, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := q.Search(func(e Entry) (bool, error) { return e.Pos >= tt.minPos, nil })
			if got != tt.want || err != nil {
				t.Fatalf("Search(pos >= %d) = %d, %v; want %d, nil", tt.minPos, got, err, tt.want)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := q.Search(func(Entry) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("Search with failing fn = %v, want %v", err, boom)
	}
}

func TestDiskFull(t *testing.T) {
	t.Run("roll", func(t *testing.T) {
		dir := t.TempDir()
		fs := newFaultFS()
		q := openQueue(t, dir, &Options{FS: fs, SegmentEntries: 4})
		appendRange(t, q, 0, 4)
		fs.full.Store(true)
		for range 2 { // a failed roll changes nothing, so it can be retried
			if err := q.Append(4, ent(4)); !errors.Is(err, vfs.ErrNoSpace) {
				t.Fatalf("Append(4) on a full disk = %v, want ErrNoSpace", err)
			}
			checkQueue(t, q, 0, 4)
			checkFiles(t, dir, 0)
		}
		if err := q.Append(5, ent(5)); !errors.Is(err, ErrGap) {
			t.Fatalf("Append(5) = %v, want ErrGap", err)
		}
		fs.full.Store(false)
		appendRange(t, q, 4, 6)
		checkQueue(t, q, 0, 6)
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		checkQueue(t, openQueue(t, dir, segOpts(4)), 0, 6)
	})
	t.Run("first file", func(t *testing.T) {
		dir := t.TempDir()
		fs := newFaultFS()
		q := openQueue(t, dir, &Options{FS: fs, SegmentEntries: 4})
		fs.full.Store(true)
		if err := q.Append(7, ent(7)); !errors.Is(err, vfs.ErrNoSpace) {
			t.Fatalf("Append(7) on a full disk = %v, want ErrNoSpace", err)
		}
		checkQueue(t, q, 0, 0)
		checkFiles(t, dir)
		fs.full.Store(false)
		appendRange(t, q, 7, 9)
		checkQueue(t, q, 7, 9)
	})
	t.Run("restart", func(t *testing.T) {
		dir := t.TempDir()
		fs := newFaultFS()
		q := openQueue(t, dir, &Options{FS: fs, SegmentEntries: 4})
		appendRange(t, q, 0, 2)
		if _, err := q.DeleteBefore(1 << 50); err != nil {
			t.Fatal(err)
		}
		fs.full.Store(true)
		if err := q.Append(9, ent(9)); !errors.Is(err, vfs.ErrNoSpace) {
			t.Fatalf("Append(9) on a full disk = %v, want ErrNoSpace", err)
		}
		checkQueue(t, q, 2, 2)
		checkFiles(t, dir, 0)
	})
}
