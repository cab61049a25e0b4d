package cqueue

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgemq/edgemq/store/internal/vfstest"
)

// FuzzOpen opens a queue of two files whose bytes, and the first one's base offset, are the
// fuzzer's, on an in-memory file system: Open either fails or recovers a queue that reads,
// searches, appends, truncates, deletes and closes, and nothing panics.
func FuzzOpen(f *testing.F) {
	const n = 8
	var whole, torn []byte
	for off := range int64(n) {
		b := make([]byte, EntrySize)
		ent(off).Put(b)
		whole = append(whole, b...)
	}
	torn = append(append([]byte(nil), whole[:3*EntrySize]...), 0xff, 0xff, 0xff)
	f.Add(uint64(0), whole, whole[:2*EntrySize])
	f.Add(uint64(0), whole, torn)
	f.Add(uint64(16), whole, []byte{})
	f.Add(uint64(math.MaxInt64-2*n), whole, whole)
	f.Add(uint64(math.MaxInt64), whole, whole)
	f.Add(uint64(0), whole[:EntrySize], whole)
	f.Add(uint64(0), []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, base uint64, first, second []byte) {
		fs := vfstest.NewCrashFS()
		dir := "/q"
		if err := fs.MkdirAll(dir, dirPerm); err != nil {
			t.Fatal(err)
		}
		b := int64(base &^ (1 << 63))
		write := func(base int64, data []byte) {
			if len(data) > 2*n*EntrySize {
				data = data[:2*n*EntrySize]
			}
			file, err := fs.OpenFile(filepath.Join(dir, fileName(base)), os.O_RDWR|os.O_CREATE, filePerm)
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			if _, err := file.WriteAt(data, 0); err != nil {
				t.Fatal(err)
			}
		}
		write(b, first)
		if b <= math.MaxInt64-n && len(second) > 0 {
			write(b+n, second)
		}
		q, err := Open(dir, &Options{FS: fs, SegmentEntries: n})
		if err != nil {
			return
		}
		lo, hi := q.Min(), q.Max()
		if lo > hi || hi-lo > 2*n {
			t.Fatalf("Min, Max = %d, %d from two files of %d entries", lo, hi, n)
		}
		var buf [3]Entry
		for off := lo; off < hi; off++ {
			if _, err := q.Read(off, buf[:]); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read(%d): %v", off, err)
			}
		}
		q.Last()
		q.Search(func(e Entry) (bool, error) { return e.Pos >= MinPos+100, nil })
		if err := q.Append(hi, Entry{Pos: MinPos + int64(len(first)), Size: 1}); err != nil && !errors.Is(err, ErrOffsetTooLarge) {
			t.Fatalf("Append(Max): %v", err)
		}
		if err := q.TruncateFrom(lo + (hi-lo)/2); err != nil {
			t.Fatalf("TruncateFrom: %v", err)
		}
		if _, err := q.DeleteBefore(MinPos + 200); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DeleteBefore: %v", err)
		}
		if err := q.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}
