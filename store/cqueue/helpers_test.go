package cqueue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/edgemq/edgemq/store/vfs"
)

// ent is the entry the tests append at queue offset off: Pos grows with off, as the
// commitlog makes it.
func ent(off int64) Entry {
	return Entry{Pos: MinPos + off*100, Size: int32(off%1000) + 1, TagHash: off*31 - 7}
}

// openQueue opens dir and closes the queue when the test ends.
func openQueue(t testing.TB, dir string, opts *Options) *Queue {
	t.Helper()
	q, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return q
}

// segOpts returns options with n entries per file.
func segOpts(n int) *Options { return &Options{SegmentEntries: n} }

// appendRange appends ent(off) for off in [from, to).
func appendRange(t testing.TB, q *Queue, from, to int64) {
	t.Helper()
	for off := from; off < to; off++ {
		if err := q.Append(off, ent(off)); err != nil {
			t.Fatalf("Append(%d): %v", off, err)
		}
	}
}

// checkQueue checks Min, Max and that every entry in [Min, Max) is ent(off), read one by
// one and in batches that cross file boundaries.
func checkQueue(t testing.TB, q *Queue, wantMin, wantMax int64) {
	t.Helper()
	if got := q.Min(); got != wantMin {
		t.Fatalf("Min() = %d, want %d", got, wantMin)
	}
	if got := q.Max(); got != wantMax {
		t.Fatalf("Max() = %d, want %d", got, wantMax)
	}
	for off := wantMin; off < wantMax; off++ {
		e, err := q.Get(off)
		if err != nil || e != ent(off) {
			t.Fatalf("Get(%d) = %+v, %v; want %+v, nil", off, e, err, ent(off))
		}
	}
	buf := make([]Entry, 7)
	for off := wantMin; off < wantMax; {
		n, err := q.Read(off, buf)
		if err != nil {
			t.Fatalf("Read(%d) = %d, %v", off, n, err)
		}
		if want := int(min(int64(len(buf)), wantMax-off)); n != want {
			t.Fatalf("Read(%d) = %d entries, want %d", off, n, want)
		}
		for i, e := range buf[:n] {
			if e != ent(off+int64(i)) {
				t.Fatalf("Read(%d)[%d] = %+v, want %+v", off, i, e, ent(off+int64(i)))
			}
		}
		off += int64(n)
	}
	if n, err := q.Read(wantMax, buf); n != 0 || err != nil {
		t.Fatalf("Read(Max) = %d, %v; want 0, nil", n, err)
	}
}

// files returns the queue file names in dir.
func files(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// names returns the file names for the given bases.
func names(bases ...int64) []string {
	var s []string
	for _, b := range bases {
		s = append(s, fileName(b))
	}
	return s
}

func checkFiles(t testing.TB, dir string, bases ...int64) {
	t.Helper()
	if got, want := files(t, dir), names(bases...); !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
}

// writeFileAt overwrites bytes of a file behind the queue's back.
func writeFileAt(t testing.TB, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// faultFS wraps vfs.OS and fails Allocate that would grow a file with vfs.ErrNoSpace while
// full is set, and
// Remove while failRemove is set.
type faultFS struct {
	vfs.FS
	full       atomic.Bool
	failRemove atomic.Bool
}

func newFaultFS() *faultFS { return &faultFS{FS: vfs.OS} }

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{File: f, fs: fs}, nil
}

func (fs *faultFS) Remove(name string) error {
	if fs.failRemove.Load() {
		return fmt.Errorf("fault: remove %s: %w", filepath.Base(name), os.ErrPermission)
	}
	return fs.FS.Remove(name)
}

type faultFile struct {
	vfs.File
	fs *faultFS
}

func (f faultFile) Allocate(size int64) error {
	if cur, err := f.Size(); err == nil && cur >= size {
		return nil
	}
	if f.fs.full.Load() {
		return fmt.Errorf("fault: allocate: %w", vfs.ErrNoSpace)
	}
	return f.File.Allocate(size)
}
